"""Importer of ONNX graphs: a network file and its block-circulant weights from a dense 3D CNN.

:func:`import_onnx` reads an ONNX model (as ``torch.onnx.export`` writes it, either exporter),
maps its graph onto the layers of a network file and projects its dense weights onto the
nearest block-circulant ones (:func:`~.project.project_layer`). The report says, layer by
layer, what is exact and what is approximated. The mapping, node by node:

Graph input ``[N, C, D, H, W]``
    The network's ``input`` (static ``C, D, H, W``; the batch axis is dropped, any size).
``Conv`` (3-D kernel, group 1, dilations 1, symmetric pads)
    A ``conv`` layer (kernel, stride, padding); one whose kernel covers its whole input map
    without padding and that has no max pool is written as the equivalent ``fc`` layer (the
    dense twin ``fcircnn.torch.DenseNetwork`` exports fc layers so). Its dense weight is
    projected onto block-circulant (not exact unless it is block-circulant: the relative
    projection error is reported). A bias adds the same value to every voxel of a channel,
    which in slots is the packed ``rfft`` of the bias (per block of ``B`` channels) added to
    every voxel: exactly the CBN with gain 1 and that offset (``docs/contract.md`` sections 2
    and 6), so the layer gets ``cbn: true``. An all-zero bias adds nothing and is left out.
``BatchNormalization`` after a Conv or Gemm (before its ReLU or residual)
    Folded into the dense weight before the projection: ``W'[m] = g_m W[m]`` and ``b' = g_m
    (b - mean_m) + beta_m`` with ``g = gamma / sqrt(var + eps)``, exact in the dense domain;
    the layer gets ``cbn: true`` with ``b'`` as its CBN offset (as a bias). A per-channel
    scale that is not constant within each block of ``B`` output channels is what makes the
    folded weight leave the block-circulant matrices: the projection error says by how much.
    A constant per-channel ``Add`` after a Conv, Gemm or MatMul is a bias, the same way.
``Add`` of two maps (a ResNet block)
    ``residual:`` on the conv or fc layer whose output (after its bias or batch norm, before
    any ReLU) is added, naming the layer that made the other input; exact (addition commutes
    with the transform). When both inputs are such layers (a 1x1x1 shortcut conv and the
    block's second conv), the residual goes on the one that reads the later map (the block's
    main branch), and the shortcut is placed before it in the file.
``Relu``
    ``crelu: true`` on the layer before: an approximation. A time-domain ReLU per channel is
    not the CReLU, a ReLU on the real and on the imaginary part of each slot.
``MaxPool`` (3-D; a ``Pad`` of ``-inf`` before it is its padding)
    ``pool:`` on the conv before: an approximation. The CMaxPool takes the maximum of each
    slot part, not of each channel.
``GlobalAveragePool``, ``ReduceMean`` over ``D, H, W``, an ``AveragePool`` covering the map
    A ``gap`` layer: exact.
``Gemm`` (``nn.Linear``: ``transB = 1``), ``MatMul`` (+ ``Add`` of a bias)
    An ``fc`` layer on the map before it, its dense weight ``[M, N*D*H*W]`` over PyTorch's
    channel-major flatten (:mod:`.project` reads it as ``[M, N, D, H, W]``), its bias as a
    CBN offset.
``Flatten``, ``Reshape``, ``Squeeze``, ``Unsqueeze``, ``Identity``, ``Dropout`` (inference)
    Nothing: a view of the map before (the batch axis kept, the order of the elements
    unchanged). What reads a view checks it sees the map as ``[N, C, D, H, W]`` (a conv, pool
    or batch norm) or flattened ``[N, C*D*H*W]`` (a Gemm or MatMul).

Nodes that compute on constants only (``Constant``, shape arithmetic, the unoptimised
exporter's ``Expand(CastLike(0, x), ...)`` zero biases) are not part of the network: where a
layer needs their value, onnx's reference evaluator computes it. Every other op, and an
attribute the mapping cannot take, is refused with an :class:`OnnxImportError` that lists every
such node at once (name and op type) with what is allowed.

Layers are named after their weight initializers (``layer1.0.conv1.0.weight`` ->
``layer1_0_conv1_0``) when every weighted layer's is meaningful, else after their nodes (the
TorchScript exporter's ``/conv1/conv/Conv`` -> ``conv1``), without the components all of them
share (the dense twin's ``layers.<name>.conv``); a gap layer after its node, or ``gap``.

Channels that are not a multiple of ``B`` are padded to one (``docs/contract.md`` section 1);
the block-circulant weights compute the padding channels too, and a layer reading them adds
terms the dense network does not have: the report names those layers.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .config import ConfigError, NetworkConfig, ResolvedLayer
from .errors import validate_model
from .files import ArrayFileError, check_input_file
from .network import LayerWeights, NetworkWeights, check_weights
from .project import project_layer
from .spectral import BLOCK_SIZES, pad_channels, to_slots

__all__ = ["EXTRA", "SUPPORTED_OPS", "ImportRow", "OnnxImport", "OnnxImportError",
           "import_onnx"]

#: The optional dependency group that installs ``onnx``.
EXTRA = "fcircnn[onnx]"
#: Relative projection error below which a layer's weights count as block-circulant already
#: (float32 weights, and batch-norm scales folded in, are block-circulant to about 1e-7).
EXACT_TOLERANCE = 1e-6
#: Op types that carry a map through unchanged (a view of the map before).
VIEW_OPS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout")
#: Op types the import maps (module docstring), for messages.
SUPPORTED_OPS = ("Conv", "BatchNormalization", "Relu", "MaxPool", "Pad", "Add",
                 "GlobalAveragePool", "ReduceMean", "AveragePool", "Gemm", "MatMul",
                 *VIEW_OPS)
#: Names exporters give initializers and nodes that say nothing of the model's modules.
_GENERIC_NAME = re.compile(r"(onnx::.*|val_\d+|_v_\d+|\d+|node_.*|)", re.IGNORECASE)
_INPUT = -1  # the key of the network input among the layers
#: Words YAML 1.1 reads as booleans or null, not as names.
_YAML_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n"}
#: Inputs of which an op reads only the shape or the element type, not the values.
_METADATA_INPUTS = {"Shape": (0,), "Size": (0,), "CastLike": (1,), "EyeLike": (0,)}
_RESIDUAL = "\0residual\0"  # stands for the residual layer's name until names are given


class OnnxImportError(ValueError):
    """An ONNX model that does not map onto a network file; ``problems`` lists each node
    refused (op type, name and what is allowed), one line each."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems)


