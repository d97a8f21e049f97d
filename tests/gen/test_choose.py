"""How each descriptor runs (:mod:`fcircnn.gen.choose`): tiles evened out over the map where the
performance model finds them faster. Port splits are checked with the images they lay out in
``test_compiler.py``."""

from dataclasses import replace

from fcircnn.arch.descriptor import LayerDescriptor, balances_tiles
from fcircnn.arch.geometry import CoreGeometry
from fcircnn.gen.plan import plan_network
from fcircnn.models.config import builtin_path, load_accelerator


def _retiled(d: LayerDescriptor, tile: tuple[int, int, int]) -> LayerDescriptor:
    """``d`` (a conv without a pool in the drain) on ``tile``: its tile counts and the
    rows' and columns' input and output steps."""
    return replace(
        d, tile=tile, tiles=tuple(-(-n // t) for n, t in zip(d.conv_shape, tile, strict=True)),
        in_step=(d.in_step[0], tile[1] * d.stride[1] * d.in_stride[2], tile[2] * d.stride[2]
                 * 16),
        out_step=(d.out_step[0], tile[1] * d.out_stride[2], tile[2] * 16))


def test_balanced_tiles_where_the_model_finds_them_faster():
    # ResNet-18's stage-1 maps are 28 wide: on 8-wide tiles three of 8 and one of 4, whose
    # short compute cannot hide the next box; four of 7 can. The compiler keeps whichever
    # tile the model finds faster, and never evens out a tile with a pool in the drain or row
    # lanes (conv1's carried pool needs even tiles).
    from fcircnn.gen.perf_model import memory_of, model_descriptor

    for name, balanced in (("r3d18_zcu102_best", {"l1b1_conv1", "l1b2_conv2", "l2b1_down"}),
                           ("c3d_zcu102_best", set())):
        acc = load_accelerator(builtin_path(name))
        mem = memory_of(acc)
        for lp in plan_network(acc).layers:
            d, core = lp.descriptor, lp.core
            cg = CoreGeometry.of(core, acc.block_size)
            plain = cg.layer_tile(d.conv_shape)
            even = cg.layer_tile(d.conv_shape, balanced=True)
            if lp.layer.name in balanced:
                assert d.tile == even != plain, lp.layer.name
            if d.tile == plain or not balances_tiles(d.op, d.flags):
                assert d.tile == plain, lp.layer.name
                continue
            # the tiles and steps follow the tile; the core's tile is not faster
            assert _retiled(d, d.tile) == d
            other = _retiled(d, plain)
            spans = [model_descriptor(x, core, acc.block_size, mem)["span"] for x in (d, other)]
            assert spans[0] < spans[1], lp.layer.name
        if name == "r3d18_zcu102_best":
            tiles = {lp.layer.name: lp.descriptor.tile for lp in plan_network(acc).layers}
            assert tiles["conv1"] == (4, 8, 8) and tiles["l1b1_conv1"] == (4, 7, 7)
