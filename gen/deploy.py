"""The deployment folder: everything to copy to a ZCU102 running PYNQ to run an accelerator.

:func:`deploy` writes, into one folder::

    fcircnn_accel.bit, .hwh, .xsa   the overlay (copied from the Vivado build's vivado/out/),
                                    or BITSTREAM.md saying which commands make them
    accelerator.yaml                the accelerator, its network written into it
    weights.npz                     the network's weights with the int8 calibration the
                                    image was compiled with (fcircnn.models.calibration)
    clips.npy                       clips to run [N, C, D, H, W]
    fcircnn-<version>-py3-none-any.whl  this fcircnn's core, to install on the board offline
    image/                          the compiled image of the first clip (image.bin,
                                    memory_map.json, expected.npz), for the driver alone
    deploy.json                     the manifest run.py reads (names, statistic, sizes)
    run.py                          loads the overlay, runs predict() on the board, prints the
                                    class scores, per-layer cycles and bit-exact checks
    README.md                       how to run it on the board

The board installs the wheel (``pip install --no-deps``: the core, whose dependencies numpy,
pyyaml, pydantic and tqdm it must have) on PYNQ's Python 3.10, and ``run.py``
(:func:`fcircnn.runtime.board.main`) does the rest.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fcircnn.arch.ip import CLOCK_FILE, IP_NAME, read_clock_file
from fcircnn.models.config import AcceleratorConfig
from fcircnn.models.overlay import overlay_problem
from fcircnn.runtime.image import CompiledImage

from . import TOOL_VERSION
from .compiler import DdrImage, calibrate_post, compile_network
from .staging import OutputConflict, staged_folder, target_conflict
from .wheel import core_requirements, core_wheel, wheel_name

__all__ = ["BOARD_FILES", "MANIFEST", "OUTPUT_FILES", "OVERLAY_FILES", "DeployResult",
           "OverlayError", "deploy", "image_bytes_needed", "overlay_problem_in"]

#: The manifest's name in the folder.
MANIFEST = "deploy.json"
#: The overlay's files as the Vivado flow writes them (gen/vivado.py), the first two required.
OVERLAY_FILES = ("fcircnn_accel.bit", "fcircnn_accel.hwh", "fcircnn_accel.xsa")
#: ... and the build's record of the clock ``pl_clk0`` gets (``fcircnn.arch.ip.CLOCK_FILE``),
#: copied with them when the build wrote it: :mod:`fcircnn.runtime.board` reads it beside the
#: ``.bit``.
OVERLAY_COPIED = (*OVERLAY_FILES, CLOCK_FILE)
#: The files every deployment folder has.
#: The wheel of this fcircnn (:mod:`fcircnn.gen.wheel`), installed on the board.
WHEEL = wheel_name(TOOL_VERSION)
BOARD_FILES = ("accelerator.yaml", "weights.npz", "clips.npy", MANIFEST, "run.py", "README.md",
               WHEEL)
#: Every file a deployment may write (or, for BITSTREAM.md, remove), relative to its folder.
OUTPUT_FILES = (*BOARD_FILES, *(f"image/{n}" for n in DdrImage.FILES), *OVERLAY_COPIED,
                "BITSTREAM.md")

_RUN_PY = '''#!/usr/bin/env python3
"""Run {name} on this board: the overlay, then every clip through the accelerator.

Usage: python3 run.py [--clips clips.npy] [--bitstream fcircnn_accel.bit] [--timeout S]
                      [--top K] [--json results.json]

