"""Class scores from clips: the golden integer contract or the generated RTL.

:func:`predict` takes time-domain clips ``[N, C, D, H, W]``, quantizes each to int8 slots with
fixed int8 scales (measured on a calibration set, or stored with the weights by ``fcircnn
calibrate``), or else with each clip's own scales, so that a clip's scores never depend on the
other clips it runs beside; runs it through
the chosen target, reads the network's int8 output slots, dequantizes them and takes the
inverse transform: the class scores (the network's last layer, in the time domain). On
``"golden"`` the target is the bit-exact NumPy contract; on ``"sim"`` and ``"board"`` the network
is compiled into an image once (calibrated once), each clip written into its input region
(:func:`~fcircnn.gen.compiler.image_for_clip`) and run on the accelerator's RTL (cocotb on Verilator
or Icarus) or on the accelerator behind a :class:`fcircnn.runtime.driver.Backend` (the board's
:class:`~fcircnn.runtime.driver.PynqBackend`); on both every layer's output is checked bit for bit
against the contract, and the scores are computed from the output the accelerator wrote to memory.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["TARGETS", "ClipResult", "Prediction", "predict"]

#: Where :func:`predict` can run.
TARGETS = ("golden", "sim", "board")


@dataclass(frozen=True)
class ClipResult:
    """One clip on a target: its class ``scores``, and on ``"sim"`` and ``"board"`` the
    per-layer bit-exact check (``mismatched``: layers whose output differs from the contract,
    or the run's failure) and cycles; on ``"board"`` also every layer's
    :class:`~fcircnn.runtime.driver.LayerResult`."""

    scores: np.ndarray
    mismatched: tuple[str, ...] = ()
    cycles: int | None = None
    layers: tuple[Any, ...] = ()

    @property
    def top1(self) -> int:
        return int(np.argmax(self.scores))


@dataclass(frozen=True)
class Prediction:
    """What :func:`predict` returns: per clip, a :class:`ClipResult`."""

    target: str
    clips: tuple[ClipResult, ...]
    calibration: str

    @property
    def scores(self) -> np.ndarray:
        """``[N, classes]``."""
        return np.stack([c.scores for c in self.clips])

    @property
    def bit_exact(self) -> bool:
        """Whether every layer of every clip matched the contract (always on ``golden``)."""
        return not any(c.mismatched for c in self.clips)


def _scores(net: Any, qnet: Any, re: np.ndarray, im: np.ndarray) -> np.ndarray:
    """Dequantize the last layer's int8 slots and take them back to the time domain (the
    inverse transform, or the channels of a time-domain output as its layout places them)."""
    from fcircnn.models import quant, timedomain

    last = net.resolved[-1]
    slots = quant.dequantize_slots(re, im, qnet.layers[last.name].out_scale)
    return timedomain.from_layout(slots, last.out_layout, last.block_size,
                                  last.out_channels).reshape(-1)


def predict(acc: Any, clips: np.ndarray | str | os.PathLike[str], *,
            on: Literal["golden", "sim", "board"] = "golden", weights: Any = None,
            seed: int = 0, calibration: np.ndarray | None = None, statistic: str = "max",
            granularity: str = "tensor", simulator: str = "verilator",
            build_dir: str | os.PathLike[str] | None = None, backpressure: float = 0.0,
            backend: Any = None, timeout_s: float = 10.0,
            progress: Callable[[int, int], None] | None = None,
            status: Callable[[str], None] | None = None) -> Prediction:
    """Class scores of ``clips`` ``[N, C, D, H, W]`` on ``acc``'s network, on target ``on``.

    Parameters
    ----------
    acc : AcceleratorConfig, path or str
        An accelerator file or built-in name (``"c3d_zcu102"``), loaded and checked by the
        schema and the compiler, or a loaded one (validated, e.g. by
        :func:`fcircnn.gen.validate.validate_accelerator`).
    clips : ndarray ``[N, C, D, H, W]`` or path
        The clips, or a ``.npy`` file of them (checked as ``fcircnn run --input``).
    weights : NetworkWeights or path, optional
        The weights or their ``.npz`` file (checked as ``--weights``, with any calibration
        stored in it). Default: random with ``seed`` (as ``fcircnn compile``).
    calibration : ndarray ``[M, C, D, H, W]``, optional
        The calibration set of the int8 scales (and of CBN parameters ``weights`` lack).
        Default: the calibration stored with ``weights``; without one, each clip is
        calibrated on itself (alone: its scores do not depend on the batch), which
        ``on="board"`` refuses, since a board runs one image with fixed scales.
    statistic, granularity
        As for :func:`fcircnn.models.network.calibrate`.
    simulator, build_dir, backpressure
        For ``on="sim"``, as ``fcircnn sim``.
    backend : fcircnn.runtime.driver.Backend
        For ``on="board"`` (required there): the accelerator, e.g.
        ``PynqBackend("fcircnn_accel.bit")``; each clip's image is placed in its memory.
    timeout_s : float
        For ``on="board"``: the longest a clip may run (backend clock).
    progress : callable ``(done, total)``, optional
        Called after each clip.
    status : callable ``(text)``, optional
        For ``on="sim"``: told each step of each clip's RTL run (converting or reusing the
        Verilog, building or reusing the simulator model, simulating), as ``fcircnn sim``
        prints them.

    Raises
    ------
    fcircnn.models.config.ConfigError, fcircnn.models.files.ArrayFileError
        For an accelerator file, a clips file or a weights file that is not right, naming it.
    fcircnn.gen.plan.CompileError
        For an accelerator file whose cores cannot run its network.
    ValueError
        For an unknown target, clips of the wrong shape, a network without class scores
        (:func:`~fcircnn.models.network.class_scores_problem`), or ``on="board"`` without
        fixed scales.
    fcircnn.gen.plan.CompileError
        If a clip cannot be compiled (``sim``).
    fcircnn.simulate.SimulationError, fcircnn.sim.runner.SimulatorUnavailable
        If the RTL cannot be run.
    """
    from fcircnn.models.network import (
        calibrate,
        class_scores_problem,
        load_clips,
        load_weights,
        random_weights,
        run_int,
    )

    if on not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {on!r}")
    if on == "board" and backend is None:
        raise ValueError("on='board' needs the accelerator's backend (backend=PynqBackend(...))")
    acc = _accelerator(acc)
    net = acc.network
    if isinstance(weights, (str, os.PathLike)):
        weights = load_weights(net, os.fspath(weights))
    if isinstance(clips, (str, os.PathLike)):
        clips = load_clips(net, os.fspath(clips))
    if problem := class_scores_problem(net):
        raise ValueError(problem)
    expected = (net.input.channels, *net.input.shape)
    clips = np.asarray(clips, dtype=np.float64)
    if clips.ndim != 5 or clips.shape[1:] != expected or not len(clips):
        raise ValueError(f"clips must be [N, {', '.join(map(str, expected))}], not "
                         f"{list(clips.shape)}")
    weights = random_weights(net, seed) if weights is None else weights
    fixed = calibration is not None or weights.calibration is not None
    if on == "board" and not fixed:
        raise ValueError("on='board' needs fixed int8 scales: weights with a calibration "
                         "(fcircnn calibrate) or a calibration set (calibration=...)")
    if fixed:
        weights, qnet = calibrate(net, weights=weights, x=clips[0], clips=calibration,
                                  statistic=statistic, granularity=granularity)
        how = weights.calibration.describe()
    else:
        how = "each clip's own scales"
    last = net.resolved[-1].name
    results = []
    image = None
    for i, clip in enumerate(clips):
        if not fixed:  # CBN parameters the weights lack come from this clip: set on copies
            own, qnet = calibrate(net, weights=_fresh(weights), x=clip, statistic=statistic,
                                  granularity=granularity)
        if on == "golden":
            out = run_int(net, qnet, qnet.quantize_input(net, clip))[last]
            results.append(ClipResult(_scores(net, qnet, out.re, out.im)))
            continue
        image = _image(acc, image if fixed else None, clip, weights if fixed else own)
        if on == "board":
            results.append(_on_backend(acc, image, qnet, backend, timeout_s))
        else:
            results.append(_on_rtl(acc, image, qnet, simulator, build_dir, backpressure, i,
                                   status))
        if progress is not None:
            progress(i + 1, len(clips))
    return Prediction(on, tuple(results), how)


def _fresh(weights: Any) -> Any:
    """``weights`` with copies of its per-layer records (calibration sets a record's CBN
    parameters when it lacks them; the arrays themselves are never changed, so they are
    shared, not copied)."""
    from fcircnn.models.network import NetworkWeights

    return NetworkWeights({name: dataclasses.replace(lw) for name, lw in weights.layers.items()},
                          weights.calibration)


def _accelerator(acc: Any) -> Any:
    """``acc`` itself, or the accelerator file (or built-in name) ``acc`` loaded and checked
    by the schema and the compiler (:func:`~fcircnn.gen.plan.plan_network`: every layer
    runs on its cores); the hardware's own checks and the resource cap are ``fcircnn
    check``'s, which a board does not carry."""
    if not isinstance(acc, (str, os.PathLike)):
        return acc
    from fcircnn.gen.plan import plan_network
    from fcircnn.models.config import (
        AcceleratorConfig,
        ConfigError,
        Problem,
        config_path,
        load_config,
    )

    path = config_path(os.fspath(acc))
    config = load_config(path)
    if not isinstance(config, AcceleratorConfig):
        raise ConfigError(path, [Problem("", "a network file, not an accelerator file; give "
                                             "an accelerator file such as c3d_zcu102")])
    plan_network(config)
    return config


