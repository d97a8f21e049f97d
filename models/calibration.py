"""A network's int8 calibration: the activation scales its integer contract runs with.

The scales of the network input and of every layer's output are a property of the trained
model, like its weights: measured once on a calibration set (``fcircnn calibrate``, ``fcircnn
import --calibration``, or :func:`fcircnn.torch.export` after QAT) and stored in the weights
file beside the arrays they belong to, so that every later run, compile and deploy quantizes
each clip with the same scales, whatever else it runs with. Without one, the contract
calibrates on the clip it runs (:func:`fcircnn.models.network.calibrate`).

The arrays (``/`` cannot occur in a layer name, so they never clash with a layer's):

=============================  =================  ==========================================
name                           shape              meaning
=============================  =================  ==========================================
``calibration/input``          ``[2, B/2]``       scale of the network input's slots
``calibration/<layer>``        ``[2, B/2]``       scale of ``<layer>``'s int8 output
``calibration/granularity``    string             ``tensor`` or ``bin`` (activations, weights)
``calibration/statistic``      string             ``max`` or ``pQ`` (what was measured), or
                                                  ``qat`` (the QAT observers' scales)
``calibration/clips``          integer            how many clips it was measured on (0 for
                                                  ``qat``)
=============================  =================  ==========================================

Scales are ``[part, k]`` (:mod:`fcircnn.models.quant`), positive and finite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import quant
from .config import NetworkConfig
from .files import ArrayFileError, check_array

__all__ = ["PREFIX", "QAT", "Calibration", "read_calibration", "statistic_text"]

#: The prefix of the calibration's arrays in a weights file.
PREFIX = "calibration/"
_INPUT = "input"
_META = ("granularity", "statistic", "clips")
#: The statistic of scales quantization-aware training left (``fcircnn.torch``).
QAT = "qat"
#: Largest scale accepted: a slot step of 1e6 is a unit error, not a calibration.
_MAX_SCALE = 1e6


@dataclass(frozen=True)
class Calibration:
    """The int8 scales of a network (``[2, B/2]`` each) and how they were measured.

    Attributes
    ----------
    input_scale : ndarray
        Of the network input's slots (the first layer's block size).
    out_scales : dict
        Layer name -> the scale of its int8 output.
    granularity : ``"tensor"`` or ``"bin"``
        Of the activation scales, and the granularity the weights are quantized with.
    statistic : str
        ``"max"`` or ``"pQ"`` (:func:`~fcircnn.models.quant.calibration_percentile`), or
        ``"qat"``: the scales quantization-aware training left (:mod:`fcircnn.torch`).
    clips : int
        The size of the calibration set (0 for ``"qat"``).
    """

    input_scale: np.ndarray
    out_scales: dict[str, np.ndarray]
    granularity: quant.Granularity
    statistic: str
    clips: int

    def arrays(self) -> dict[str, np.ndarray]:
        """The calibration as named arrays of a weights file (:data:`PREFIX`)."""
        arrays = {PREFIX + _INPUT: self.input_scale}
        arrays.update({PREFIX + name: s for name, s in self.out_scales.items()})
        arrays[PREFIX + "granularity"] = np.array(self.granularity)
        arrays[PREFIX + "statistic"] = np.array(self.statistic)
        arrays[PREFIX + "clips"] = np.array(self.clips, dtype=np.int64)
        return arrays

    def describe(self) -> str:
        """One line: what the scales were measured as, e.g. ``"bin scales, the maximum over
        6 clip(s)"``."""
        if self.statistic == QAT:
            return f"{self.granularity} scales, as quantization-aware training left them"
        return (f"{self.granularity} scales, {statistic_text(self.statistic)} over "
                f"{self.clips} clip(s)")


def statistic_text(statistic: str) -> str:
    """A calibration statistic in words: ``"max"`` -> ``"the maximum"``, ``"p99.9"`` ->
    ``"the 99.9th percentile"``."""
    return "the maximum" if statistic == "max" else f"the {statistic[1:]}th percentile"


def read_calibration(net: NetworkConfig, data: Mapping[str, np.ndarray],
                     where: str) -> Calibration | None:
    """The calibration among a weights file's arrays ``data``, checked against ``net``, or
    ``None`` when the file holds none.

    Raises
    ------
    ArrayFileError
        Naming ``where`` and the array: a partial calibration (every layer's scale, the input's
        and the three descriptions come together), an unknown name, a wrong shape, a scale
        that is not positive and finite, or a description out of its range.
    """
    names = {k[len(PREFIX):] for k in data if k.startswith(PREFIX)}
    if not names:
        return None
    layers = [layer for layer in net.resolved]
    expected = {_INPUT, *_META, *(layer.name for layer in layers)}
    if unknown := sorted(names - expected):
        raise ArrayFileError(f"{where}: unknown calibration array(s) "
                             f"{', '.join(repr(PREFIX + n) for n in unknown[:5])}; a "
                             f"calibration holds {PREFIX}input, {PREFIX}<layer> for every "
                             f"layer of {net.name} and {PREFIX}granularity, statistic, clips")
    if missing := [n for n in (_INPUT, *(ly.name for ly in layers), *_META) if n not in names]:
        raise ArrayFileError(f"{where}: incomplete calibration: missing "
                             f"{', '.join(repr(PREFIX + n) for n in missing[:5])}"
                             f"{' ...' if len(missing) > 5 else ''} (write it whole with "
                             "fcircnn calibrate)")
    granularity = _text(data, "granularity", where, ("tensor", "bin"))
    statistic = _text(data, "statistic", where, None)
    if statistic != QAT:
        try:
            quant.calibration_percentile(statistic)
        except ValueError as exc:
            raise ArrayFileError(f"{where}: '{PREFIX}statistic': {exc} (or {QAT!r})") from None
    clips = np.asarray(data[PREFIX + "clips"])
    least = 0 if statistic == QAT else 1
    if clips.shape != () or clips.dtype.kind not in "iu" or int(clips) < least:
        raise ArrayFileError(f"{where}: '{PREFIX}clips' must be one integer >= {least}, not "
                             f"{clips!r}")
    first_b = layers[0].block_size
    input_scale = _scale(data, _INPUT, first_b, where)
    out = {layer.name: _scale(data, layer.name, layer.block_size, where) for layer in layers}
    return Calibration(input_scale, out, granularity, statistic, int(clips))


def _text(data: Mapping[str, np.ndarray], name: str, where: str,
          allowed: tuple[str, ...] | None) -> str:
    value = np.asarray(data[PREFIX + name])
    if value.shape != () or value.dtype.kind != "U":
        raise ArrayFileError(f"{where}: '{PREFIX}{name}' must be one string, not {value!r}")
    text = str(value)
    if allowed is not None and text not in allowed:
        raise ArrayFileError(f"{where}: '{PREFIX}{name}' is {text!r}; allowed: "
                             f"{', '.join(allowed)}")
    return text


def _scale(data: Mapping[str, np.ndarray], name: str, B: int, where: str) -> np.ndarray:
    key = PREFIX + name
    scale = check_array(np.asarray(data[key]), f"{where}: '{key}'", (2, B // 2),
                        max_abs=_MAX_SCALE)
    if np.any(scale <= 0):
        raise ArrayFileError(f"{where}: '{key}': every scale must be positive, found "
                             f"{scale.min():.3g}")
    return scale