@dataclass(frozen=True)
class ImportRow:
    """How one layer of the network file was taken from the graph.

    Attributes
    ----------
    name : str
        The layer of the network file.
    nodes : tuple of str
        The ONNX nodes it was made from, as ``"<op> '<name>'"``.
    how : str
        What was taken and how, saying what is exact and what is approximated.
    error : float
        Relative projection error ``|W - P(W)|_F / |W|_F`` of the (folded) dense weight; 0
        for a layer without weights.
    approximations : tuple of str
        What is not exact: ``"projection"``, ``"crelu"``, ``"cmaxpool"``,
        ``"padding channels"``; empty when the layer is exact in the float reference.
    """

    name: str
    nodes: tuple[str, ...]
    how: str
    error: float = 0.0
    approximations: tuple[str, ...] = ()


@dataclass(frozen=True)
class OnnxImport:
    """The result of :func:`import_onnx`.

    Attributes
    ----------
    network_yaml : str
        The network file, with comments naming the ONNX nodes of each layer.
    network : NetworkConfig
        It, loaded and resolved (built in memory: ``network.path`` is ``None``).
    weights : NetworkWeights
        The projected block-circulant weights, with the CBN gain and offset of every layer
        that has a bias or a batch norm (``weights.save(path)`` writes the weights file).
    report : tuple of ImportRow
        One row per layer, in file order.
    notes : tuple of str
        What applies to the whole graph (dropped nodes, the approximations and why).
    """

    network_yaml: str
    network: NetworkConfig
    weights: NetworkWeights
    report: tuple[ImportRow, ...]
    notes: tuple[str, ...] = ()

    def report_lines(self) -> list[str]:
        """The report as text: a line per layer (name, relative projection error, how), then
        the notes."""
        width = max((len(r.name) for r in self.report), default=0)
        rows = [f"{r.name:<{width}}  {r.error:.4f}  {r.how}" for r in self.report]
        return rows + [f"note: {n}" for n in self.notes]


# --------------------------------------------------------------------------------------------
# The graph walk


@dataclass
class _View:
    """A data tensor of the graph: layer ``layer``'s output at ``version`` (its post stages
    so far) seen with ONNX shape ``shape``; ``pad`` is a pending ``-inf`` Pad (a MaxPool's)."""

    layer: int
    version: int
    shape: tuple
    pad: tuple[tuple[int, int, int], str] | None = None


@dataclass(eq=False)
class _Layer:
    """One layer of the network file being built (``kind`` ``"input"`` for the network
    input); ``stage`` is the last post stage attached (0 weights, 1 bias or batch norm,
    2 residual, 3 ReLU, 4 max pool)."""

    key: int
    kind: str
    label: tuple[str, str]  # (weight initializer, node path): what names the layer
    source: int | None
    in_map: tuple[int, int, int, int]
    out_map: tuple[int, int, int, int]
    nodes: list[str] = field(default_factory=list)
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    kernel: tuple[int, ...] = (1, 1, 1)
    stride: tuple[int, ...] = (1, 1, 1)
    padding: tuple[int, ...] = (0, 0, 0)
    pool: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None
    weight_name: str = ""
    residual: int | None = None
    crelu: bool = False
    bn: list[str] = field(default_factory=list)
    stage: int = 0
    version: int = 0
    read: bool = False
    how: list[str] = field(default_factory=list)
    approximations: list[str] = field(default_factory=list)

    @property
    def weighted(self) -> bool:
        return self.kind in ("conv", "fc")


class _Refuse(Exception):
    """A node the mapping cannot take; the message says why and what is allowed."""


def _what(layer: _Layer) -> str:
    """``layer``'s output, for messages: the network input or the node that made it."""
    return "the network input" if layer.kind == "input" else f"the output of {layer.nodes[0]}"


def _node_label(node: Any) -> str:
    return f"{node.op_type} '{node.name}'" if node.name else node.op_type


def _attrs(onnx: Any, node: Any) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


