"""Network compiler: an accelerator configuration and weights to a DDR image.

:func:`compile_network` calibrates and quantizes the network with the golden model
(:func:`fcircnn.models.network.calibrate`), lays out every buffer the layer engine reads or
writes in one contiguous DDR image starting at ``base``, writes one
:class:`~fcircnn.arch.descriptor.LayerDescriptor` per layer (format: :mod:`fcircnn.arch.descriptor`)
and computes the int8 output slots of every layer with the golden integer contract, which the
engine must reproduce bit for bit. :func:`plan_network` does the layout and every check
without touching data (fast, for sizing).

The steps, each its own module: :mod:`fcircnn.gen.plan` (the memory map and the
descriptors; the feature maps by liveness with :mod:`fcircnn.gen.ddr_layout`),
:mod:`fcircnn.gen.choose` (port splits and tile balance, by the performance model),
:mod:`fcircnn.gen.pack` (the bytes), and this module, which calibrates, runs the golden
integer contract and writes the image (:class:`DdrImage`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from fcircnn.arch.descriptor import (
    DESCRIPTOR_BYTES,
    LayerDescriptor,
    weight_parts,
)
from fcircnn.arch.transforms import RFFT_SLOTS
from fcircnn.models.config import AcceleratorConfig
from fcircnn.models.network import (
    LayerOverflowError,
    NetworkWeights,
    QuantizedNetwork,
    calibrate,
    random_input,
    run_int,
)
from fcircnn.models.quant import Granularity
from fcircnn.runtime.image import CompiledImage

from .pack import layer_post_records, layer_weight_slots, pack_network_input, pack_weight_image
from .plan import (
    POST_RECORD_BYTES,
    CompileError,
    NetworkPlan,
    PostOverflowError,
    Region,
    plan_network,
)
from .staging import staged_folder

__all__ = [
    "DdrImage",
    "calibrate_post",
    "compile_network",
    "image_for_clip",
]

@dataclass(frozen=True)
class DdrImage:
    """A compiled network: the image bytes, its memory map, descriptors and expected outputs.

    Attributes
    ----------
    data : bytes
        The image, ``data[0]`` at address ``plan.base``; ``len(data) = plan.end - plan.base``.
    plan : NetworkPlan
        Regions and per-layer descriptors.
    quantized : QuantizedNetwork
        The integer network the image encodes.
    input_parts : (ndarray, ndarray)
        The quantized input slots ``(re, im)`` int8 ``[S, D, H, W]``.
    expected : dict of str to (ndarray, ndarray)
        Per layer name, the int8 output slot parts ``(re, im)`` ``[S, D, H, W]`` (pooled) of the
        golden integer contract: what the engine must write to ``<name>.output``.
    network, accelerator : str
        Names.
    """

    data: bytes
    plan: NetworkPlan
    quantized: QuantizedNetwork
    input_parts: tuple[np.ndarray, np.ndarray]
    expected: dict[str, tuple[np.ndarray, np.ndarray]]
    network: str
    accelerator: str

    @property
    def base(self) -> int:
        return self.plan.base

    @property
    def regions(self) -> tuple[Region, ...]:
        return self.plan.regions

    @property
    def descriptors(self) -> tuple[LayerDescriptor, ...]:
        return self.plan.descriptors

    @property
    def desc_ptr(self) -> int:
        return self.plan.desc_ptr

    def region(self, name: str) -> Region:
        return self.plan.region(name)

    def read(self, addr: int, size: int) -> bytes:
        """``size`` image bytes at absolute address ``addr``."""
        if addr < self.base or addr + size > self.base + len(self.data):
            raise ValueError(f"[{addr:#x}, {addr + size:#x}) is outside the image")
        return self.data[addr - self.base:addr - self.base + size]

    def memory_map(self) -> dict:
        """JSON-ready memory map: image extent, regions and descriptor fields."""
        return {
            "network": self.network,
            "accelerator": self.accelerator,
            "base": self.base,
            "end": self.plan.end,
            "size": len(self.data),
            "address_width": self.plan.address_width,
            "desc_ptr": self.desc_ptr,
            "windows": {kind: {"first": lo, "last": hi}
                        for kind, (lo, hi) in zip(("read", "write"), self.plan.windows,
                                                  strict=True)},
            "descriptor_bytes": DESCRIPTOR_BYTES,
            "post_record_bytes": POST_RECORD_BYTES,
            "maps": {"reused": self.plan.reuse_maps,
                     "bytes_separate": self.plan.map_bytes_separate,
                     "bytes_reused": self.plan.map_bytes_reused},
            "regions": [{"name": r.name, "base": r.base, "size": r.size, "kind": r.kind,
                         "description": r.description,
                         **({"live": list(r.live)} if self.plan.reuse_maps
                            and r.live is not None else {})}
                        for r in self.regions],
            "descriptors": [{"name": lp.layer.name, "core_name": lp.core.name, **d.as_dict()}
                            for lp in self.plan.layers for d in lp.descriptors],
        }

    #: The files :meth:`save` writes, in writing order.
    FILES = ("image.bin", "memory_map.json", "expected.npz")

    def save(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Write ``image.bin``, ``memory_map.json`` and ``expected.npz`` (int8 arrays
        ``<layer>.re`` / ``<layer>.im`` and ``input.re`` / ``input.im``) into ``directory``
        (created if missing; other files left alone); return the paths.

        All three or none: they are written into a temporary folder and moved into place
        together (:func:`~fcircnn.gen.staging.staged_folder`).

        Raises
        ------
        OSError
            A file cannot be written or moved into place (``directory`` is then unchanged).
        """
        out = Path(directory)
        arrays = {"input.re": self.input_parts[0].astype(np.int8),
                  "input.im": self.input_parts[1].astype(np.int8)}
        for name, (re, im) in self.expected.items():
            arrays[f"{name}.re"] = re.astype(np.int8)
            arrays[f"{name}.im"] = im.astype(np.int8)
        with staged_folder(out) as tmp:
            (tmp / self.FILES[0]).write_bytes(self.data)
            (tmp / self.FILES[1]).write_text(json.dumps(self.memory_map(), indent=2) + "\n")
            with open(tmp / self.FILES[2], "wb") as f:
                np.savez(f, **arrays)
        return [out / name for name in self.FILES]


