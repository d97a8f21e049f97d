"""fcircnn.arch: the architecture's contract, stated once.

What the hardware (``fcircnn.hw``), the compiler and estimators (``fcircnn.gen``), the
testbenches (``fcircnn.sim``) and the CLI all build on, and nothing they build: the layer
descriptor's binary format (:mod:`.descriptor`) and the geometry of a core, its legality rules
and buffer limits (:mod:`.geometry`), which AXI port carries which transfer
(:mod:`.ports`), the control registers (:mod:`.registers`) and the IP's names (:mod:`.ip`).
It imports none of the packages above it, nor the configuration (``fcircnn.models``, which
checks files against these rules).
"""
