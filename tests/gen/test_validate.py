"""gen/validate.py: the one validation behind every command."""

from __future__ import annotations

import pytest

from fcircnn.gen.estimate import DEFAULT_CAP, estimate_resources
from fcircnn.gen.validate import over_cap_message, validate_accelerator
from fcircnn.models.config import ConfigError, builtin_path, load_accelerator


@pytest.mark.parametrize("name", ["c3d_zcu102", "r3d18_zcu102", "c3d_zcu102_best",
                                  "r3d18_zcu102_best"])
def test_shipped_accelerators_pass_at_the_default_cap(name):
    acc = load_accelerator(builtin_path(name))
    plan = validate_accelerator(acc, cap=DEFAULT_CAP)
    assert len(plan.layers) == len(acc.network.resolved)


def test_over_cap_names_the_binding_resource_first():
    acc = load_accelerator(builtin_path("c3d_zcu102"))
    est = estimate_resources(acc)
    use = est.utilization(acc.device.resources)
    worst = max(use, key=use.__getitem__)
    text = over_cap_message(est, acc, 0.05)
    assert text.startswith(f"c3d_zcu102 does not fit {acc.device.part} under the 5% cap: "
                           f"binding resource {worst} ")
    assert "also over:" in text
    assert over_cap_message(est, acc, 1.0) is None
    with pytest.raises(ConfigError, match=f"c3d_zcu102.yaml: .*binding resource {worst}"):
        validate_accelerator(acc, cap=0.05)
    validate_accelerator(acc, cap=None)  # no resource check


def test_compiler_refusal_is_reported_against_the_file(tmp_path, small_accelerator):
    acc = load_accelerator(small_accelerator(tmp_path))
    validate_accelerator(acc)
    tiny_space = acc.model_copy(update={"cores": (acc.cores[0].model_copy(
        update={"max_stride": (1, 1, 1)}),)})
    assert tiny_space.bind(acc.network, acc.path)  # the schema's placement already objects
    with pytest.raises(ConfigError, match=r"acc\.yaml: layer 'c3': no core .* max_stride"):
        validate_accelerator(tiny_space)


def test_non_zynq_part_is_refused(tmp_path, small_accelerator):
    acc = load_accelerator(small_accelerator(tmp_path))
    other = acc.model_copy(update={"device": acc.device.model_copy(
        update={"part": "xc7a35tcpg236-1"})})
    assert not other.bind(acc.network, acc.path)
    with pytest.raises(ConfigError, match="Zynq UltraScale"):
        validate_accelerator(other)


def test_validation_leaves_no_unused_hardware_behind():
    # The constructors run, the hierarchy is never elaborated: nothing may warn later, when a
    # collection elsewhere finalises it (Amaranth arms the warning at the first elaboration).
    import gc
    import warnings

    from amaranth.hdl import Elaboratable, Fragment, Module, UnusedElaboratable

    class Empty(Elaboratable):
        def elaborate(self, platform):
            return Module()

    Fragment.get(Empty(), None)
    validate_accelerator(load_accelerator(builtin_path("c3d_zcu102")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, UnusedElaboratable)]
