"""Typed, strict configuration: network and accelerator YAML files to validated objects.

Two kinds of file are read here:

* a **network file** (``models/c3d.yaml``) describes a block-circulant 3D CNN layer by layer;
  :func:`load_network` validates it and infers every layer's shapes
  (:attr:`NetworkConfig.resolved`);
* an **accelerator file** (``models/c3d_zcu102.yaml``) describes the hardware generated for one
  network: device, clock, block size, bus and the PE cores with their tiling;
  :func:`load_accelerator` validates it, loads the network it names and checks that every layer
  runs on some core.

Validation is strict: unknown keys are rejected, nothing is coerced (``"3"`` and ``true`` are
not integers), nothing is clamped. Every problem found in a file is reported at once in a
:class:`ConfigError` whose lines read ``<file>: <key path>: <message>``, the key path naming the
layer or core (``layers[3] (conv2a).kernel``) and the message naming the allowed values.

This module is the configuration's public face; each job lives in its own module:

* :mod:`.schema`: the typed models and the hardware's limits;
* :mod:`.resolve`: network resolution (shapes inferred, the graph checked);
* :mod:`.placement`: which core runs which layer, and how;
* :mod:`.errors`: :class:`ConfigError` and the translation of pydantic's errors;
* :mod:`.loading`: reading the files (through :mod:`.yaml_doc`).

Human-readable reports of a configuration belong to the CLI (``fcircnn.describe``).
"""

from __future__ import annotations

from .errors import ConfigError, Problem
from .loading import (
    bind_accelerator,
    builtin_path,
    config_path,
    is_accelerator_data,
    load_accelerator,
    load_config,
    load_network,
)
from .resolve import Pool, ResolvedLayer
from .schema import (
    ALLOWED_BLOCK_SIZES,
    ALLOWED_BUS_WIDTHS,
    INLINE_NETWORK,
    MAX_CHANNEL_TILE,
    MAX_CHANNELS,
    MAX_KERNEL,
    MAX_LAYERS,
    MAX_MAP_SIZE,
    MAX_PADDING,
    MAX_POOL_WINDOW,
    MAX_TILE,
    UNROLL_LOOPS,
    AcceleratorConfig,
    ConvLayer,
    CoreConfig,
    DeviceConfig,
    FcLayer,
    GapLayer,
    InputShape,
    IrfftLayer,
    NetworkConfig,
    PoolConfig,
    Resources,
    RfftLayer,
    channel_tile_problems,
)

__all__ = [
    "ALLOWED_BLOCK_SIZES",
    "ALLOWED_BUS_WIDTHS",
    "INLINE_NETWORK",
    "MAX_CHANNELS",
    "MAX_CHANNEL_TILE",
    "MAX_KERNEL",
    "MAX_LAYERS",
    "MAX_MAP_SIZE",
    "MAX_PADDING",
    "MAX_POOL_WINDOW",
    "MAX_TILE",
    "UNROLL_LOOPS",
    "AcceleratorConfig",
    "ConfigError",
    "ConvLayer",
    "CoreConfig",
    "DeviceConfig",
    "FcLayer",
    "GapLayer",
    "InputShape",
    "IrfftLayer",
    "NetworkConfig",
    "Pool",
    "PoolConfig",
    "Problem",
    "ResolvedLayer",
    "Resources",
    "RfftLayer",
    "bind_accelerator",
    "builtin_path",
    "channel_tile_problems",
    "config_path",
    "is_accelerator_data",
    "load_accelerator",
    "load_config",
    "load_network",
]