class _Graph:
    """One pass over an ONNX graph's nodes in order, building :class:`_Layer` objects and
    collecting every node it refuses (:func:`import_onnx`)."""

    def __init__(self, onnx: Any, model: Any, shapes: dict[str, tuple]) -> None:
        self.onnx, self.graph, self.shapes = onnx, model.graph, shapes
        self.opsets = list(model.opset_import)
        self.consts = {t.name: t for t in self.graph.initializer}
        self.producers: dict[str, Any] = {}
        self.views: dict[str, _View] = {}
        self.poisoned: set[str] = set()
        self.dropped: dict[str, str] = {}  # output -> why it cannot be read (a mask, indices)
        self.layers: dict[int, _Layer] = {}
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.viewed: dict[str, int] = {}  # op type -> nodes taken as views
        self.output = _INPUT
        self.handlers: dict[str, Callable[[Any], None]] = {
            "Conv": self.conv, "BatchNormalization": self.batch_norm, "Relu": self.relu,
            "MaxPool": self.max_pool, "Pad": self.pad, "Add": self.add,
            "GlobalAveragePool": self.gap, "ReduceMean": self.reduce_mean,
            "AveragePool": self.average_pool, "Gemm": self.gemm, "MatMul": self.matmul,
            **{op: self.view for op in VIEW_OPS}}

    # ---- the walk

    def run(self) -> None:
        self.network_input()
        for node in self.graph.node:
            for out in node.output:
                self.producers[out] = node
            self.visit(node)
        self.graph_output()

    def visit(self, node: Any) -> None:
        data = [i for k, i in enumerate(node.input) if (i in self.views or i in self.poisoned)
                and k not in _METADATA_INPUTS.get(node.op_type, ())]
        dropped = [i for i in node.input if i in self.dropped]
        if dropped:
            self.refuse(node, f"reads '{dropped[0]}', {self.dropped[dropped[0]]}")
            return
        if not data:
            return  # computes on constants (or a map's shape or type) only: not the network
        if node.domain not in ("", "ai.onnx") or node.op_type not in self.handlers:
            domain = f" (domain {node.domain})" if node.domain not in ("", "ai.onnx") else ""
            self.refuse(node, f"unsupported op{domain}; the import maps "
                              f"{', '.join(SUPPORTED_OPS)} (fcircnn.models.onnx_graph)")
            return
        if any(i in self.poisoned for i in data):
            self.poison(node)  # its input was refused already: check what it says itself
            try:
                self.attribute_checks(node)
            except _Refuse as exc:
                self.problems.append(f"{_node_label(node)}: {exc}")
            return
        try:
            self.handlers[node.op_type](node)
        except _Refuse as exc:
            self.refuse(node, str(exc))

    def refuse(self, node: Any, why: str) -> None:
        self.problems.append(f"{_node_label(node)}: {why}")
        self.poison(node)

    def poison(self, node: Any) -> None:
        self.poisoned.update(o for o in node.output if o)

    def network_input(self) -> None:
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise OnnxImportError(f"the graph has {len(inputs)} inputs "
                                  f"({', '.join(i.name for i in inputs)}); a network has one "
                                  "clip input [N, C, D, H, W]")
        name = inputs[0].name
        shape = self.shapes.get(name) or ()
        if len(shape) != 5 or not all(isinstance(d, int) and d > 0 for d in shape[1:]):
            # the nodes are still walked: a 2-D network's convs say what they are
            self.problems.append(f"graph input '{name}' has shape {_show(shape)}; a network "
                                 "takes clips [N, C, D, H, W] with static C, D, H and W "
                                 "(export with a fixed clip size)")
        dims = tuple(shape[1:])
        self.layers[_INPUT] = _Layer(_INPUT, "input", ("", name), None, dims, dims,
                                     read=True)
        self.views[name] = _View(_INPUT, 0, shape)

    def graph_output(self) -> None:
        outputs = list(self.graph.output)
        if len(outputs) != 1:
            self.problems.append(f"the graph has {len(outputs)} outputs "
                                 f"({', '.join(o.name for o in outputs)}); a network has one "
                                 "(its class scores)")
            return
        name = outputs[0].name
        if name in self.poisoned:
            return
        view = self.views.get(name)
        if view is None or view.layer == _INPUT:
            self.problems.append(f"graph output '{name}' is not computed from the input by "
                                 "conv, fc or gap layers")
            return
        try:
            self.take(view)
        except _Refuse as exc:
            self.problems.append(f"graph output '{name}': {exc}")
        self.output = view.layer

    # ---- tensors

    def data(self, node: Any, index: int) -> _View:
        view = self.views.get(node.input[index]) if index < len(node.input) else None
        if view is None:
            raise _Refuse(f"input {index} ('{_get(node.input, index)}') is not a map computed "
                          "from the network input")
        if view.pad is not None and node.op_type != "MaxPool":
            raise _Refuse(f"reads the output of {view.pad[1]}, a -inf padding, which the "
                          "import takes only as a MaxPool's padding")
        return view

    def const(self, node: Any, index: int, what: str, *, optional: bool = False
              ) -> np.ndarray | None:
        name = _get(node.input, index)
        if not name:
            if optional:
                return None
            raise _Refuse(f"no {what}")
        value = self.constant(name)
        if value is None:
            if name in self.views or name in self.poisoned:
                raise _Refuse(f"its {what} '{name}' is computed from the network input; it must "
                              "be a constant (an initializer)")
            raise _Refuse(f"its {what} '{name}' is not computed from constants (an "
                          "initializer, a Constant node, or ops on them that onnx's reference "
                          "evaluator runs)")
        return value

    def constant(self, name: str) -> np.ndarray | None:
        numpy_helper = self.onnx.numpy_helper
        if name in self.consts:
            return np.asarray(numpy_helper.to_array(self.consts[name]))
        node = self.producers.get(name)
        if node is None or name in self.views or name in self.poisoned:
            return None
        if node.op_type == "Constant" and node.attribute:
            attr = node.attribute[0]
            if attr.name == "value":
                return np.asarray(numpy_helper.to_array(attr.t))
            return np.asarray(self.onnx.helper.get_attribute_value(attr))
        return self.evaluate(name)

    def evaluate(self, name: str) -> np.ndarray | None:
        """The value of ``name``, computed from constants by the nodes before it (as the
        unoptimised exporter makes a zero bias: ``Expand(CastLike(0, x), Shape(w))``), with
        onnx's reference evaluator; the maps whose shape or type only they read are given
        as zeros (batch size 1). ``None`` when it cannot be computed, or depends on the
        values of a map."""
        nodes, feeds, seen, stack = [], {}, set(), [(name, False)]
        while stack:
            value, metadata = stack.pop()
            if not value or value in self.consts or (value, metadata) in seen:
                continue
            seen.add((value, metadata))
            if value in self.views:
                shape = self.views[value].shape
                if not metadata or not shape or not _static(shape[1:]):
                    return None
                feeds[value] = np.zeros((1, *shape[1:]), dtype=np.float32)
                continue
            node = self.producers.get(value)
            if node is None or value in self.poisoned:
                return None
            nodes.append(node)
            meta = _METADATA_INPUTS.get(node.op_type, ())
            stack += [(i, k in meta) for k, i in enumerate(node.input)]
        helper, float32 = self.onnx.helper, self.onnx.TensorProto.FLOAT
        order = {id(n): i for i, n in enumerate(self.graph.node)}
        nodes = sorted({id(n): n for n in nodes}.values(), key=lambda n: order[id(n)])
        used = {i for n in nodes for i in n.input}
        graph = helper.make_graph(
            nodes, "constant", [helper.make_tensor_value_info(v, float32, None) for v in feeds],
            [helper.make_empty_tensor_value_info(name)],
            [t for k, t in self.consts.items() if k in used])
        model = helper.make_model(graph, opset_imports=self.opsets)
        try:
            from onnx.reference import ReferenceEvaluator

            return np.asarray(ReferenceEvaluator(model).run([name], feeds)[0])
        except Exception:  # an op the reference evaluator lacks: the caller says what it is
            return None

    def emit(self, node: Any, view: _View, shape: tuple) -> None:
        """``node``'s output 0 is ``view`` of layer output ``shape``."""
        self.views[node.output[0]] = _View(view.layer, view.version, tuple(shape))

    def current(self, view: _View) -> _Layer:
        layer = self.layers[view.layer]
        if view.version != layer.version:
            raise _Refuse(f"reads the map of {layer.nodes[0]} before "
                          f"{layer.nodes[view.version + 1]}, which the network file does not "
                          "keep (a layer's post stages apply to its only output)")
        return layer

    def take(self, view: _View) -> _Layer:
        """The layer ``view`` is the current output of, now read (by a layer, a residual or
        the graph output)."""
        layer = self.current(view)
        layer.read = True
        return layer

    def attach(self, view: _View, stage: int, what: str, kinds: Sequence[str]) -> _Layer:
        """The layer a post stage ``stage`` (``what``) attaches to: ``view`` must be its
        current output, not read by anything yet, of a kind in ``kinds``, and the stage must
        come after the ones it has."""
        layer = self.current(view)
        if layer.kind not in kinds:
            raise _Refuse(f"{what} applies to {_what(layer)}; it is taken only after a "
                          f"{' or '.join(kinds)} layer")
        if layer.read:
            raise _Refuse(f"{what} on {_what(layer)}, which is also read "
                          "before it; a layer's post stages apply to its only output")
        if stage < layer.stage or (stage == layer.stage and stage != 1):
            raise _Refuse(f"{what} after {layer.nodes[-1]}: a layer's post stages come in the "
                          "order bias/batch norm, residual, ReLU, max pool")
        return layer

    def advance(self, node: Any, layer: _Layer, stage: int, view: _View,
                shape: tuple | None = None) -> None:
        """Post stage ``stage`` (``node``) attached to ``layer``: its output is new."""
        layer.stage, layer.version = stage, layer.version + 1
        layer.nodes.append(_node_label(node))
        self.emit(node, _View(layer.key, layer.version, view.shape), shape or view.shape)

    def map_view(self, view: _View, what: str = "its input") -> tuple[int, int, int, int]:
        """The map ``view`` shows as ``[N, C, D, H, W]`` (else refused)."""
        dims = self.layers[view.layer].out_map
        if len(view.shape) != 5 or tuple(view.shape[1:]) != dims:
            raise _Refuse(f"{what} has shape {_show(view.shape)}, not [N, {_dims(dims)}] "
                          f"({_what(self.layers[view.layer])}); a conv, pool or batch norm "
                          "reads a map [N, C, D, H, W]")
        return dims

    def new_layer(self, node: Any, kind: str, view: _View, out_map: tuple, label: str,
                  **fields: Any) -> _Layer:
        source = self.take(view)
        key = len(self.layers) - 1
        layer = _Layer(key, kind, label, source.key, source.out_map, out_map,
                       nodes=[_node_label(node)], **fields)
        if layer.weighted:
            layer.weight_name = _get(node.input, 1)
        self.layers[key] = layer
        return layer

    def attribute_checks(self, node: Any) -> None:
        """What a node's own attributes and constants allow, whatever its input."""
        if node.op_type == "Conv":
            self.conv_attributes(node)
        elif node.op_type == "MaxPool":
            _pool_attributes(_attrs(self.onnx, node))

    # ---- the handlers (module docstring)

    def conv_attributes(self, node: Any) -> tuple[np.ndarray, dict[str, Any]]:
        weight = self.const(node, 1, "weight")
        a = _attrs(self.onnx, node)
        if weight.ndim != 5:
            raise _Refuse(f"a {weight.ndim - 2}-D conv (weight of shape {list(weight.shape)}); "
                          "only 3-D convs (kernel [Kd, Kr, Kc]) on maps [N, C, D, H, W]")
        if a.get("group", 1) != 1:
            raise _Refuse(f"group={a['group']}: only group 1 (a grouped or depthwise conv has "
                          "no block-circulant form here)")
        if any(v != 1 for v in a.get("dilations", [1, 1, 1])):
            raise _Refuse(f"dilations={list(a['dilations'])}: only dilations 1")
        _symmetric_pads(a, "pads")
        return weight, a

    def conv(self, node: Any) -> None:
        view = self.data(node, 0)
        weight, a = self.conv_attributes(node)
        c, d, h, w = self.map_view(view)
        padding = _symmetric_pads(a, "pads")
        if weight.shape[1] != c:
            raise _Refuse(f"weight of shape {list(weight.shape)} for an input of {c} channels")
        kernel, stride = tuple(weight.shape[2:]), tuple(a.get("strides", (1, 1, 1)))
        out = tuple((n + 2 * p - k) // s + 1
                    for n, k, s, p in zip((d, h, w), kernel, stride, padding, strict=True))
        bias = self.const(node, 2, "bias", optional=True)
        layer = self.new_layer(node, "conv", view, (weight.shape[0], *out),
                               _weight_label(node, 1), weight=weight.astype(np.float64),
                               kernel=kernel, stride=stride, padding=padding)
        self.set_bias(layer, bias, "bias")
        self.emit(node, _View(layer.key, 0, ()), (view.shape[0], *layer.out_map))

    def set_bias(self, layer: _Layer, bias: np.ndarray | None, what: str) -> None:
        if bias is None:
            return
        M = layer.out_map[0]
        bias = np.asarray(bias, dtype=np.float64)
        if not np.any(bias):  # adds nothing (the unoptimised exporter's zero bias is [M, 2])
            return
        if bias.size != M:
            raise _Refuse(f"{what} of shape {list(bias.shape)} for {M} output channels")
        layer.bias = bias.reshape(M) + (0 if layer.bias is None else layer.bias)
        layer.how.append(f"{what} as the CBN offset (exact)")

    def gemm(self, node: Any) -> None:
        view, a = self.data(node, 0), _attrs(self.onnx, node)
        if a.get("transA", 0):
            raise _Refuse("transA=1: the input must be [N, K] (as nn.Linear exports it)")
        weight = self.const(node, 1, "weight B")
        if weight.ndim != 2:
            raise _Refuse(f"weight of shape {list(weight.shape)}; a Gemm's B is 2-D")
        weight = weight if a.get("transB", 0) else weight.T
        bias = self.const(node, 2, "bias C", optional=True)
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        layer = self.fc(node, view, weight * alpha)
        if bias is not None:
            self.set_bias(layer, _per_output(bias, weight.shape[0], "bias C") * beta, "bias C")

    def matmul(self, node: Any) -> None:
        view = self.data(node, 0)
        weight = self.const(node, 1, "weight B")
        if weight.ndim != 2:
            raise _Refuse(f"weight of shape {list(weight.shape)}; the import takes a MatMul "
                          "of the flattened map [N, K] by a [K, M] weight")
        self.fc(node, view, weight.T)

    def fc(self, node: Any, view: _View, weight: np.ndarray) -> _Layer:
        dims = self.layers[view.layer].out_map
        K = math.prod(dims)
        if len(view.shape) != 2 or view.shape[1] != K or weight.shape[1] != K:
            raise _Refuse(f"reads {_show(view.shape)} with a weight of shape "
                          f"{list(weight.shape)}; an fc layer reads "
                          f"{_what(self.layers[view.layer])} ({_dims(dims)}) flattened to "
                          f"[N, {K}] (Flatten or Reshape) with a weight [M, {K}]")
        M = weight.shape[0]
        layer = self.new_layer(node, "fc", view, (M, 1, 1, 1), _weight_label(node, 1),
                               weight=weight.reshape(M, *dims).astype(np.float64),
                               kernel=dims[1:])
        self.emit(node, _View(layer.key, 0, ()), (view.shape[0], M))
        return layer

    def batch_norm(self, node: Any) -> None:
        view = self.data(node, 0)
        if _attrs(self.onnx, node).get("training_mode", 0) or len(
                [o for o in node.output if o]) > 1:
            raise _Refuse("in training mode; export the model in eval mode (model.eval())")
        layer = self.attach(view, 1, "a batch norm", ("conv", "fc"))
        self.channel_view(view, layer)
        M = layer.out_map[0]
        scale, beta, mean, var = (_per_output(self.const(node, i, what), M, what) for i, what
                                  in enumerate(("scale", "B", "mean", "var"), start=1))
        eps = float(_attrs(self.onnx, node).get("epsilon", 1e-5))
        if np.any(var + eps <= 0):
            raise _Refuse("a variance <= -epsilon")
        gain = scale / np.sqrt(var + eps)
        layer.weight = layer.weight * gain.reshape(-1, *([1] * (layer.weight.ndim - 1)))
        bias = np.zeros(M) if layer.bias is None else layer.bias
        layer.bias = gain * (bias - mean) + beta
        layer.bn.append(_node_label(node))
        self.advance(node, layer, 1, view)

    def channel_view(self, view: _View, layer: _Layer) -> None:
        c, *spatial = layer.out_map
        if (len(view.shape) < 2 or view.shape[1] != c
                or math.prod(view.shape[2:]) != math.prod(spatial)):
            raise _Refuse(f"applies per channel to {_show(view.shape)}, not to the channels of "
                          f"{_what(layer)} ({_dims(layer.out_map)}) on axis 1")

    def add(self, node: Any) -> None:
        views = [self.views.get(i) for i in node.input[:2]]
        if len(node.input) != 2:
            raise _Refuse("an Add of two tensors")
        if all(v is not None for v in views):
            self.residual(node, views[0], views[1])
            return
        index = 0 if views[0] is not None else 1
        view = self.data(node, index)
        bias = self.const(node, 1 - index, "addend")
        layer = self.attach(view, 1, "a constant Add (a bias)", ("conv", "fc"))
        self.channel_view(view, layer)
        self.set_bias(layer, _channel_constant(bias, view.shape, layer.out_map[0]),
                      f"{_node_label(node)} (a bias)")
        self.advance(node, layer, 1, view)

    def residual(self, node: Any, a: _View, b: _View) -> None:
        for view in (a, b):
            self.current(view)
        if a.shape != b.shape or a.pad or b.pad or (
                self.layers[a.layer].out_map != self.layers[b.layer].out_map):
            raise _Refuse(f"adds {_show(a.shape)} and {_show(b.shape)}; a residual adds two "
                          "maps of the same shape (no broadcasting)")
        hosts = [v for v in (a, b) if self.can_host(v)]
        if not hosts:
            raise _Refuse("neither input is the output of a conv or fc layer before its "
                          "ReLU, pool or another residual, read by nothing else; a residual "
                          "adds a map to such a layer's output (after its bias or batch norm)")
        host = max(hosts, key=lambda v: (self.source_key(v), v.layer))
        other = b if host is a else a
        if other.layer == _INPUT or other.layer == host.layer:
            raise _Refuse("adds the network input or a layer to itself; a residual names an "
                          "earlier layer")
        layer = self.attach(host, 2, "a residual", ("conv", "fc"))
        res = self.take(other)
        layer.residual = res.key
        layer.how.append(f"{_node_label(node)}: residual {_RESIDUAL} added before the CReLU "
                         "(exact)")
        self.advance(node, layer, 2, host)

    def can_host(self, view: _View) -> bool:
        layer = self.layers[view.layer]
        return (layer.weighted and view.version == layer.version and not layer.read
                and layer.stage <= 1)

    def source_key(self, view: _View) -> int:
        """The key of the layer ``view``'s layer reads (the later, the deeper the branch)."""
        source = self.layers[view.layer].source
        return _INPUT if source is None else source

    def relu(self, node: Any) -> None:
        view = self.data(node, 0)
        layer = self.attach(view, 3, "a ReLU", ("conv", "fc"))
        layer.crelu = True
        layer.how.append(f"{_node_label(node)} as CReLU (approximation)")
        layer.approximations.append("crelu")
        self.advance(node, layer, 3, view)

    def pad(self, node: Any) -> None:
        view = self.data(node, 0)
        self.map_view(view)
        mode = _decode(_attrs(self.onnx, node).get("mode", "constant"))
        value = self.const(node, 2, "constant value", optional=True)
        pads = self.const(node, 1, "pads").astype(int).tolist()
        axes = self.const(node, 3, "axes", optional=True)
        if axes is not None:
            raise _Refuse("a Pad with axes; only a Pad of all five axes")
        if mode != "constant" or value is None or not np.all(np.isneginf(value)):
            raise _Refuse("only a constant Pad of -inf before a MaxPool (its padding) is taken")
        if len(pads) != 10 or any(pads[i] or pads[i + 5] for i in (0, 1)) or any(
                pads[i] != pads[i + 5] or pads[i] < 0 for i in (2, 3, 4)):
            raise _Refuse(f"pads={pads}: only equal padding at both ends of D, H and W")
        self.views[node.output[0]] = _View(view.layer, view.version, view.shape,
                                           (tuple(pads[2:5]), _node_label(node)))

    def max_pool(self, node: Any) -> None:
        view = self.data(node, 0)
        a = _attrs(self.onnx, node)
        extra = view.pad[0] if view.pad else (0, 0, 0)
        self.map_view(view)  # a Pad's view has the shape of the map it pads
        if len(node.output) > 1 and node.output[1]:
            self.dropped[node.output[1]] = f"the indices of {_node_label(node)}, not taken"
        window, own = _pool_attributes(a)
        padding = tuple(p + q for p, q in zip(own, extra, strict=True))
        stride = tuple(a.get("strides", (1, 1, 1)))
        layer = self.attach(view, 4, "a max pool", ("conv",))
        c, *spatial = layer.out_map
        out = tuple((n + 2 * p - k) // s + 1
                    for n, k, s, p in zip(spatial, window, stride, padding, strict=True))
        layer.pool, layer.out_map = (window, stride, padding), (c, *out)
        padded = f"{view.pad[1]} (-inf, its padding) and " if view.pad else ""
        layer.how.append(f"{padded}{_node_label(node)} as CMaxPool (approximation)")
        layer.approximations.append("cmaxpool")
        self.advance(node, layer, 4, view, (view.shape[0], *layer.out_map))

    def gap(self, node: Any, keepdims: bool = True) -> None:
        view = self.data(node, 0)
        dims = self.map_view(view)
        layer = self.new_layer(node, "gap", view, (dims[0], 1, 1, 1), ("", _node_path(node)))
        layer.how.append("global average pool (exact)")
        shape = (view.shape[0], dims[0], 1, 1, 1) if keepdims else (view.shape[0], dims[0])
        self.emit(node, _View(layer.key, 0, ()), shape)

    def reduce_mean(self, node: Any) -> None:
        a = _attrs(self.onnx, node)
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self.const(node, 1, "axes").tolist()
        if axes is None or sorted(int(x) % 5 for x in axes) != [2, 3, 4]:
            raise _Refuse(f"axes={axes}: only a mean over D, H and W (axes 2, 3, 4) is a "
                          "global average pool")
        self.gap(node, bool(a.get("keepdims", 1)))

    def average_pool(self, node: Any) -> None:
        view = self.data(node, 0)
        dims = self.map_view(view)
        a = _attrs(self.onnx, node)
        pads = list(a.get("pads", [0] * 6))
        if tuple(a.get("kernel_shape", ())) != dims[1:] or any(pads) or _decode(
                a.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
            raise _Refuse(f"kernel_shape={list(a.get('kernel_shape', ()))}, pads={pads}: only "
                          f"an AveragePool over the whole map ({_dims(dims[1:])}, no padding), "
                          "a global average pool, is taken")
        self.gap(node)

    def view(self, node: Any) -> None:
        view = self.data(node, 0)
        if node.op_type == "Dropout":
            self.dropout(node)
        out = self.view_shape(node, view.shape)
        if out is None or len(out) < 1 or not _static(out[1:]):
            raise _Refuse(f"output '{node.output[0]}' has no static shape ({_show(out)}, as "
                          "shape inference gives it)")
        if (math.prod(out[1:]) != math.prod(view.shape[1:]) or (
                isinstance(out[0], int) and isinstance(view.shape[0], int)
                and out[0] != view.shape[0])):
            raise _Refuse(f"reshapes {_show(view.shape)} to {_show(out)}; a view keeps the "
                          "batch axis first")
        self.views[node.output[0]] = _View(view.layer, view.version, tuple(out))
        self.viewed[node.op_type] = self.viewed.get(node.op_type, 0) + 1

    def view_shape(self, node: Any, shape: tuple) -> tuple | None:
        """The shape of a view op's output: computed from its input's (the TorchScript
        exporter's shape arithmetic defeats shape inference), else inferred."""
        a, op = _attrs(self.onnx, node), node.op_type
        axes = a.get("axes")
        if axes is None and op in ("Squeeze", "Unsqueeze") and _get(node.input, 1):
            axes = self.constant(node.input[1])
        try:
            if op == "Reshape":
                target = self.constant(node.input[1])
                if target is not None:
                    return _reshape(shape, [int(t) for t in target], a.get("allowzero", 0))
            elif op == "Flatten":
                axis = a.get("axis", 1) % len(shape)
                return (_product(shape[:axis]), _product(shape[axis:]))
            elif op == "Squeeze" and axes is not None:
                drop = {int(x) % len(shape) for x in np.reshape(axes, -1)}
                return tuple(d for i, d in enumerate(shape) if i not in drop)
            elif op == "Unsqueeze" and axes is not None:
                out, rank = list(shape), len(shape) + np.size(axes)
                for x in sorted(int(x) % rank for x in np.reshape(axes, -1)):
                    out.insert(x, 1)
                return tuple(out)
            elif op in ("Identity", "Dropout"):
                return shape
        except (ValueError, ZeroDivisionError):
            pass
        return self.shapes.get(node.output[0])

    def dropout(self, node: Any) -> None:
        training = self.const(node, 2, "training_mode", optional=True)
        if training is not None and bool(np.asarray(training).reshape(-1)[0]):
            raise _Refuse("training_mode is true; export the model in eval mode")
        if len(node.output) > 1 and node.output[1]:
            self.dropped[node.output[1]] = f"the mask of {_node_label(node)}, not taken"


def _get(seq: Sequence[str], index: int) -> str:
    return seq[index] if index < len(seq) else ""


def _static(dims: Sequence[Any]) -> bool:
    return all(isinstance(d, int) and d >= 0 for d in dims)


def _show(shape: Sequence[Any] | None) -> str:
    if shape is None:
        return "unknown"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _dims(dims: Sequence[int]) -> str:
    return "x".join(map(str, dims))


def _symmetric_pads(a: dict[str, Any], key: str) -> tuple[int, int, int]:
    auto = _decode(a.get("auto_pad", "NOTSET"))
    if auto not in ("NOTSET", "VALID"):
        raise _Refuse(f"auto_pad={auto}: only explicit pads (or VALID)")
    pads = list(a.get(key, [0] * 6)) if auto == "NOTSET" else [0] * 6
    if len(pads) != 6 or pads[:3] != pads[3:]:
        raise _Refuse(f"{key}={pads}: only symmetric pads (the same at both ends of D, H, W)")
    return (pads[0], pads[1], pads[2])


def _pool_attributes(a: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, int, int]]:
    """A MaxPool's window and padding, after checking what the CMaxPool takes."""
    window = tuple(a.get("kernel_shape", ()))
    if len(window) != 3:
        raise _Refuse(f"kernel_shape={list(window)}: only 3-D max pools")
    if a.get("ceil_mode", 0):
        raise _Refuse("ceil_mode=1: only ceil_mode 0 (the output size rounds down)")
    if any(v != 1 for v in a.get("dilations", [1, 1, 1])):
        raise _Refuse(f"dilations={list(a['dilations'])}: only dilations 1")
    return window, _symmetric_pads(a, "pads")


