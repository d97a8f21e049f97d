"""Design-space sweep (:mod:`fcircnn.gen.sweep`) and ``fcircnn sweep``."""

import csv

import pytest

from fcircnn.cli import main
from fcircnn.gen import sweep
from fcircnn.gen.sweep import DEVICES, Evaluation, Point, SweepError, SweepSpace
from fcircnn.models.config import builtin_path, load_accelerator, load_network

ZCU102 = DEVICES["zcu102"]


@pytest.fixture(scope="module")
def c3d():
    return load_network(builtin_path("c3d"))


@pytest.fixture(scope="module")
def r3d18():
    return load_network(builtin_path("r3d18"))


def test_space_enumerates_every_combination_once():
    space = SweepSpace(tn=(16, 32), tm=(32,), td=(1, 2), tr=(7,), tc=(7, 14), cores=(1, 2),
                       pointwise=((8, 32),))
    points = list(space.points(8))
    # td = 1 is never "unrolled" (same hardware): 2 tn x (1 + 2) td/unroll x 2 tc x 2 core sets
    assert len(points) == 2 * 3 * 2 * 2 == space.size(8)
    assert len(set(points)) == len(points)
    assert {p.pointwise for p in points} == {None, (8, 32)}
    assert not any(p.td == 1 and p.unroll_td for p in points)


@pytest.mark.parametrize("kwargs, message", [
    ({"tn": ()}, "tn: the range is empty"),
    ({"tm": (0, 16)}, "tm: values must be positive"),
    ({"cores": (3,)}, "cores: allowed values are 1 and 2"),
    ({"block_sizes": (6,)}, "--block-size: [6] are not allowed"),
    ({"cores": (2,), "pointwise": ()}, "pointwise"),
    ({"axi_ports": (1, 5)}, "--axi-ports: allowed values are 1, 2, 3, 4, not [1, 5]"),
])
def test_space_rejects_bad_ranges(kwargs, message):
    with pytest.raises(SweepError, match=message.replace("[", r"\[").replace("]", r"\]")):
        SweepSpace(**kwargs)


def test_point_becomes_a_valid_accelerator(r3d18):
    point = Point(8, 32, 32, 2, 7, 7, True, (8, 32))
    acc = sweep.accelerator_for(point, r3d18, ZCU102, 200.0)
    spatial, pointwise = acc.cores[1], acc.cores[0]
    assert (spatial.tn, spatial.tm, spatial.td, spatial.unroll) == (32, 32, 2, ("td", "tn", "tm"))
    assert spatial.max_kernel == (7, 7, 7) and pointwise.max_kernel == (1, 1, 1)
    assert acc.core_for(r3d18.layer("l2b1_down")).name == "pointwise"
    assert acc.core_for(r3d18.layer("conv1")).name == "spatial"
    assert acc.device.resources.dsp == 2520


def test_block_size_override_rebuilds_the_network(c3d):
    acc = sweep.accelerator_for(Point(4, 16, 32, 1, 7, 7, False), c3d, ZCU102, 200.0)
    assert acc.block_size == 4
    assert all(layer.block_size == 4 for layer in acc.network.resolved)


def _ev(label, status, gops, dsp, bram=10.0, binding=""):
    return Evaluation(label, status, effective_gops=gops, dsp=dsp, bram36=bram, binding=binding)


def test_pareto_front_keeps_only_undominated_fitting_points():
    evs = [_ev("a", "ok", 100, 10), _ev("b", "ok", 90, 20), _ev("c", "ok", 300, 30),
           _ev("d", "over", 999, 5), _ev("e", "ok", 250, 40)]
    assert [e.label for e in sweep.pareto_front(evs, "dsp")] == ["a", "c"]


def _eff(label, gops, dsp):
    return Evaluation(label, "ok", effective_gops=gops, dsp=dsp, gops_per_dsp=gops / dsp)


