"""fcircnn/report.py: the CLI's tables of the image, the estimate, the model and a sweep."""

from __future__ import annotations

from pathlib import Path

from fcircnn.gen.compiler import compile_network
from fcircnn.gen.estimate import estimate_resources
from fcircnn.gen.perf_network import model_network
from fcircnn.models.config import builtin_path, load_accelerator
from fcircnn.report import describe_image, format_estimate, format_report, format_table

MODELS = Path(__file__).resolve().parent.parent / "models"


def test_format_table_aligns_columns():
    assert format_table(["a", "bb"], [[1, 22], [333, 4]]) == [
        "a    bb", "---  --", "1    22", "333  4"]
    assert format_table(["x"], []) == ["x", "-"]


def test_image_description(tmp_path, small_accelerator):
    acc = load_accelerator(small_accelerator(tmp_path))
    image = compile_network(acc, seed=1)
    text = describe_image(image)
    assert "DESC_PTR" in text and f"network {acc.network.name} on {acc.name}" in text
    assert all(f"{lp.layer.name}.weights" in text for lp in image.plan.layers)


def test_model_report_and_gops_per_dsp_column():
    acc = load_accelerator(MODELS / "c3d_zcu102.yaml")
    lines = format_report(model_network(acc, layers=["conv5a", "fc8"], dsp=400))
    assert "GOP/s/DSP" in lines[1] and lines[-1].startswith("total")
    assert any(line.startswith("conv5a") for line in lines)
    assert "GOP/s/DSP" not in format_report(model_network(acc, layers=["fc8"]))[1]


def test_side_by_side_report_with_yosys():
    """``--synth``: Yosys' counts beside the total, the error and the longest path."""
    from fcircnn.gen.synth import LogicPath, SynthReport

    acc = load_accelerator(builtin_path("c3d_zcu102"))
    est = estimate_resources(acc)
    t = est.total
    report = SynthReport(top="fcircnn_accel",
                         cells={"DSP48E2": t.dsp, "RAMB18E2": int(2 * t.bram36), "LUT6": t.lut,
                                "FDRE": 2 * t.ff},
                         rtl_multipliers=t.dsp, soft_multipliers=0,
                         path=LogicPath(levels=9, carries=2, muxes=0,
                                        cells=("from core0.d", "LUT6 x", "to FDRE core0.y")))
    text = "\n".join(format_estimate(acc, est, report))
    assert "yosys" in text and "+0.0%" in text and "-50.0%" in text  # FF: half of Yosys
    assert "9 LUT levels" in text and "to FDRE core0.y" in text
