"""PyTorch front end: train block-circulant 3D CNNs in the frequency domain, export weights.

Needs the ``[torch]`` extra (``pip install 'fcircnn[torch]'``); nothing else in ``fcircnn``
imports this package, so the core install and every command run without PyTorch.

The layers compute the golden model's numeric contract (:mod:`fcircnn.models.spectral`,
docs/contract.md sections 2 to 6) on batches of slot tensors ``[N, 2, S, D, H, W]`` (axis 1:
real and imaginary part) with gradients:

* :class:`BlockCirculantConv3d`, :class:`BlockCirculantLinear`: generators as parameters in
  the weights file's layout, computed through ``torch.fft.rfft`` on packed slots;
* :class:`CBN`, :class:`CReLU`, :class:`CMaxPool3d`: the post operators, per part;
* :mod:`fcircnn.torch.fakequant`: quantization-aware training of the int8 slot contract
  (per-tensor shared scales, ``[-127, 127]``, the post-unit's integer requantization);
* :func:`build`: the :class:`SlotNetwork` of any network file (time-domain clips in, class
  scores out); :func:`export` / :func:`load` / :func:`from_weights`: the weights file that
  ``fcircnn golden|compile|run --weights`` read.

Example
-------
>>> import torch, fcircnn.torch as ft
>>> model = ft.build("c3d")                       # doctest: +SKIP
>>> scores = model(torch.randn(2, 3, 16, 112, 112))  # doctest: +SKIP
>>> ft.export(model.eval(), "w.npz")              # doctest: +SKIP
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401
except ModuleNotFoundError as exc:  # pragma: no cover - exercised without the extra
    raise ModuleNotFoundError(
        "fcircnn.torch needs PyTorch, which is not installed: pip install 'fcircnn[torch]'",
        name=exc.name) from exc

from .circulant import BlockCirculantConv3d, BlockCirculantLinear
from .fakequant import ActObserver
from .model import SlotLayer, SlotNetwork, build, network_config
from .post import CBN, CMaxPool3d, CReLU
from .slots import from_slots, pad_channels, slot_conv3d, to_slots, weight_slots
from .weights import export, from_weights, load, network_weights

__all__ = [
    "CBN",
    "ActObserver",
    "BlockCirculantConv3d",
    "BlockCirculantLinear",
    "CMaxPool3d",
    "CReLU",
    "SlotLayer",
    "SlotNetwork",
    "build",
    "export",
    "from_slots",
    "from_weights",
    "load",
    "network_config",
    "network_weights",
    "pad_channels",
    "slot_conv3d",
    "to_slots",
    "weight_slots",
]
