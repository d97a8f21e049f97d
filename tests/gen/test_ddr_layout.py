"""The feature maps' layout (:mod:`fcircnn.gen.ddr_layout`): one after another, or by liveness,
on random and hand-made live ranges."""

import itertools
from dataclasses import dataclass

import numpy as np

from fcircnn.gen.ddr_layout import reused_layout, separate_layout
from fcircnn.gen.plan import ALIGN


@dataclass(frozen=True)
class _Spec:
    span: int
    live: tuple[int, int]


def _sharing_is_legal(specs, offsets):
    """No two specs whose live ranges meet share a byte."""
    for (a, oa), (b, ob) in itertools.combinations(zip(specs, offsets, strict=True), 2):
        meet = a.live[0] <= b.live[1] and b.live[0] <= a.live[1]
        if meet:
            assert oa + a.span <= ob or ob + b.span <= oa, (a, oa, b, ob)


def test_reused_layout_never_shares_bytes_between_maps_live_together():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        specs = []
        for _ in range(n):
            lo = int(rng.integers(0, 10))
            specs.append(_Spec(int(rng.integers(1, 9)) * ALIGN, (lo, lo + int(rng.integers(0, 4)))))
        offsets, total = reused_layout(specs)
        _sharing_is_legal(specs, offsets)
        assert all(o % ALIGN == 0 for o in offsets)
        assert total == max(o + s.span for o, s in zip(offsets, specs, strict=True))
        # never more than one after another, never less than the bytes live at one time
        assert total <= separate_layout(specs)[1]
        busiest = max(sum(s.span for s in specs if s.live[0] <= t <= s.live[1])
                      for t in range(14))
        assert total >= busiest


def test_a_chain_of_maps_takes_its_two_largest_neighbours():
    # A plain chain: map k written by descriptor k, read by k + 1.
    spans = [3, 5, 2, 7, 1, 4]
    specs = [_Spec(s * ALIGN, (k, k + 1)) for k, s in enumerate(spans)]
    _, total = reused_layout(specs)
    assert total == max(a + b for a, b in itertools.pairwise(spans)) * ALIGN