def test_objective_ranks_under_a_floor_on_the_other_figure():
    evs = [_eff("big", 4000, 1400), _eff("lean", 2800, 700), _eff("tiny", 900, 200),
           _eff("big2", 4000, 1300), Evaluation("x", "over", effective_gops=9e9, dsp=1)]
    result = sweep.SweepResult(None, ZCU102, 0.9, evs)
    assert result.best.label == "big2"  # most GOP/s, then fewer DSPs
    result.objective = sweep.Objective("gops", floor=3.5)
    assert [e.label for e in result.fitting] == ["lean", "tiny"]
    result.objective = sweep.Objective("gops_per_dsp", floor=1000)
    assert result.best.label == "lean"
    result.objective = sweep.Objective("gops", floor=10)
    with pytest.raises(sweep.SweepError, match=r"no fitting point meets the objective \(maximise "
                                               r"GOP/s with GOP/s per DSP >= 10\).*tiny"):
        _ = result.best
    with pytest.raises(sweep.SweepError, match="maximise 'gops' or 'gops_per_dsp'"):
        sweep.Objective("dsp")
    assert [e.label for e in sweep.efficiency_front(evs)] == ["big2", "lean", "tiny"]


def test_no_fit_message_names_the_binding_resource():
    evs = [_ev("a", "over", 100, 3000, 100.0, "dsp"), _ev("b", "over", 200, 4000, 50.0, "dsp"),
           Evaluation("c", "illegal", reason="layer 'x': kernel too large")]
    text = sweep.no_fit_message(evs, ZCU102, 0.9)
    assert "binding resource: dsp" in text and "3000" in text and "2268" in text
    only_illegal = sweep.no_fit_message(evs[2:], ZCU102, 0.9)
    assert "no point of the sweep is a legal configuration" in only_illegal
    assert "kernel too large" in only_illegal


def test_written_yaml_loads_back_as_the_same_hardware(tmp_path, c3d):
    point = Point(8, 32, 64, 2, 7, 7, False)
    path = sweep.write_accelerator_yaml(point, c3d, ZCU102, 200.0, tmp_path / "best.yaml",
                                        network_file=str(builtin_path("c3d")), name="c3d_best",
                                        comment="line one\nline two")
    assert path.read_text().startswith("# line one\n# line two\n")
    acc = load_accelerator(path)
    core = acc.cores[0]
    assert (core.tn, core.tm, core.td, core.tr, core.tc) == (32, 64, 2, 7, 7)
    assert core.unroll == ("tn", "tm") and acc.name == "c3d_best"


def test_cli_rejects_bad_ranges_without_traceback(capsys):
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        main(["sweep", "c3d", "--tn", "16,x"])
    assert exc.value.code == 2
    assert "argument --tn: must be a comma-separated list" in capsys.readouterr().err
    assert main(["sweep", "c3d", "--cores", "3", "-q"]) == 2
    assert "cores: allowed values are 1 and 2" in capsys.readouterr().err


def test_jobs_are_bounded_by_the_cpus_and_the_points(c3d, monkeypatch):
    space = SweepSpace(tn=(16,), tm=(32,), td=(1,), tr=(7,), tc=(7,), cores=(1,),
                       unroll_td=(False,))
    with pytest.raises(SweepError, match=r"jobs must be in 1\.\.\d+ \(the CPUs"):
        sweep.run_sweep(c3d, space, DEVICES["zcu102"], jobs=sweep.max_jobs() + 1)
    started = []
    monkeypatch.setattr(sweep, "ProcessPoolExecutor", lambda n, **kw: started.append(n))
    monkeypatch.setattr(sweep, "max_jobs", lambda: 64)
    result = sweep.run_sweep(c3d, space, DEVICES["zcu102"], jobs=64)  # one point: no pool
    assert started == [] and len(result.evaluations) == 1