def _product(dims: Sequence[Any]) -> int | None:
    return math.prod(dims) if _static(dims) else None


def _reshape(shape: tuple, target: list[int], allowzero: int) -> tuple | None:
    """ONNX Reshape's output shape (``0`` copies a dimension unless ``allowzero``, ``-1`` is
    inferred); an unknown batch size stays unknown when ``-1`` stands for it."""
    out: list[Any] = [shape[i] if t == 0 and not allowzero and i < len(shape) else t
                      for i, t in enumerate(target)]
    if -1 not in out:
        return tuple(out)
    k = out.index(-1)
    rest = _product([d for i, d in enumerate(out) if i != k])
    total = _product(shape)
    if rest is None or rest == 0:
        return None
    if total is not None:
        out[k] = total // rest
    elif k == 0 and _static(shape[1:]):
        out[0] = shape[0] if rest == math.prod(shape[1:]) else None
    else:
        return None
    return tuple(out)


def _per_output(value: np.ndarray, M: int, what: str) -> np.ndarray:
    value = np.asarray(value, dtype=np.float64)
    if value.size == 1:
        return np.full(M, float(value.reshape(-1)[0]))
    if value.size != M:
        raise _Refuse(f"{what} of shape {list(value.shape)} for {M} channels")
    return value.reshape(M)


