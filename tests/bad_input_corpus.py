"""A corpus of bad input for every command, by class (issue 14).

:func:`write_files` writes the corpus' files into a folder; :data:`CASES` lists every case as
``Case(id, argv, fragments)``: the command line (``{d}`` stands for the folder) and the text
the error message must contain (the file or flag it names and the problem). Every case must
end with exit code 2, one ``error:`` message, no traceback, within a few seconds.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from overlay_files import write_overlay

from fcircnn.models.config import load_network
from fcircnn.models.network import random_input, random_weights

#: A small valid network (B = 8): a conv with CBN, CReLU and a pool, a second conv and an fc.
TINY = """\
name: tiny
input: {channels: 3, depth: 4, height: 8, width: 8}
classes: 16
layers:
  - {name: c1, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true,
     pool: {window: [1, 2, 2]}}
  - {name: c2, type: conv, out_channels: 16, kernel: 3, padding: 1, cbn: true, crelu: true}
  - {name: fc, type: fc, out_channels: 16}
"""

#: An accelerator for :data:`TINY` (one small core).
ACC = """\
name: tiny_acc
network: tiny.yaml
device:
  part: xczu9eg-ffvb1156-2-e
  resources: {dsp: 2520, bram36: 912, lut: 274080, ff: 548160}
clock_mhz: 200
block_size: 8
cores:
  - {name: main, tn: 16, tm: 16, td: 2, tr: 4, tc: 4, unroll: [tn, tm], max_kernel: [4, 4, 4]}
