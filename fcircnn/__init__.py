"""fcircnn: FPGA accelerators for block-circulant 3D CNNs in the frequency domain.

``fcircnn.predict(accelerator, clips, weights=..., on=...)`` is
:func:`fcircnn.runtime.predict.predict`: class scores of clips on an accelerator given as a
file, a built-in name or a loaded object, on the golden contract, the RTL or the board
(``docs/api.md``). It is imported on first use, so ``import fcircnn`` stays light (the
board's Python and every lower layer import this package).
"""

from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__: str = version("fcircnn")  # stated once, in pyproject.toml
except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
    __version__ = "0+unknown"

__all__ = ["__version__", "predict"]


def __getattr__(name: str) -> Any:
    """``fcircnn.predict``, imported on first use (PEP 562)."""
    if name == "predict":
        from fcircnn.runtime.predict import predict

        return predict
    raise AttributeError(f"module 'fcircnn' has no attribute {name!r}")