def _channel_constant(value: np.ndarray, shape: tuple, M: int) -> np.ndarray:
    """A constant addend broadcast over a ``[N, M, ...]`` view as one value per channel."""
    try:
        full = np.broadcast_to(np.asarray(value, dtype=np.float64), (1, *shape[1:]))[0]
    except ValueError:
        raise _Refuse(f"adds a constant of shape {list(np.shape(value))} that does not "
                      f"broadcast to {_show(shape)}") from None
    flat = full.reshape(M, -1)
    if not np.all(flat == flat[:, :1]):
        raise _Refuse("adds a constant that varies within a channel; only a per-channel bias")
    return flat[:, 0]


def _weight_label(node: Any, index: int) -> tuple[str, str]:
    """What may name a weighted layer: its weight initializer's name without ``.weight``
    (empty when generic, ``onnx::Conv_12``) and its node's path (:func:`_node_path`)."""
    name = _get(node.input, index)
    weight = ("" if _GENERIC_NAME.fullmatch(name) else
              re.sub(r"[._](weight|kernel|w)$", "", name, flags=re.IGNORECASE))
    return weight, _node_path(node)


def _node_path(node: Any) -> str:
    """A node's name as a module path (the TorchScript exporter's ``/conv1/conv/Conv`` is
    ``conv1.conv``); empty when the name says nothing (``node_Conv_12``)."""
    name = node.name or ""
    if _GENERIC_NAME.fullmatch(name):
        return ""
    parts = [p for p in name.split("/") if p]
    if len(parts) > 1 and parts[-1].split("_")[0] == node.op_type:
        parts = parts[:-1]
    scopes: list[str] = []  # /layer1/layer1.0/conv1/conv1.0 is layer1.0.conv1.0
    for part in parts:
        if scopes and part.startswith(scopes[-1] + "."):
            scopes[-1] = part
        else:
            scopes.append(part)
    return ".".join(scopes)