Prints each clip's top classes, the accelerator's cycles per layer and whether every layer's
output equals the golden integer contract bit for bit; exit code 1 on a mismatch or a failed
run (an engine error with its code and address, or a run past --timeout, which the driver
stops with CTRL.abort), 2 on bad input. Needs the core fcircnn package ({version}) on the board
(pip install --no-deps {wheel}, in this folder).
"""

import sys
from pathlib import Path

try:
    from fcircnn.runtime.board import main
except ImportError as exc:
    sys.exit(f"run.py needs the fcircnn package {version} on the board ({{exc}}): "
             "pip install --no-deps {wheel} (in this folder)")

if __name__ == "__main__":
    sys.exit(main(Path(__file__).resolve().parent, sys.argv[1:]))
'''

_README = '''# {name} on a ZCU102 with PYNQ

Made by fcircnn {version} (`fcircnn deploy`). Copy this folder to the board, then on the board:

```sh
pip install --no-deps {wheel}   # fcircnn {version}, offline
sudo -E python3 run.py              # the clips in clips.npy
sudo -E python3 run.py --clips my_clips.npy --json results.json
```

(`sudo -E`: PYNQ needs root to load an overlay and map memory.) The wheel is the core of
fcircnn (no hardware, simulation or PyTorch extras); `--no-deps` installs it without a
network, and it needs what PYNQ's Python 3.10 must then already have: {requires}.

| file | what it is |
|---|---|
| `fcircnn_accel.bit`, `.hwh` (`.xsa`) | the overlay: {overlay} |
| `accelerator.yaml` | the accelerator, its network inside |
| `weights.npz` | the weights, with the fixed int8 scales every clip runs with |
| `clips.npy` | {clips} clip(s) `{shape}` to run by default |
| `image/` | the first clip's compiled image, for `fcircnn.runtime.driver.Driver` alone |
| `deploy.json` | what `run.py` reads |
| `{wheel}` | the fcircnn that made this folder, to install on the board |

`run.py` loads the overlay, allocates a {mem_mib} MiB DDR buffer (`pynq.allocate`), and for
each clip compiles its image, places it in the buffer, runs it (interrupt, or polling without an
interrupt controller), reads every layer's output back and compares it with the golden integer
contract, and prints the class scores and the per-layer cycles. Exit code 0: every clip ran and
every layer was bit-exact; 1: a mismatch or a failed run (the layer and first differing slot
are printed); 2: bad input.
'''

_BITSTREAM_MD = '''# The overlay is not here yet

`fcircnn deploy` was given no Vivado build output (`--vivado`). Make it on a machine with Vivado
(2019.2 or newer), then deploy again with `--vivado DIR`:

```sh
fcircnn generate {config} -o build/{name}
cd build/{name}/vivado && vivado -mode batch -source build.tcl
fcircnn deploy {config} -o {out} --vivado build/{name}/vivado/out
```

or copy `fcircnn_accel.bit` and `fcircnn_accel.hwh` from `vivado/out/` into this folder.
'''


@dataclass(frozen=True)
class DeployResult:
    """What :func:`deploy` wrote: the folder, its files, and whether the overlay is in it."""

    folder: Path
    files: tuple[str, ...]
    overlay: bool


def image_bytes_needed(image: Any) -> int:
    """DDR bytes the board must allocate for ``image`` (a compiled image or its
    :class:`~fcircnn.gen.plan.NetworkPlan`: anything with ``base`` and ``end``), from its
    base, rounded up to 1 MiB."""
    size = image.end - image.base
    return -(-size // (1 << 20)) * (1 << 20)


def _accelerator_yaml(acc: AcceleratorConfig) -> str:
    import yaml

    data = acc.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["network"] = acc.network.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return (f"# {acc.name}, written by fcircnn {TOOL_VERSION} (fcircnn deploy), network "
            "inside\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=None,
                                        width=100))


class OverlayError(ValueError):
    """The Vivado build's folder given to :func:`deploy` holds no loadable overlay."""