def test_small_sweep_end_to_end(tmp_path, capsys, c3d):
    out = tmp_path / "sweep"
    code = main(["sweep", "c3d", "-o", str(out), "-q", "--tn", "16,32", "--tm", "32,64",
                 "--td", "1,2", "--tr", "7", "--tc", "7", "--cores", "1", "-j", "2"])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    points = [r for r in rows if not r["reference"]]
    assert len(points) == SweepSpace(tn=(16, 32), tm=(32, 64), td=(1, 2), tr=(7,), tc=(7,),
                                     cores=(1,)).size(8)
    assert [r["label"] for r in rows if r["reference"] == "reference"] == ["c3d_zcu102"]
    fitting = sorted((r for r in points if r["status"] == "ok"),
                     key=lambda r: -float(r["effective_gops"]))
    assert fitting, "some small configuration must fit the ZCU102"
    best = load_accelerator(out / "best.yaml")
    core = best.cores[0]
    assert fitting[0]["label"].startswith(f"{core.tn}/{core.tm}/{core.td}")
    assert fitting[0]["label"] in printed and "ref: c3d_zcu102" in printed
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # larger PE arrays are faster and cost more DSPs: the model and estimator agree in trend
    by_label = {r["label"]: r for r in points}
    small, big = by_label["16/32/1/7/7"], by_label["32/64/2u/7/7"]
    assert float(big["effective_gops"]) > float(small["effective_gops"])
    assert int(big["dsp"]) > int(small["dsp"])


def test_sweep_times_points_and_references_with_the_given_memory(c3d):
    """A what-if memory system reaches every point and the references."""
    from fcircnn.gen.perf_model import MemoryModel

    space = SweepSpace(tn=(32,), tm=(64,), td=(2,), tr=(8,), tc=(8,), cores=(1,),
                       unroll_td=(True,))
    refs = [load_accelerator(builtin_path("c3d_zcu102"))]
    rtl = sweep.run_sweep(c3d, space, ZCU102, references=refs)
    wide = sweep.run_sweep(c3d, space, ZCU102, references=refs,
                           memory=MemoryModel(axi_ports=4))
    for a, b in zip([*rtl.evaluations, *rtl.references], [*wide.evaluations, *wide.references],
                    strict=True):
        assert a.label == b.label and a.dsp == b.dsp
        assert b.cycles < a.cycles


def test_two_ports_are_a_dimension_of_the_sweep(c3d):
    """``axi_ports`` doubles the points; a two-port point is the same core with the weight
    port: the same DSPs, one more read engine, and on C3D (weight-bound fc layers) faster."""
    space = SweepSpace(tn=(32,), tm=(64,), td=(2,), tr=(8,), tc=(8,), cores=(1,),
                       unroll_td=(True,), axi_ports=(1, 2))
    points = list(space.points(8))
    assert [p.axi_ports for p in points] == [1, 2]
    assert [p.label for p in points] == ["32/64/2u/8/8", "32/64/2u/8/8@2p"]
    assert sweep.accelerator_for(points[1], c3d, ZCU102, 200.0).axi_ports == 2
    one, two = sweep.run_sweep(c3d, space, ZCU102).evaluations
    assert one.dsp == two.dsp and two.lut > one.lut and two.ff > one.ff
    assert two.cycles < one.cycles
    assert main(["sweep", "c3d", "--axi-ports", "5", "-q"]) == 2


def test_four_ports_are_a_dimension_of_the_sweep(c3d):
    """Four ports: the same DSPs, more read engines and pool lanes, never slower than two."""
    space = SweepSpace(tn=(32,), tm=(64,), td=(2,), tr=(8,), tc=(8,), cores=(1,),
                       unroll_td=(True,), axi_ports=(2, 4), dma_queue=(2,))
    points = list(space.points(8))
    assert [p.label for p in points] == ["32/64/2u/8/8@2pq2", "32/64/2u/8/8@4pq2"]
    two, four = sweep.run_sweep(c3d, space, ZCU102).evaluations
    assert two.dsp == four.dsp and four.lut > two.lut and four.ff > two.ff
    assert four.cycles <= two.cycles


def test_sweep_with_no_fitting_point_names_the_resource(tmp_path, capsys):
    code = main(["sweep", "c3d", "-q", "--tn", "128", "--tm", "256", "--td", "8",
                 "--unroll-td", "yes", "--tr", "7", "--tc", "7", "--cores", "1", "--cap", "0.1",
                 "-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "binding resource" in err and "dsp" in err