# --------------------------------------------------------------------------------------------
# From the layers to a network file


def _order(layers: dict[int, _Layer], output: int) -> list[_Layer]:
    """The layers the output depends on, in an order where every layer comes after its input
    and residual, else in graph order (a ResNet shortcut goes just before the conv that adds
    it)."""
    needed, stack = set(), [output]
    while stack:
        key = stack.pop()
        if key == _INPUT or key in needed:
            continue
        needed.add(key)
        stack += [k for k in (layers[key].source, layers[key].residual) if k is not None]
    deps = {k: {d for d in (layers[k].source, layers[k].residual) if d in needed}
            for k in needed}
    ready = [k for k, d in deps.items() if not d]
    heapq.heapify(ready)
    order: list[_Layer] = []
    while ready:
        key = heapq.heappop(ready)
        order.append(layers[key])
        for k, d in deps.items():
            if key in d:
                d.discard(key)
                if not d:
                    heapq.heappush(ready, k)
    return order


def _identifier(text: str) -> str:
    """``text`` as an identifier (letters, digits, ``_``) that YAML reads as a string."""
    ident = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text)).strip("_")
    ident = f"l{ident}" if ident[:1].isdigit() else ident
    return f"{ident}_" if ident.lower() in _YAML_WORDS else ident


def _names(order: list[_Layer]) -> dict[int, str]:
    """Identifiers for the layers: their weight or node paths without the components every
    weighted layer's path shares (``layers.<name>.conv`` of the dense twin), unique."""
    weighted = [layer for layer in order if layer.weighted]
    source = 0 if all(layer.label[0] for layer in weighted) else (
        1 if all(layer.label[1] for layer in weighted) else None)
    paths = {layer.key: [p for p in re.split(r"[./]", _label(layer, source)) if p]
             for layer in order}
    named = [paths[layer.key] for layer in order if layer.weighted and paths[layer.key]]
    if len(named) > 1:
        first = _common(named)
        last = _common([p[::-1] for p in named])
        if all(len(p) > first + last for p in named):
            for p in named:
                p[:] = p[first:len(p) - last]
    names: dict[int, str] = {}
    for layer in order:
        base = _identifier("_".join(paths[layer.key])) or _kind(layer)
        name, n = base, 1
        while name in names.values():
            n += 1
            name = f"{base}_{n}"
        names[layer.key] = name
    return names