def _image(acc, previous, clip, weights):
    """The image of ``clip`` with the calibration ``weights`` carry: compiled, or, given the
    ``previous`` clip's image of the same scales, only its input region and expected outputs
    changed (:func:`~fcircnn.gen.compiler.image_for_clip`)."""
    from fcircnn.gen.compiler import compile_network, image_for_clip

    if previous is None:
        return compile_network(acc, weights=weights, x=clip)
    return image_for_clip(acc, previous, clip)


def _on_rtl(acc, image, qnet, simulator, build_dir, backpressure, index,
            status=None) -> ClipResult:
    """One clip's image run on the RTL; scores from what it wrote."""
    from fcircnn import simulate as sim
    from fcircnn.sim.tb_accelerator import output_path

    with sim.build_dir_env(build_dir) as build:
        image_dir = sim.save_image(image, build)
        with tempfile.TemporaryDirectory(dir=build, prefix=f"predict-{index}-") as tmp:
            results = Path(tmp) / "results.json"
            sim.run_rtl(acc, image_dir, results, simulator=simulator, seed=index,
                        backpressure=backpressure, status=status,
                        timeout_cycles=sim.estimate_timeout_cycles(acc, image, backpressure))
            outcome = sim.read_results(results)
            with np.load(output_path(results)) as out:
                re, im = out["re"].astype(np.int64), out["im"].astype(np.int64)
    names = [lp.layer.name for lp in image.plan.layers]
    mismatched = tuple(layer.name for layer in outcome.layers if not layer.passed)
    if sim.failed(outcome, names) and not mismatched:
        mismatched = (f"run {outcome.status}",)
    return ClipResult(_scores(acc.network, qnet, re, im), mismatched, outcome.total_cycles)


def _on_backend(acc, ddr_image, qnet, backend, timeout_s) -> ClipResult:
    """One clip's image run through the driver on ``backend``; scores from what the
    accelerator wrote, every layer checked against the contract."""
    import asyncio

    from fcircnn.runtime.driver import Driver
    from fcircnn.runtime.image import CompiledImage

    image = CompiledImage.from_ddr_image(ddr_image)
    last = image.layer_names()[-1]

    async def run():
        driver = Driver(backend)
        placed = driver.place(image)
        report = await driver.run(placed, timeout_s)
        return report, await driver.read_output(placed, last)

    report, (re, im) = asyncio.run(run())
    mismatched = tuple(layer.name for layer in report.layers if not layer.passed)
    status = report.status
    if status.error:  # named with its code and address, not left to look like wrong scores
        stopped = (f"run stopped with error {status.error_code} ({status.error_name}) at "
                   f"{status.error_addr:#x}")
        mismatched = (stopped, *mismatched)
    elif not status.done and not mismatched:
        mismatched = (f"run {status.state}",)
    return ClipResult(_scores(acc.network, qnet, re.astype(np.int64), im.astype(np.int64)),
                      mismatched, report.counters.cycles, report.layers)