"""

COMMANDS = ("check", "golden", "compile", "generate", "estimate", "sim", "sweep")
#: Extra arguments so that no command writes outside the corpus folder.
_OUT = {"compile": ["-o", "{d}/out/compile"], "generate": ["-o", "{d}/out/generate"],
        "sim": ["--build-dir", "{d}/out/sim"], "sweep": ["-o", "{d}/out/sweep", "-q"],
        "golden": ["-q"]}


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    fragments: tuple[str, ...]


def _cmd(command: str, target: str, *extra: str) -> tuple[str, ...]:
    return (command, target, *_OUT.get(command, []), *extra)


# --------------------------------------------------------------------------------------------
# Files

#: Bad YAML documents: file name -> (text or bytes, message fragment).
_YAML: dict[str, tuple[str | bytes, str]] = {
    "recursive.yaml": ("name: x\nlayers: &a [*a]\n", "recursive document"),
    "recursive_map.yaml": ("a: &m {b: *m}\n", "recursive document"),
    "deep.yaml": ("layers: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 32"),
    "deep_map.yaml": ("x:\n" + "".join("  " * i + "a:\n" for i in range(1, 60)) + "\n",
                      "nested more than 32"),
    "laughs.yaml": ("a: &a [" + ",".join(["lol"] * 9) + "]\n" + "".join(
        f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)) + "layers: *i\n",
        "expands to more than"),
    "wide.yaml": ("layers: [" + ",".join(["1"] * 150_000) + "]\n", "expands to more than"),
    "garbage.yaml": (bytes(range(256)) * 4, "not UTF-8 text"),
    "utf16.yaml": ("name: tiny\n".encode("utf-16"), "UTF-16"),
    "nul.yaml": (b"name: tiny\x00\n", "NUL bytes"),
    "large.yaml": ("# " + "x" * (2 << 20) + "\n", "larger than 1024 KiB"),
    "empty.yaml": ("", "top level must be a mapping"),
    "scalar.yaml": ("42\n", "top level must be a mapping"),
    "list.yaml": ("- a\n- b\n", "top level must be a mapping"),
    "syntax.yaml": ("name: x\n  bad: [\n", "YAML syntax error"),
    "tab.yaml": ("name: x\n\tlayers: []\n", "YAML syntax error"),
    "dupkey.yaml": (TINY + "classes: 3\n", "duplicate key 'classes'"),
    "undefined_alias.yaml": ("layers: *nope\n", "alias *nope has no anchor"),
    "python_tag.yaml": ("name: !!python/object/apply:os.system ['true']\n", "YAML syntax error"),
    "unknown_key.yaml": (TINY.replace("kernel: 3, padding: 1, cbn", "kernal: 3, padding: 1, cbn"),
                         "layers[0] (c1).kernal"),
    "string_int.yaml": (TINY.replace("out_channels: 16, kernel", "out_channels: '16', kernel"),
                        "must be an integer"),
    "long_string.yaml": (TINY.replace("name: tiny", "name: '" + "x-" * 2500 + "'"),
                         "must be an identifier"),
    "non_str_key.yaml": ("1: x\n" + TINY, "keys must be strings"),
    "null_key.yaml": ("~: x\n" + TINY, "null: keys must be strings, not null"),
    "float_int.yaml": (TINY.replace("classes: 16", "classes: 16.0"),
                       "classes: must be an integer, not the float 16.0 (write 16)"),
    "bool_key.yaml": ("true: x\n" + TINY, ("true: keys must be strings, not a boolean (YAML "
                      "reads true as one: quote the key)")),
    "control_name.yaml": (TINY.replace("name: c2", 'name: "c\\e[31m2\\a"'),
                          "layers[1] ('c\\x1b[31m2\\x07').name: must be an identifier"),
    "digits_4000.yaml": (TINY.replace("classes: 16", "classes: " + "9" * 4000),
                         ("classes: must be at most 65536 (the descriptor's 16-bit slot count), "
                         "not a 4,000-digit integer")),
    "binary_20000.yaml": (TINY.replace("classes: 16", "classes: 0b1" + "0" * 20000),
                          ("classes: must be at most 65536 (the descriptor's 16-bit slot count), "
                          "not a 6,021-digit integer")),
}

#: Sizes beyond reason and rules the hardware imposes (class 3 and 4).
_SIZES: dict[str, tuple[str, str]] = {
    "channels_1e9.yaml": (TINY.replace("channels: 3,", "channels: 1000000000,"),
                          "input.channels: must be at most 65536"),
    "map_1e9.yaml": (TINY.replace("height: 8,", "height: 1000000000,"),
                     "input.height: must be at most 65535"),
    "out_1e9.yaml": (TINY.replace("out_channels: 16, kernel", "out_channels: 10000000000, kernel"),
                     "out_channels: must be at most 65536"),
    "kernel_100.yaml": (TINY.replace("kernel: 3, padding: 1, cbn: true, crelu: true,\n",
                                     "kernel: 100, padding: 1, cbn: true, crelu: true,\n"),
                        "kernel[0]: must be at most 64"),
    "pool_9.yaml": (TINY.replace("window: [1, 2, 2]", "window: [1, 9, 9]"),
                    "pool.window[1]: must be at most 3"),
    "acc_bound.yaml": (("name: big7\ninput: {channels: 2048, depth: 8, height: 8, width: 8}\n"
                       "classes: 16\nlayers:\n  - {name: c1, type: conv, out_channels: 16, "
                       "kernel: 7, padding: 3}\n"), "accumulator bound"),
    "memory.yaml": (("name: huge\ninput: {channels: 65536, depth: 64, height: 512, width: 512}\n"
                    "classes: 8\nlayers:\n  - {name: c1, type: conv, out_channels: 8, "
                    "kernel: 1}\n"), "GiB of memory"),
}

#: Accelerator files (network tiny.yaml): file name -> (text, fragment); the message names
#: the accelerator file, or the network file in :data:`_NAMED` when the problem is there.
_ACCS: dict[str, tuple[str, str]] = {
    "acc_tn_1e12.yaml": (ACC.replace("tn: 16", "tn: 1000000000000"),
                         "cores[0] (main).tn: must be at most 1024"),
    "acc_tm_1e12.yaml": (ACC.replace("tm: 16", "tm: 1000000000000"),
                         "cores[0] (main).tm: must be at most 1024"),
    "acc_tr_1e6.yaml": (ACC.replace("tr: 4", "tr: 1000000"),
                        "cores[0] (main).tr: must be at most 255"),
    "acc_tn_24.yaml": (ACC.replace("tn: 16", "tn: 24"), "multiple of 16 above 16"),
    "acc_tm_24.yaml": (ACC.replace("tm: 16", "tm: 24"), "Tm must be a multiple of 16"),
    "acc_bram.yaml": (ACC.replace("tr: 4, tc: 4", "tr: 200, tc: 200"),
                      "binding resource bram36"),
    "acc_kernel.yaml": (ACC.replace("max_kernel: [4, 4, 4]", "max_kernel: [1, 1, 1]"),
                        "no core can run layer"),
    "acc_part.yaml": (ACC.replace("xczu9eg-ffvb1156-2-e", "xc7a35tcpg236-1"),
                      "not a Zynq UltraScale+"),
    # another die with the ZU9EG's resources: "fits" was judged against resources it lacks
    "acc_part_zu3.yaml": (ACC.replace("xczu9eg-ffvb1156-2-e", "xczu3eg-sbva484-1-e"),
                          "device.resources.bram36: 912 is more than the xczu3eg's 216"),
    "acc_board_part.yaml": (ACC.replace("xczu9eg-ffvb1156-2-e", "xczu7ev-ffvc1156-2-e\n"
                                        "  board: xilinx.com:zcu102:part0:3.4").replace(
        "dsp: 2520, bram36: 912, lut: 274080, ff: 548160",
        "dsp: 1728, bram36: 312, lut: 230400, ff: 460800"),
        "device.board: xilinx.com:zcu102:part0:3.4 is a board with xczu9eg-ffvb1156-2-e"),
    "acc_no_network.yaml": (ACC.replace("network: tiny.yaml", "network: nope.yaml"),
                            "nope.yaml': not found"),
    "acc_bad_network.yaml": (ACC.replace("network: tiny.yaml", "network: recursive.yaml"),
                             "recursive document"),
    "acc_inline_bad.yaml": (ACC.replace("network: tiny.yaml", "network: {name: t, classes: 0}"),
                            "network.classes"),
    "acc_clock.yaml": (ACC.replace("clock_mhz: 200", "clock_mhz: 5000"), "clock_mhz"),
    "acc_clock_huge.yaml": (ACC.replace("clock_mhz: 200", "clock_mhz: 0b1" + "0" * 20000),
                            ("clock_mhz: must be a number a float can hold, not a 6,021-digit "
                            "integer")),
    "acc_ports.yaml": (ACC.replace("clock_mhz: 200", "clock_mhz: 200\naxi_ports: 5"),
                       "axi_ports"),
    "acc_queue.yaml": (ACC.replace("clock_mhz: 200", "clock_mhz: 200\ndma_queue: 9"),
                       "dma_queue: must be in the range 1..8"),
    "acc_big7.yaml": (ACC.replace("tiny.yaml", "acc_bound.yaml"), "accumulator bound"),
    "acc_acc_network.yaml": (ACC.replace("network: tiny.yaml", "network: acc.yaml"),
                             "an accelerator file, not a network file"),
}


_NAMED = {"acc_bad_network.yaml": "recursive.yaml", "acc_big7.yaml": "acc_bound.yaml",
          "acc_acc_network.yaml": "acc.yaml"}


def _npz_with(folder: Path, name: str, arrays: dict[str, np.ndarray]) -> None:
    np.savez(folder / name, **arrays)


def write_files(folder: Path) -> None:
    """Write every file the corpus refers to into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (content, _) in {**_YAML, **_SIZES, **_ACCS}.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    (folder / "tiny.yaml").write_text(TINY)
    (folder / "acc.yaml").write_text(ACC)
    # TINY without its fc: its last map is 16 x 4x4x4, not class scores
    (folder / "no_fc.yaml").write_text(TINY[:TINY.index("  - {name: fc")])
    (folder / "acc_no_fc.yaml").write_text(ACC.replace("tiny.yaml", "no_fc.yaml"))
    (folder / "a_folder.yaml").mkdir(exist_ok=True)
    (folder / "a_file").write_text("not a folder\n")
    write_overlay(folder / "vivado_zu3", part="xczu3eg-sbva484-1-e")  # another device's build
    write_overlay(folder / "vivado_empty").write_bytes(b"")
    net = load_network(folder / "tiny.yaml")
    weights = random_weights(net, 0)
    good = {f"{n}.generators": lw.generators for n, lw in weights.layers.items()
            if lw.generators is not None}
    rng = np.random.default_rng(0)
    good["c1.bn_gain"] = rng.uniform(0.5, 1.5, (2, 8))
    good["c1.bn_offset"] = rng.uniform(-1, 1, (2, 8))
    for name, change in _WEIGHTS.items():
        arrays = {k: v.copy() for k, v in good.items()}
        change[0](arrays)
        _npz_with(folder, name, arrays)
    np.save(folder / "w_as_npy.npy", good["c1.generators"])
    arrays = {k: v.copy() for k, v in good.items()}
    _calibrated()(arrays)
    _npz_with(folder, "w_calibrated.npz", arrays)
    raw = (folder / "w_nan.npz").read_bytes()
    (folder / "w_truncated.npz").write_bytes(raw[: len(raw) // 2])
    (folder / "w_empty.npz").write_bytes(b"")
    (folder / "w_garbage.npz").write_bytes(bytes(range(256)))
    with zipfile.ZipFile(folder / "w_object.npz", "w") as z:  # a pickled entry
        with z.open("c1.generators.npy", "w") as f:
            np.lib.format.write_array(f, np.array([object()], dtype=object), allow_pickle=True)
    x = random_input(net, 0)
    for name, value in _INPUTS.items():
        np.save(folder / name, value(x.copy()), allow_pickle=True)
    np.savez(folder / "x_as_npz.npz", x=x)
    np.save(folder / "c_shape.npy", np.stack([x, x])[..., :4])
    clips = np.stack([x, x])
    clips[1, 0, 0, 0, 1] = np.nan
    np.save(folder / "c_nan.npy", clips)
    np.save(folder / "c_zero.npy", np.zeros_like(clips))
    np.save(folder / "c_subnormal.npy", np.full_like(clips, 5e-324))
    (folder / "x_empty.npy").write_bytes(b"")
    raw = (folder / "x_nan.npy").read_bytes()
    (folder / "x_truncated.npy").write_bytes(raw[: len(raw) // 2])


def _set(key, value):
    def change(arrays):
        arrays[key] = value(arrays[key])
    return change


def _poke(key, value):
    def change(arrays):
        arrays[key].flat[3] = value
    return change


#: Bad weights files: name -> (how, fragment).
_WEIGHTS = {
    "w_nan.npz": (_poke("c1.generators", np.nan), "not finite"),
    "w_inf.npz": (_poke("c2.generators", np.inf), "not finite"),
    "w_huge.npz": (_set("c2.generators", lambda a: a * 1e300), "beyond the 10000"),
    "w_complex.npz": (_set("c1.generators", lambda a: a * (1 + 1j)), "complex array"),
    "w_bool.npz": (_set("c1.generators", lambda a: a > 0), "expected real numbers"),
    "w_str.npz": (_set("c1.generators", lambda a: a.astype(str)), "expected real numbers"),
    "w_shape.npz": (_set("c2.generators", lambda a: a[:, :, :, :1]), "shape (2, 2, 8, 1, 3, 3)"),
    "w_missing.npz": (lambda a: a.pop("fc.generators"), "missing array 'fc.generators'"),
    "w_pair.npz": (lambda a: a.pop("c1.bn_offset"), "without 'c1.bn_offset'"),
    "w_extra.npz": (lambda a: a.update(junk=np.zeros(3)), "unknown array(s) 'junk'"),
    "w_gain_nan.npz": (_poke("c1.bn_gain", np.nan), "'c1.bn_gain'"),
    "w_gain_shape.npz": (_set("c1.bn_gain", lambda a: a[:1]), "'c1.bn_gain': shape (1, 8)"),
    # fc has no CBN: its gain and offset would be ignored
    "w_bn_no_cbn.npz": (lambda a: a.update({"fc.bn_gain": np.ones((2, 8)),
                                            "fc.bn_offset": np.zeros((2, 8))}),
                        "'fc.bn_gain' for layer 'fc', which has no CBN"),
}



def _calibrated(change=None):
    """The good weights with c2's CBN and a whole calibration (bin scales), then ``change``."""
    def build(arrays):
        arrays["c2.bn_gain"], arrays["c2.bn_offset"] = np.ones((2, 8)), np.zeros((2, 8))
        for name in ("input", "c1", "c2", "fc"):
            arrays[f"calibration/{name}"] = np.full((2, 4), 0.05)
        arrays["calibration/granularity"] = np.array("bin")
        arrays["calibration/statistic"] = np.array("max")
        arrays["calibration/clips"] = np.array(4)
        if change is not None:
            change(arrays)
    return build


_WEIGHTS.update({
    "w_cal_partial.npz": (_calibrated(lambda a: a.pop("calibration/fc")),
                          "incomplete calibration: missing 'calibration/fc'"),
    "w_cal_zero.npz": (_calibrated(_poke("calibration/c1", 0.0)),
                       "'calibration/c1': every scale must be positive"),
    "w_cal_shape.npz": (_calibrated(_set("calibration/c2", lambda a: a[:, :2])),
                        "'calibration/c2': shape (2, 2), expected (2, 4)"),
    "w_cal_granularity.npz": (_calibrated(_set("calibration/granularity",
                                               lambda a: np.array("layer"))),
                              "'calibration/granularity' is 'layer'; allowed: tensor, bin"),
    "w_cal_clips.npz": (_calibrated(_set("calibration/clips", lambda a: np.array(0))),
                        "'calibration/clips' must be one integer >= 1"),
    "w_cal_unknown.npz": (_calibrated(lambda a: a.update({"calibration/junk": np.ones(1)})),
                          "unknown calibration array(s) 'calibration/junk'"),
    "w_cal_no_bn.npz": (_calibrated(lambda a: [a.pop("c2.bn_gain"), a.pop("c2.bn_offset")]),
                        "a calibration without 'c2.bn_gain'"),
})

#: Bad input clips: name -> value from the good clip.
_INPUTS = {
    "x_nan.npy": lambda x: np.where(np.arange(x.size).reshape(x.shape) == 5, np.nan, x),
    "x_inf.npy": lambda x: np.where(np.arange(x.size).reshape(x.shape) == 5, -np.inf, x),
    "x_1e308.npy": lambda x: np.where(np.arange(x.size).reshape(x.shape) == 5, 1e308, x),
    "x_complex.npy": lambda x: x * 1j,
    "x_shape.npy": lambda x: x[:, :2],
    "x_str.npy": lambda x: x.astype(str),
    "x_object.npy": lambda x: np.array([object()] * 3, dtype=object),
}
_INPUT_FRAGMENTS = {
    "x_nan.npy": "not finite", "x_inf.npy": "not finite", "x_1e308.npy": "beyond the 1e+06",
    "x_complex.npy": "complex array", "x_shape.npy": "expected (3, 4, 8, 8)",
    "x_str.npy": "expected real numbers", "x_object.npy": "unpickling",
    "x_as_npz.npz": "an .npz archive, not an .npy", "x_empty.npy": "empty file",
    "x_truncated.npy": "truncated", "x_missing.npy": "file not found",
}
_WEIGHT_FRAGMENTS = {
    **{name: fragment for name, (_, fragment) in _WEIGHTS.items()},
    "w_as_npy.npy": "a single .npy array, not an .npz archive",
    "w_truncated.npz": "truncated or damaged", "w_empty.npz": "empty file",
    "w_garbage.npz": "not a zip file", "w_object.npz": "unpickling",
    "w_missing_file.npz": "file not found",
}


# --------------------------------------------------------------------------------------------
# Cases


def _cases() -> list[Case]:
    cases = []

    def add(cls: str, name: str, argv: tuple[str, ...], *fragments: str) -> None:
        cases.append(Case(f"{cls}-{name}", argv, fragments))

    # 1. YAML that is not a plain document, and schema errors: through every command.
    for name, (_, fragment) in _YAML.items():
        for command in COMMANDS:
            add("yaml", f"{name}-{command}", _cmd(command, f"{{d}}/{name}"), name, fragment)
    for command in COMMANDS:
        add("yaml", f"missing-{command}", _cmd(command, "{d}/nope.yaml"), "nope.yaml",
            "file not found")
        add("yaml", f"folder-{command}", _cmd(command, "{d}/a_folder.yaml"), "a_folder.yaml",
            "is a folder")
    # 2. Weights and input files, through golden and compile.
    for name, fragment in _WEIGHT_FRAGMENTS.items():
        add("weights", f"{name}-golden", _cmd("golden", "{d}/tiny.yaml", "--weights",
                                             f"{{d}}/{name}"), "--weights", name, fragment)
        add("weights", f"{name}-compile", _cmd("compile", "{d}/acc.yaml", "--weights",
                                              f"{{d}}/{name}"), "--weights", name, fragment)
    for name, fragment in _INPUT_FRAGMENTS.items():
        add("input", f"{name}-golden", _cmd("golden", "{d}/tiny.yaml", "--input",
                                           f"{{d}}/{name}"), "--input", name, fragment)
        add("input", f"{name}-compile", _cmd("compile", "{d}/acc.yaml", "--input",
                                            f"{{d}}/{name}"), "--input", name, fragment)
    calibration = [("c_shape.npy", "expected clips (N, 3, 4, 8, 8)"),
                   ("c_nan.npy", "not finite"), ("x_as_npz.npz", "an .npz archive"),
                   ("x_nan.npy", "expected clips"),
                   ("c_zero.npy", "every value is 0 (or below 2.2e-308): it cannot calibrate"),
                   ("c_subnormal.npy", "every value is 0 (or below 2.2e-308)")]
    for name, fragment in calibration:
        for command, target in (("golden", "{d}/tiny.yaml"), ("compile", "{d}/acc.yaml")):
            add("input", f"calibration-{name}-{command}", _cmd(command, target, "--calibration",
                                                               f"{{d}}/{name}"),
                "--calibration", name, fragment)
    for name, fragment in (("x_nan.npy", "expected clips"), ("c_nan.npy", "not finite"),
                           ("x_as_npz.npz", "an .npz archive"), ("c_shape.npy", "expected clips"),
                           ("x_missing.npy", "file not found")):
        add("input", f"run-{name}", ("run", "{d}/acc.yaml", "--input", f"{{d}}/{name}"),
            "--input", name, fragment)
    add("flags", "run-no-input", ("run", "{d}/acc.yaml"), "--input")
    for name, fragment in (("w_nan.npz", "unknown array"), ("x_nan.npy", "a single .npy"),
                           ("w_missing_file.npz", "file not found")):
        add("weights", f"project-{name}", ("project", "{d}/tiny.yaml", "--dense",
                                           f"{{d}}/{name}", "-o", "{d}/p.npz"),
            "--dense", name, fragment)
    add("flags", "project-out", ("project", "{d}/tiny.yaml", "--dense", "{d}/w_nan.npz", "-o",
                                 "{d}/no/p.npz"), "-o", "does not exist")
    add("flags", "run-target", ("run", "{d}/acc.yaml", "--input", "{d}/c_nan.npy", "--on",
                                "fpga"), "--on", "invalid choice")
    add("agree", "network-file-run", ("run", "{d}/tiny.yaml", "--input", "{d}/c_nan.npy"),
        "tiny.yaml", "a network file, not an accelerator file")
    for command, extra in (("run", ("--input", "{d}/c_shape.npy")),
                           ("deploy", ("-o", "{d}/out/deploy"))):
        add("agree", f"no-scores-{command}", (command, "{d}/acc_no_fc.yaml", *extra),
            "acc_no_fc.yaml", "has no class scores: its last layer 'c2' outputs 16 channels "
            "on a 4x4x4 map")
    # 3. Sizes beyond reason; 4. every command refuses what one would.
    for name, (_, fragment) in _SIZES.items():
        # The performance model of a sweep needs no memory for the maps: it may sweep memory.yaml.
        for command in ("check", "golden") + (("sweep",) if name != "memory.yaml" else ()):
            add("size", f"{name}-{command}", _cmd(command, f"{{d}}/{name}"), name, fragment)
    for name, (_, fragment) in _ACCS.items():
        for command in COMMANDS:
            add("agree", f"{name}-{command}", _cmd(command, f"{{d}}/{name}"),
                _NAMED.get(name, name), fragment)
    for command in ("compile", "generate", "estimate", "sim"):
        add("agree", f"network-file-{command}", _cmd(command, "{d}/tiny.yaml"), "tiny.yaml",
            "a network file, not an accelerator file")
    # 5. Flags and output paths.
    flags = [
        ("seed-neg", ("golden", "{d}/tiny.yaml", "--seed", "-1"), "--seed"),
        ("seed-big", ("compile", "{d}/acc.yaml", "--seed", str(2**40)), "--seed"),
        ("seed-text", ("sim", "{d}/acc.yaml", "--seed", "x"), "--seed"),
        ("clock", ("sweep", "{d}/tiny.yaml", "--clock-mhz", "0"), "--clock-mhz"),
        ("clock-nan", ("sweep", "{d}/tiny.yaml", "--clock-mhz", "nan"), "--clock-mhz"),
        ("clock-tiny", ("sweep", "{d}/tiny.yaml", "--clock-mhz", "0.5"),
         "--clock-mhz: must be a number in [1, 1000] MHz, not '0.5'"),
        ("cap-zero", ("estimate", "{d}/acc.yaml", "--cap", "0"), "--cap"),
        ("native-yosys-alone", ("estimate", "{d}/acc.yaml", "--native-yosys"), "--native-yosys",
         "only with --synth"),
        ("cap-big", ("check", "{d}/acc.yaml", "--cap", "1.5"), "--cap"),
        ("jobs", ("sweep", "{d}/tiny.yaml", "-j", "0"), "--jobs"),
        ("mode", ("golden", "{d}/tiny.yaml", "--mode", "fast"), "--mode"),
        ("stored-granularity", ("golden", "{d}/tiny.yaml", "--weights", "{d}/w_calibrated.npz",
                                "--granularity", "tensor"), "--granularity tensor",
         "w_calibrated.npz holds a calibration of bin scales", "give --calibration"),
        ("stored-statistic", ("compile", "{d}/acc.yaml", "--weights", "{d}/w_calibrated.npz",
                              "--calibration-statistic", "p99"), "--calibration-statistic p99"),
        ("calibrate-no-set", ("calibrate", "{d}/tiny.yaml", "-o", "{d}/out/w.npz"),
         "--calibration"),
        ("calibrate-out", ("calibrate", "{d}/tiny.yaml", "--calibration", "{d}/c_nan.npy",
                           "-o", "{d}/no/w.npz"), "-o", "does not exist"),
        ("calibrate-set", ("calibrate", "{d}/tiny.yaml", "--calibration", "{d}/c_zero.npy",
                           "-o", "{d}/w_new.npz"), "--calibration", "every value is 0"),
        ("statistic", ("compile", "{d}/acc.yaml", "--calibration-statistic", "p0"),
         "--calibration-statistic", "'max' or 'pQ'"),
        ("base", ("compile", "{d}/acc.yaml", "--base", "12", "-o", "{d}/out/b"), "--base",
         "multiple of 4096"),
        ("base-text", ("compile", "{d}/acc.yaml", "--base", "here"), "--base"),
        ("scale", ("sim", "{d}/acc.yaml", "--scale", "0"), "--scale"),
        ("layers", ("sim", "{d}/acc.yaml", "--layers", "bogus", "--build-dir", "{d}/out/sim"),
         "--layers: unknown layer 'bogus'"),
        ("save-missing-dir", ("golden", "{d}/tiny.yaml", "-q", "--save", "{d}/no/dir/o.npz"),
         "--save", "does not exist"),
        ("save-under-file", ("golden", "{d}/tiny.yaml", "-q", "--save", "{d}/a_file/o.npz"),
         "--save", "is not a folder"),
        ("save-is-folder", ("golden", "{d}/tiny.yaml", "-q", "--save", "{d}/a_folder.yaml"),
         "--save", "is a folder"),
        ("save-weights-dir", ("golden", "{d}/tiny.yaml", "-q", "--save-weights",
                              "{d}/no/w.npz"), "--save-weights", "does not exist"),
        ("best-yaml", ("sweep", "{d}/tiny.yaml", "-o", "{d}/out/sw", "--best-yaml",
                       "{d}/no/best.yaml"), "--best-yaml", "does not exist"),
        ("compile-out", ("compile", "{d}/acc.yaml", "-o", "{d}/a_file/out"), "-o",
         "not a folder"),
        ("sweep-out", ("sweep", "{d}/tiny.yaml", "-o", "{d}/a_file"), "-o",
         "exists and is not a folder"),
        ("sim-build", ("sim", "{d}/acc.yaml", "--build-dir", "{d}/a_file/b"), "--build-dir"),
        ("generate-out", ("generate", "{d}/acc.yaml", "-o", "{d}/a_file"), "-o"),
        ("deploy-out-file", ("deploy", "{d}/acc.yaml", "-o", "{d}/a_file/dep"), "-o"),
        ("deploy-vivado", ("deploy", "{d}/acc.yaml", "-o", "{d}/out/dep", "--vivado",
                           "{d}/no/vivado"), "--vivado", "no such folder"),
        ("deploy-input", ("deploy", "{d}/acc.yaml", "-o", "{d}/out/dep", "--input",
                          "{d}/x_nan.npy"), "--input", "x_nan.npy"),
        ("deploy-network", ("deploy", "{d}/tiny.yaml", "-o", "{d}/out/dep"), "tiny.yaml",
         "a network file, not an accelerator file"),
        ("deploy-vivado-foreign", ("deploy", "{d}/acc.yaml", "-o", "{d}/out/dep", "--vivado",
                                   "{d}/vivado_zu3"), "--vivado", ("fcircnn_accel.bit: built for "
         "xczu3eg-sbva484-1-e, not for the accelerator's xczu9eg-ffvb1156-2-e")),
        ("deploy-vivado-no-overlay", ("deploy", "{d}/acc.yaml", "-o", "{d}/out/dep", "--vivado",
                                      "{d}/a_folder.yaml"), "--vivado", ("fcircnn_accel.bit: not "
         "found (an overlay is a .bit with its .hwh beside it")),
        ("run-board-empty-bit", ("run", "{d}/acc.yaml", "--input", "{d}/c_shape.npy", "--on",
                                 "board", "--bitstream", "{d}/vivado_empty/fcircnn_accel.bit"),
         "--bitstream", "fcircnn_accel.bit: an empty file"),
        ("run-board-no-bit", ("run", "{d}/acc.yaml", "--input", "{d}/c_shape.npy", "--on",
                              "board"), "--on board needs --bitstream"),
        ("run-board-timeout", ("run", "{d}/acc.yaml", "--input", "{d}/c_shape.npy", "--on",
                               "board", "--timeout", "0"), "--timeout"),
        # decimal ASCII only: int() and float() also read digit groups and other scripts
        ("seed-grouped", ("golden", "{d}/tiny.yaml", "--seed", "5_0"), "--seed", "'5_0'"),
        ("cap-fullwidth", ("estimate", "{d}/acc.yaml", "--cap", "０.５"), "--cap", "'０.５'"),
        ("tn-fullwidth", ("sweep", "{d}/tiny.yaml", "--tn", "１６", "-q"), "--tn"),
        ("statistic-exponent", ("golden", "{d}/tiny.yaml", "--calibration-statistic", "p1e2"),
         "--calibration-statistic", "'p1e2'"),
        ("unknown-flag", ("check", "{d}/tiny.yaml", "--frobnicate"), "unrecognized"),
        ("no-command", (), "required"),
        ("bad-command", ("frob",), "invalid choice"),
    ]
    for name, argv, *fragments in flags:
        add("flags", name, argv, *fragments)
    # 7. Ranges that cannot be legal.
    ranges = [
        ("tn-7", ("--tn", "7"), "--tn: 7 is legal for no block size", "multiple of B (8)"),
        ("tm-24", ("--tm", "24"), "--tm: 24", "multiple of 16"),
        ("tn-24", ("--tn", "16,24"), "--tn: 24", "multiple of 16 above 16"),
        ("tr-300", ("--tr", "300"), "--tr", "limit of 255"),
        ("tn-2048", ("--tn", "2048"), "--tn", "limit of 1024"),
        ("pointwise", ("--pointwise", "7x32"), "--pointwise: 7x32"),
        ("pointwise-2048", ("--pointwise", "2048x16", "--cores", "1,2"), "--pointwise",
         "limit of 1024"),
        ("block", ("--block-size", "3"), "--block-size: [3] are not allowed"),
        ("tn-zero", ("--tn", "0"), "--tn"),
        ("cores", ("--cores", "3"), "cores"),
    ]
    for name, extra, *fragments in ranges:
        add("range", name, ("sweep", "{d}/tiny.yaml", "-o", "{d}/out/sw", *extra), *fragments)
    return cases


CASES: tuple[Case, ...] = tuple(_cases())