def _label(layer: _Layer, source: int | None) -> str:
    """The initializer (``source`` 0) or node path (1) naming ``layer``: the one that names
    every weighted layer, else either."""
    if not layer.weighted or source is None:
        return layer.label[0] or layer.label[1]
    return layer.label[source]


def _common(paths: list[list[str]]) -> int:
    """How many leading components every path in ``paths`` shares."""
    n = 0
    while all(len(p) > n and p[n] == paths[0][n] for p in paths):
        n += 1
    return n


def _layer_yaml(layer: _Layer, names: dict[int, str], previous: int | None) -> list[str]:
    kind = _kind(layer)
    weight = f" (weight '{layer.weight_name}')" if layer.weight_name else ""
    lines = [_comment(f"from {layer.nodes[0]}{weight}"
                      f"{''.join(', ' + n for n in layer.nodes[1:])}", "  "),
             f"  - name: {names[layer.key]}", f"    type: {kind}"]
    if layer.source != previous:
        lines.append(f"    input: {names[layer.source]}")
    if layer.weighted:
        lines.append(f"    out_channels: {layer.out_map[0]}")
    if kind == "conv":
        lines += [f"    kernel: {list(layer.kernel)}", f"    stride: {list(layer.stride)}",
                  f"    padding: {list(layer.padding)}"]
    if layer.bias is not None:
        lines.append("    cbn: true")
    if layer.residual is not None:
        lines.append(f"    residual: {names[layer.residual]}")
    if layer.crelu:
        lines.append("    crelu: true")
    if layer.pool is not None:
        window, stride, padding = layer.pool
        lines.append(f"    pool: {{window: {list(window)}, stride: {list(stride)}, "
                     f"padding: {list(padding)}}}")
    return lines


def _comment(text: str, indent: str = "") -> str:
    """A YAML comment line of ``text`` (line breaks in names made spaces)."""
    return f"{indent}# " + re.sub(r"[\r\n]+", " ", text)


def _kind(layer: _Layer) -> str:
    """A conv whose kernel covers its unpadded input map and that has no pool is the fc."""
    if (layer.kind == "conv" and layer.pool is None and layer.padding == (0, 0, 0)
            and tuple(layer.kernel) == tuple(layer.in_map[1:])):
        return "fc"
    return layer.kind


def _network_yaml(name: str, source: str, order: list[_Layer], names: dict[int, str],
                  input_map: tuple[int, ...], block_size: int) -> str:
    c, d, h, w = input_map
    lines = [_comment(f"Imported from {source} by fcircnn.models.onnx_graph: dense weights "
                      "projected onto"),
             "# block-circulant ones; each layer names the ONNX nodes it was made from.",
             f"name: {name}", f"input: {{channels: {c}, depth: {d}, height: {h}, width: {w}}}",
             f"classes: {order[-1].out_map[0]}", f"block_size: {block_size}", "layers:"]
    previous = _INPUT
    for layer in order:
        lines += _layer_yaml(layer, names, previous)
        previous = layer.key
    return "\n".join(lines) + "\n"


def _load_text(text: str, name: str) -> NetworkConfig:
    """The network file ``text`` validated as a file would be (built in memory: its
    ``path`` is ``None``)."""
    try:
        return validate_model(NetworkConfig, yaml.safe_load(text), f"{name}.yaml")
    except ConfigError as exc:
        problems = [f"{p.key}: {p.message}" for p in exc.problems]
        raise OnnxImportError("the network file the graph maps to is refused:\n  "
                              + "\n  ".join(problems) + "\n" + text, problems) from None


# --------------------------------------------------------------------------------------------
# Weights and report


def _cbn(layer: _Layer, resolved: ResolvedLayer) -> tuple[np.ndarray, np.ndarray]:
    """CBN gain 1 and offset the packed rfft of the per-channel bias ``[2, M'/2]``."""
    bias = pad_channels(layer.bias, resolved.block_size)
    slots = to_slots(bias, resolved.block_size)
    return np.ones((2, slots.size)), np.stack([slots.real, slots.imag])


def _layer_weights(layer: _Layer, resolved: ResolvedLayer) -> tuple[LayerWeights, float]:
    if not resolved.weighted:
        return LayerWeights(None), 0.0
    generators, error = project_layer(resolved, layer.weight)
    if not resolved.cbn:
        return LayerWeights(generators), error
    gain, offset = _cbn(layer, resolved)
    return LayerWeights(generators, gain, offset), error


