"""fcircnn: FPGA accelerators for block-circulant 3D CNNs in the frequency domain."""

__version__ = "0.1.0"
