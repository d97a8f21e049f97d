"""fcircnn: FPGA accelerators for block-circulant 3D CNNs in the frequency domain."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("fcircnn")  # stated once, in pyproject.toml
except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
    __version__ = "0+unknown"
