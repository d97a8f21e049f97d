"""The post-unit stages' shared shape (:mod:`fcircnn.hw.post_stage`): every stage checks
``lanes`` and its own parameters the same way and has the same three ports."""

import pytest
from amaranth.lib import stream
from amaranth.lib.wiring import In, Out

from fcircnn.hw.common import never_elaborated
from fcircnn.hw.post_cbn import CBNResidual, cbn_config_layout, cbn_input_layout, cbn_output_layout
from fcircnn.hw.post_crelu import CReLU
from fcircnn.hw.post_lane0 import IrfftLane0
from fcircnn.hw.post_quantize import Quantize
from fcircnn.hw.post_rfft import RfftSum
from fcircnn.hw.post_stage import MAX_LANES, PostStage, check_lanes

STAGES = [CBNResidual, Quantize, CReLU, IrfftLane0, RfftSum]


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(("lanes", "error", "match"), [
    (0, ValueError, rf"lanes must be in 1\.\.{MAX_LANES}, not 0"),
    (MAX_LANES + 4, ValueError, rf"lanes must be in 1\.\.{MAX_LANES}, not {MAX_LANES + 4}"),
    (True, TypeError, "lanes must be an integer, not True"),
])
def test_every_stage_refuses_bad_lanes_alike(stage, lanes, error, match):
    assert issubclass(stage, PostStage)
    with pytest.raises(error, match=match):
        stage(lanes)


def test_a_stage_s_own_checks_run_after_lanes_and_its_ports_follow_its_layouts():
    with pytest.raises(ValueError, match=r"acc_width must be in 2\.\.32, not 33"):
        CBNResidual(8, acc_width=33)
    with pytest.raises(ValueError, match="lanes must be in"):  # lanes first
        CBNResidual(0, acc_width=33)
    stage = CBNResidual(4, acc_width=27)
    never_elaborated(stage)  # built to inspect its ports
    assert (stage.lanes, stage.acc_width) == (4, 27)
    members = stage.signature.members
    assert members["i"] == In(stream.Signature(cbn_input_layout(4)))
    assert members["o"] == Out(stream.Signature(cbn_output_layout(4)))
    assert members["cfg"] == In(cbn_config_layout)
    check_lanes(MAX_LANES)
