"""``python -m fcircnn.cli``: the ``fcircnn`` command."""

import sys

from fcircnn.cli import main

sys.exit(main())