def _clip(net, x) -> np.ndarray:
    """``x`` as a float clip of the network's input shape (:class:`CompileError` if not)."""
    inp = net.input
    expected_shape = (inp.channels, inp.depth, inp.height, inp.width)
    x = np.asarray(x, dtype=np.float64)
    if x.shape != expected_shape:
        raise CompileError(f"input has shape {x.shape}, network {net.name} expects "
                           f"{expected_shape}")
    return x


def _expected(plan: NetworkPlan, ints) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per layer, the int8 output slot parts of the contract's run; for a pass that runs an
    rfft in its post chain, the rfft's (what the pass writes)."""
    expected = {name: (t.re.astype(np.int8), t.im.astype(np.int8))
                for name, t in ints.items() if name}
    for lp in plan.layers:
        expected[lp.layer.name] = expected[lp.output]
    return expected


def _with_rfft(plan: NetworkPlan, qnet: QuantizedNetwork, B: int) -> NetworkPlan:
    """``plan`` with each rfft pass's requantization in its descriptor (``rfft_mult``, one
    per part and slot position of a block, and ``rfft_shift``: the quantized network's, the
    same for every block)."""
    layers = []
    for lp in plan.layers:
        if lp.rfft is not None:
            post = qnet.layers[lp.rfft.name].post
            mult = [0] * (2 * RFFT_SLOTS)
            for p in (0, 1):
                for k in range(B // 2):
                    mult[p * RFFT_SLOTS + k] = int(post.mult[p, k]) & 0xFFFF
            d = replace(lp.descriptor, rfft_mult=tuple(mult), rfft_shift=int(post.shift[0, 0]))
            lp = replace(lp, descriptor=d, descriptors=(d, *lp.descriptors[1:]))
        layers.append(lp)
    return replace(plan, layers=tuple(layers))


def calibrate_post(net, **kwargs):
    """:func:`fcircnn.models.network.calibrate` (same arguments and result), a layer whose post
    parameters do not fit their fields raised as :class:`PostOverflowError`."""
    try:
        return calibrate(net, **kwargs)
    except LayerOverflowError as exc:
        why = str(exc).removeprefix(f"layer {exc.layer!r}: ")
        raise PostOverflowError(f"layer {exc.layer!r}: post parameters: {why}") from None


def compile_network(
    acc: AcceleratorConfig,
    *,
    weights: NetworkWeights | None = None,
    x: np.ndarray | None = None,
    seed: int = 0,
    granularity: Granularity = "tensor",
    base: int = 0,
    geometry=None,
    calibration: np.ndarray | None = None,
    statistic: str = "max",
    progress=None,
    reuse_maps: bool = False,
) -> DdrImage:
    """Compile ``acc.network`` into a DDR image for ``acc``.

    Parameters
    ----------
    acc : AcceleratorConfig
        Validated accelerator bound to its network.
    weights : NetworkWeights, optional
        Float weights (default: random with ``seed``); missing CBN is calibrated on ``x``.
    x : ndarray ``[C, D, H, W]``, optional
        Input clip (default: random with ``seed``); calibrates the int8 scales and is written
        quantized into the ``input`` region.
    seed, granularity
        As in :func:`fcircnn.models.network.run_network`.
    calibration : ndarray ``[N, C, D, H, W]``, optional
        Calibration set: the int8 scales (and CBN parameters the weights lack) come from these
        clips instead of ``x`` alone; ``x`` is still the clip the image runs.
    statistic : str
        ``"max"`` or a percentile ``"pQ"`` of the magnitudes over the calibration data
        (:func:`~fcircnn.models.quant.calibration_percentile`).
    base : int
        Address of the image, a multiple of 4096.
    progress : callable ``(label, done, total)``, optional
        Per layer of the calibration's float pass and of the integer pass that gives the
        expected outputs (:data:`fcircnn.models.network.Progress`).
    geometry : sequence of EngineGeometry, optional
        The hardware's buffer geometry per core (see :func:`plan_network`).
    reuse_maps : bool
        Lay the feature maps out by liveness (see :func:`plan_network`).

    Returns
    -------
    DdrImage
        Whose ``expected`` equals ``run_network(net, ("int",), ...)``'s ``int_outputs`` for the
        same arguments.

    Raises
    ------
    CompileError
        See :func:`plan_network`; also a post parameter that does not fit int16/int48, or an
        input of the wrong shape.
    """
    plan = plan_network(acc, base=base, geometry=geometry, reuse_maps=reuse_maps)
    net = acc.network
    x = _clip(net, random_input(net, seed) if x is None else x)
    weights, qnet = calibrate_post(net, weights=weights, x=x, seed=seed,
                                   granularity=granularity, clips=calibration,
                                   statistic=statistic, progress=progress)
    xq = qnet.quantize_input(net, x)
    ints = run_int(net, qnet, xq, progress)
    B = acc.block_size
    plan = _with_rfft(plan, qnet, B)

    image = bytearray(plan.end - plan.base)

    def put(addr: int, blob: bytes) -> None:
        image[addr - plan.base:addr - plan.base + len(blob)] = blob

    for k, d in enumerate(plan.descriptors):
        put(plan.desc_ptr + k * DESCRIPTOR_BYTES, d.pack())
    put(plan.region("input").base, pack_network_input(plan, *xq))
    for lp in plan.layers:
        ql, d = qnet.layers[lp.layer.name], lp.descriptor
        put(d.weight_base, pack_weight_image(*layer_weight_slots(lp, ql, B), lp.core.tn,
                                             lp.core.tm, B, parts=weight_parts(d.flags)))
        put(d.post_base, layer_post_records(lp, ql))
    expected = _expected(plan, ints)
    ddr = DdrImage(bytes(image), plan, qnet, (xq[0].astype(np.int8), xq[1].astype(np.int8)),
                   expected, net.name, acc.name)
    # The checks a host makes of an image (its regions, the list in its bytes, the windows):
    # an ImageError here is a bug of this compiler, not bad input.
    CompiledImage.from_ddr_image(ddr)
    return ddr


def image_for_clip(acc: AcceleratorConfig, image: DdrImage, x: np.ndarray) -> DdrImage:
    """``image`` with clip ``x`` in its ``input`` region and the contract's outputs for it.

    Weights, post tables, descriptors and the int8 scales stay those of ``image`` (the input
    is quantized with its input scale), so running many clips costs one compilation and one
    calibration, not one each. For an image compiled with a calibration set the result equals
    ``compile_network`` of the same arguments with ``x`` (the scales do not depend on ``x``).

    Raises
    ------
    CompileError
        If ``x`` does not have the network's input shape or ``image`` is of another network.
    """
    net = acc.network
    if image.network != net.name or image.accelerator != acc.name:
        raise CompileError(f"image is of {image.accelerator}/{image.network}, not "
                           f"{acc.name}/{net.name}")
    x = _clip(net, x)
    qnet = image.quantized
    xq = qnet.quantize_input(net, x)
    ints = run_int(net, qnet, xq)
    data = bytearray(image.data)
    blob = pack_network_input(image.plan, *xq)
    start = image.plan.region("input").base - image.plan.base
    data[start:start + len(blob)] = blob
    expected = _expected(image.plan, ints)
    return replace(image, data=bytes(data),
                   input_parts=(xq[0].astype(np.int8), xq[1].astype(np.int8)),
                   expected=expected)
