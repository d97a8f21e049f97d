"""fcircnn.gen: Verilog and Vivado generation, the compiler, the estimators and the sweep."""

from importlib.metadata import PackageNotFoundError, version

try:
    #: The installed fcircnn's version (``pyproject.toml`` states it once), written into
    #: every generated file's banner.
    TOOL_VERSION: str = version("fcircnn")
except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
    TOOL_VERSION = "0+unknown"