def overlay_problem_in(vivado: str | os.PathLike[str], acc: AcceleratorConfig) -> str | None:
    """What is wrong with the overlay in the Vivado build's folder ``vivado`` for ``acc``
    (:func:`fcircnn.models.overlay.overlay_problem`; the ``.xsa``, which is optional, must be
    the zip archive ``write_hw_platform`` writes; the clock record, optional too, must give a
    clock: :func:`fcircnn.arch.ip.read_clock_file`), or ``None``."""
    xsa = Path(vivado) / OVERLAY_FILES[2]
    if xsa.exists() or xsa.is_symlink():
        if not xsa.is_file():
            return f"{xsa}: not a regular file"
        with open(xsa, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                return f"{xsa}: not a hardware platform (.xsa: a zip archive)"
    clock = Path(vivado) / CLOCK_FILE
    if clock.exists() or clock.is_symlink():
        try:
            read_clock_file(clock)
        except OSError as exc:
            return f"{clock}: cannot read it ({exc.strerror or exc})"
        except ValueError as exc:
            return str(exc)
    return overlay_problem(Path(vivado) / OVERLAY_FILES[0], acc.device.part, IP_NAME)


def _copy_overlay(vivado: Path | None, out: Path) -> bool:
    """Copy the overlay's files from ``vivado`` (checked) into ``out``; ``False`` without."""
    if vivado is None:
        return False
    for name in OVERLAY_COPIED:
        if (vivado / name).is_file():
            shutil.copyfile(vivado / name, out / name)
    return True


def deploy(acc: AcceleratorConfig, out: str | os.PathLike[str], *, weights: Any,
           calibration: np.ndarray | None, clips: np.ndarray, statistic: str = "max",
           granularity: str = "tensor", vivado: str | os.PathLike[str] | None = None,
           config: str = "ACCEL", progress=None, reuse_maps: bool = False) -> DeployResult:
    """Write the deployment folder of ``acc`` into ``out`` (created if missing), all files or
    none: they are written into a temporary folder and moved into ``out`` together
    (:func:`~fcircnn.gen.staging.staged_folder`), so an error leaves ``out`` as it was. Then
    what an earlier deployment left in ``out`` that this one does not write is removed: its
    ``BITSTREAM.md``, or its overlay files (perhaps another accelerator's).

    Parameters
    ----------
    acc : AcceleratorConfig
        Validated (:func:`fcircnn.gen.validate.validate_accelerator`).
    weights : NetworkWeights
        The network's weights.
    calibration : ndarray ``[M, C, D, H, W]`` or None
        The calibration set of the int8 scales the board runs every clip with (already
        checked); ``None``: those stored with ``weights``, else measured on ``clips``.
    clips : ndarray ``[N, C, D, H, W]``
        The clips ``run.py`` runs by default (already checked).
    statistic, granularity
        Of the calibration (:func:`fcircnn.models.network.calibrate`).
    vivado : path, optional
        The Vivado build's output folder (``vivado/out`` of ``fcircnn generate``) holding
        ``fcircnn_accel.bit`` and ``.hwh`` (checked: a Xilinx bitstream for ``acc``'s part,
        whole, and the hardware handoff of a block design with the accelerator's IP); without
        it the folder gets ``BITSTREAM.md``.
    config : str
        How the user named the accelerator (for the commands in ``BITSTREAM.md``).
    progress : callable ``(label, done, total)``, optional
        Per layer of the calibration and of the compile (:func:`compile_network`).
    reuse_maps : bool
        Lay the image's feature maps out by liveness (a smaller buffer on the board; only the
        maps live at the end are checked after a run: :func:`compile_network`).

    Raises
    ------
    OutputConflict
        Before any work: a folder of ``out`` stands where a file goes (:data:`OUTPUT_FILES`).
    OverlayError
        Before any work: ``vivado`` holds no overlay for ``acc`` (:func:`overlay_problem_in`).
    CompileError
        The network does not compile for ``acc`` with these weights.
    OSError
        A file cannot be written.
    """
    out = Path(out)
    if why := target_conflict(out, OUTPUT_FILES):
        raise OutputConflict(why)
    if vivado is not None and (problem := overlay_problem_in(vivado, acc)):
        raise OverlayError(problem)
    if calibration is not None or weights.calibration is None:  # fixed before compiling
        weights, _ = calibrate_post(acc.network, weights=weights, x=clips[0],
                                    clips=clips if calibration is None else calibration,
                                    statistic=statistic, granularity=granularity,
                                    progress=progress)
    image = compile_network(acc, weights=weights, x=clips[0], progress=progress,
                            reuse_maps=reuse_maps)
    vivado = Path(vivado) if vivado is not None else None
    with staged_folder(out) as tmp:  # all files or none
        files, overlay = _write_folder(tmp, acc, image, weights=weights, clips=clips,
                                       vivado=vivado, config=config, out=out)
    # What an earlier deployment in the folder left that this one does not write: its
    # BITSTREAM.md, or its overlay (another accelerator's, perhaps; run.py would load it).
    for stale in ("BITSTREAM.md", *OVERLAY_COPIED):
        if stale not in files:
            (out / stale).unlink(missing_ok=True)
    return DeployResult(out, files, overlay)


def _write_folder(tmp: Path, acc: AcceleratorConfig, image: Any, *, weights: Any,
                  clips: np.ndarray, vivado: Path | None, config: str,
                  out: Path) -> tuple[tuple[str, ...], bool]:
    """Write the deployment folder's files into ``tmp`` (to become ``out``); return their
    names and whether the overlay is among them."""
    compiled = CompiledImage.from_ddr_image(image)
    image.save(tmp / "image")
    weights.save(str(tmp / "weights.npz"))
    with open(tmp / "clips.npy", "wb") as f:
        np.save(f, np.asarray(clips, dtype=np.float64))
    (tmp / "accelerator.yaml").write_text(_accelerator_yaml(acc))
    overlay = _copy_overlay(vivado, tmp)
    mem = image_bytes_needed(compiled)
    manifest = {
        "tool_version": TOOL_VERSION, "accelerator": acc.name, "ip_name": IP_NAME,
        "bitstream": OVERLAY_FILES[0], "config": "accelerator.yaml", "weights": "weights.npz",
        "clips": "clips.npy", "image": "image", "mem_size": mem,
        "clock_mhz": acc.clock_mhz,
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    (tmp / "run.py").write_text(_RUN_PY.format(name=acc.name, version=TOOL_VERSION,
                                               wheel=WHEEL))
    os.chmod(tmp / "run.py", 0o755)
    overlay_text = ("copied from the Vivado build" if overlay else
                    "NOT HERE YET: see BITSTREAM.md")
    core_wheel(tmp)
    (tmp / "README.md").write_text(_README.format(
        name=acc.name, version=TOOL_VERSION, overlay=overlay_text, clips=len(clips),
        shape=list(clips.shape[1:]), mem_mib=mem >> 20, wheel=WHEEL,
        requires=", ".join(core_requirements())))
    files = [*BOARD_FILES, "image"]
    if overlay:
        files += [f for f in OVERLAY_COPIED if (tmp / f).is_file()]
    else:
        (tmp / "BITSTREAM.md").write_text(_BITSTREAM_MD.format(
            config=config, name=acc.name, out=out))
        files.append("BITSTREAM.md")
    return tuple(files), overlay
