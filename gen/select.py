"""Run a subset of a compiled network: a DDR image whose descriptor list holds only some layers.

:func:`select_layers` turns a :class:`~fcircnn.gen.compiler.DdrImage` into one that runs only the
named layers, so that any layer -- a conv, a residual add, a global average pool, a fully
connected layer -- can be simulated alone and its output checked bit for bit against
``expected[name]``:

* the descriptors of the selected layers (all of a layer's passes, e.g. a separate pool pass),
  in network order, are written compacted from the base of the ``descriptors`` region, relinked
  (``next_desc`` to the following one, 0 and :data:`~fcircnn.arch.descriptor.FLAG_LAST` on the
  last one only); the rest of the region is zero and ``DESC_PTR`` is the region base
  (:attr:`DdrImage.desc_ptr`);
* every map a selected pass reads (``in_base``, and ``res_base`` with
  :data:`~fcircnn.arch.descriptor.FLAG_RESIDUAL`) that a layer outside the selection produces is
  pre-filled with that producer's golden output ``expected[producer]`` in NC/8DHW8
  (:func:`~fcircnn.models.layout.pack_ncdhw8`); the network input is already in the image, and
  maps produced inside the selection are left for the engine to write;
* the output maps of the selected passes are zero.

The rest of the image (weights, post tables, cycle entries, memory map) is unchanged; the
image's :attr:`~fcircnn.gen.compiler.DdrImage.plan` lists only the selected layers (so
``memory_map.json`` describes the list the engine runs) and ``expected`` holds only their
outputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from fcircnn.arch.descriptor import DESCRIPTOR_BYTES, FLAG_LAST, FLAG_RESIDUAL, LayerDescriptor
from fcircnn.models.layout import ncdhw8_size, pack_ncdhw8

from .compiler import DdrImage
from .plan import LayerPlan

__all__ = ["check_layer_names", "layer_descriptors", "select_layers"]


def layer_descriptors(lp: LayerPlan) -> tuple[LayerDescriptor, ...]:
    """The descriptors of one layer in list order: ``lp.descriptors`` (one, or two when a pool
    runs as its own pass), or ``(lp.descriptor,)`` for plans without that attribute."""
    descriptors = getattr(lp, "descriptors", None)
    if descriptors:
        return tuple(descriptors)
    return (lp.descriptor,)


def check_layer_names(valid: Sequence[str], names: Iterable[str]) -> list[str]:
    """Return the distinct ``names`` in the order of ``valid`` (network order).

    Raises
    ------
    ValueError
        If ``names`` is empty or holds a name not in ``valid``; the message lists the valid
        names.
    """
    if isinstance(names, str):
        names = [names]
    wanted = list(names)
    unknown = [n for n in dict.fromkeys(wanted) if n not in valid]
    if unknown:
        raise ValueError(f"unknown layer{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(repr(n) for n in unknown)}; valid layer names: "
                         f"{', '.join(valid)}")
    if not wanted:
        raise ValueError(f"no layer selected; valid layer names: {', '.join(valid)}")
    chosen = set(wanted)
    return [n for n in valid if n in chosen]


def _replace_layer_plan(lp: LayerPlan, descriptors: tuple[LayerDescriptor, ...]) -> LayerPlan:
    names = {f.name for f in dataclasses.fields(lp)}
    changes: dict[str, object] = {}
    if "descriptors" in names:
        changes["descriptors"] = descriptors
    if "descriptor" in names:
        changes["descriptor"] = descriptors[0]
    return dataclasses.replace(lp, **changes)


def select_layers(image: DdrImage, names: Sequence[str]) -> DdrImage:
    """Return a copy of ``image`` that runs only the layers ``names`` (module docstring).

    Parameters
    ----------
    image : DdrImage
        A compiled network (:func:`~fcircnn.gen.compiler.compile_network`) with its full
        descriptor list.
    names : sequence of str
        Layer names (one ``str`` is one name); order and repetitions do not matter: the layers
        run in network order.

    Returns
    -------
    DdrImage
        Same memory map; descriptors of the selected layers compacted and relinked from the
        ``descriptors`` region base (its ``desc_ptr``); inputs and residual maps of the selection
        pre-filled with the golden values; outputs of the selection zero; ``plan.layers`` and
        ``expected`` restricted to the selected layers.

    Raises
    ------
    ValueError
        If a name is not a layer of the image (the message lists the valid names) or none is
        given; or if a selected pass reads a map that is neither the network input nor a layer
        output of the memory map; or if the image's maps are laid out by liveness (a selected
        layer's input would be written into bytes another map may share).
    """
    plan = image.plan
    if plan.reuse_maps:
        raise ValueError("the image's maps are laid out by liveness (reuse_maps): select "
                         "layers from an image compiled without it")
    order = [lp.layer.name for lp in plan.layers]
    chosen = set(check_layer_names(order, names))
    selected = [lp for lp in plan.layers if lp.layer.name in chosen]

    region = plan.region("descriptors")
    passes = [(lp, d) for lp in selected for d in layer_descriptors(lp)]
    addresses = [region.base + i * DESCRIPTOR_BYTES for i in range(len(passes))]
    relinked: dict[str, list[LayerDescriptor]] = {lp.layer.name: [] for lp in selected}
    for i, (lp, d) in enumerate(passes):
        last = i == len(passes) - 1
        relinked[lp.layer.name].append(dataclasses.replace(
            d, next_desc=0 if last else addresses[i + 1],
            flags=(d.flags & ~FLAG_LAST) | (FLAG_LAST if last else 0)))
    if len(passes) * DESCRIPTOR_BYTES > region.size:
        raise ValueError(f"{len(passes)} descriptors do not fit the descriptors region "
                         f"({region.size} bytes)")

    data = bytearray(image.data)

    def span(addr: int, size: int) -> slice:
        start = addr - image.base
        if start < 0 or start + size > len(data):
            raise ValueError(f"[{addr:#x}, {addr + size:#x}) is outside the image")
        return slice(start, start + size)

    data[span(region.base, region.size)] = bytes(region.size)
    flat = [d for lp in selected for d in relinked[lp.layer.name]]
    for addr, d in zip(addresses, flat, strict=True):
        data[span(addr, DESCRIPTOR_BYTES)] = d.pack()

    # Outputs of the selection: zero (the engine writes them).
    written: dict[int, int] = {}
    for d in flat:
        size = ncdhw8_size(d.out_slots, *d.out_shape)
        data[span(d.out_base, size)] = bytes(size)
        written[d.out_base] = size

    # Inputs of the selection produced outside it: the golden values.
    input_base = plan.region("input").base
    producers = {r.base: r for r in plan.regions if r.kind == "output"}
    for lp in selected:
        for d in relinked[lp.layer.name]:
            reads = [("input", d.in_base)]
            if d.flags & FLAG_RESIDUAL:
                reads.append(("residual", d.res_base))
            for what, addr in reads:
                if addr == input_base or addr in written:
                    continue
                r = producers.get(addr)
                if r is None or not r.name.endswith(".output"):
                    raise ValueError(f"layer {lp.layer.name!r} reads its {what} at {addr:#x}, "
                                     "which is neither the network input nor a layer output")
                producer = r.name[: -len(".output")]
                blob = pack_ncdhw8(*image.expected[producer])
                if len(blob) != r.size:
                    raise ValueError(f"expected output of {producer!r} packs to {len(blob)} "
                                     f"bytes, its region {r.name!r} has {r.size}")
                for base, size in written.items():
                    if base < addr + r.size and addr < base + size:
                        raise ValueError(f"region {r.name!r} overlaps an output of the "
                                         "selection")
                data[span(addr, r.size)] = blob

    new_plan = dataclasses.replace(plan, layers=tuple(
        _replace_layer_plan(lp, tuple(relinked[lp.layer.name])) for lp in selected))
    if "desc_ptr" in {f.name for f in dataclasses.fields(plan)}:
        new_plan = dataclasses.replace(new_plan, desc_ptr=region.base)
    expected = {name: parts for name, parts in image.expected.items() if name in chosen}
    return dataclasses.replace(image, data=bytes(data), plan=new_plan, expected=expected)