def _row(layer: _Layer, resolved: ResolvedLayer, error: float, names: dict[int, str]
         ) -> ImportRow:
    how, approx = [], []
    if resolved.weighted:
        what = "dense weight" + (", " + " and ".join(layer.bn) + " folded into it (exact),"
                                 if layer.bn else "")
        if error <= EXACT_TOLERANCE:
            how.append(f"{what} block-circulant already (exact)")
        else:
            how.append(f"{what} projected onto block-circulant (approximation)")
            approx.append("projection")
        if resolved.kind == "fc" and layer.kind == "conv":
            how.append("a conv over the whole map, as fc (exact)")
    how += [h.replace(_RESIDUAL, f"'{names[layer.residual]}'") if layer.residual is not None
            else h for h in layer.how]
    source = resolved.input
    if resolved.weighted and source is not None and resolved.in_channels % resolved.block_size:
        how.append(f"reads the {resolved.in_channels} channels of '{source}' padded to "
                   f"{resolved.padded_in_channels}: the padding channels hold what the "
                   "block-circulant weights compute there, and this layer's weights read "
                   "them (approximation)")
        approx.append("padding channels")
    return ImportRow(names[layer.key], tuple(layer.nodes), "; ".join(how), error,
                     tuple(dict.fromkeys(approx + layer.approximations)))


def _notes(rows: Sequence[ImportRow], graph: _Graph) -> list[str]:
    notes = list(graph.notes)
    if graph.viewed:
        notes.append(f"views of a map, nothing to compute (exact): "
                     f"{', '.join(f'{n} {op}' for op, n in graph.viewed.items())}")
    notes.append("exact means in the float reference (fcircnn golden); the accelerator's int8 "
                 "contract quantizes every layer, as for any network (fcircnn calibrate)")
    kinds = {a for r in rows for a in r.approximations}
    taken = [what for kind, what in (
        ("crelu", ("each Relu as a CReLU, a ReLU on the real and on the imaginary part of "
                   "each slot, not on each channel")),
        ("cmaxpool", ("each MaxPool as a CMaxPool, the maximum of each slot part, not of each "
                      "channel"))) if kind in kinds]
    if taken:
        notes.append(f"{' and '.join(taken)}: the accelerator's nonlinearities act on the "
                     "frequency-domain slots, so the network computes another function than "
                     "the graph's; fine-tune it (fcircnn.torch) or measure it (fcircnn run) "
                     "before use")
    if "padding channels" in kinds:
        notes.append("channel counts that are not a multiple of the block size are padded; "
                     "the padding channels are not zero after a block-circulant layer, and "
                     "the layers marked read them")
    if "projection" in kinds:
        notes.append("the dense weights are projected onto the nearest block-circulant ones "
                     "(the error column): a large error loses most of what the dense "
                     "network learned until it is fine-tuned")
    return notes


# --------------------------------------------------------------------------------------------
# Entry point


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:
        raise ImportError(f"importing an ONNX model needs the onnx package: pip install "
                          f"'{EXTRA}'") from exc
    return onnx


def _read_model(onnx: Any, path: str | os.PathLike[str]) -> tuple[Any, dict[str, tuple]]:
    """The model (external data loaded) and the inferred shape of each value by name."""
    try:
        checked = check_input_file(path, "an ONNX model (.onnx)")
    except ArrayFileError as exc:
        raise OnnxImportError(str(exc)) from None
    try:
        model = onnx.load(str(checked), load_external_data=False)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        onnx.external_data_helper.load_external_data_for_model(model, str(checked.parent))
    except Exception as exc:  # protobuf's DecodeError, onnx's InferenceError, OSError
        raise OnnxImportError(f"{path}: not a readable ONNX model ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    shapes = {}
    graph = inferred.graph
    for info in (*graph.input, *graph.value_info, *graph.output):
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            shapes[info.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                      for d in tensor.shape.dim)
    return model, shapes


def import_onnx(path: str | os.PathLike[str], *, block_size: int = 8,
                name: str | None = None) -> OnnxImport:
    """Import an ONNX model of a dense 3D CNN as a network file and block-circulant weights.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.onnx`` file (external data beside it is read).
    block_size : int
        ``B`` of every layer: 4, 8 or 16.
    name : str, optional
        The network's name (default: the file's stem), made an identifier (letters, digits
        and ``_``).

    Returns
    -------
    OnnxImport
        The network file (text and loaded), the weights and the report.

    Raises
    ------
    ImportError
        Without the ``onnx`` package (the extra :data:`EXTRA`).
    OnnxImportError
        An unreadable model, or one whose graph does not map onto a network file: every node
        refused, named with its op type and what is allowed (``problems``).
    ValueError
        A block size other than 4, 8 or 16.
    """
    if block_size not in BLOCK_SIZES:
        raise ValueError(f"block size must be one of {', '.join(map(str, BLOCK_SIZES))}, "
                         f"not {block_size!r}")
    onnx = _onnx()
    model, shapes = _read_model(onnx, path)
    graph = _Graph(onnx, model, shapes)
    graph.run()
    if graph.problems:
        raise OnnxImportError(f"{path}: {len(graph.problems)} node(s) the import cannot take:\n  "
                              + "\n  ".join(graph.problems), graph.problems)
    order = _order(graph.layers, graph.output)
    _check_first(order)
    _note_dead(graph, order)
    names = _names(order)
    net_name = _identifier(name or Path(path).stem) or "network"
    text = _network_yaml(net_name, Path(path).name, order, names,
                         graph.layers[_INPUT].out_map, block_size)
    net = _load_text(text, net_name)
    return _result(text, net, order, names, graph)


def _note_dead(graph: _Graph, order: list[_Layer]) -> None:
    kept = {layer.key for layer in order}
    dead = [layer.nodes[0] for key, layer in graph.layers.items()
            if key != _INPUT and key not in kept]
    if dead:
        graph.notes.append(f"left out {', '.join(dead)}: the graph output does not depend on "
                           "them")


def _check_first(order: list[_Layer]) -> None:
    late = [layer for layer in order[1:] if layer.source == _INPUT]
    if late:
        raise OnnxImportError(f"{', '.join(late[0].nodes[:1])} reads the network input, as "
                              f"{', '.join(order[0].nodes[:1])} does: only the first layer of "
                              "a network file reads the input")


def _result(text: str, net: NetworkConfig, order: list[_Layer], names: dict[int, str],
            graph: _Graph) -> OnnxImport:
    layers, rows = {}, []
    for layer, resolved in zip(order, net.resolved, strict=True):
        layers[resolved.name], error = _layer_weights(layer, resolved)
        rows.append(_row(layer, resolved, error, names))
    weights = NetworkWeights(layers)
    try:
        weights = check_weights(net, weights.arrays(), "the imported weights")
    except ArrayFileError as exc:
        raise OnnxImportError(str(exc)) from None
    return OnnxImport(text, net, weights, tuple(rows), tuple(_notes(rows, graph)))
