"""Cross-layer equalization (CLE) with high-bias absorption, on the float graph before quantizing.

    model, pairs = equalize_model(model)

As AIMET does (Nagel et al., "Data-free quantization", 2019), after batch norms are folded
(udo_build.quant.fold): for two layers A -> B (Conv or Gemm with constant weights, depthwise and
grouped convolutions included) joined by ops that are positively homogeneous per channel
(f(x / s) = f(x) / s for s > 0: Relu, PRelu, LeakyRelu, MaxPool, a Clip with no upper bound),
output channel i of A is divided by s_i and input channel i of B multiplied by s_i, with
s_i = sqrt(r1_i / r2_i) (r1: the range of A's weights for output channel i, r2: B's for input
channel i), so both ranges become sqrt(r1 r2) and per-tensor grids waste fewer levels. Pairs are
equalized in graph order, round after round, until no scale moves by more than TOLERANCE (or
MAX_ROUNDS): a chain A -> B -> C (depthwise B) converges to the three-way equalization.
The float function is unchanged within float32 rounding. A Clip with an upper bound (ReLU6) is
not homogeneous (min(x / s, 6) != min(x, 6) / s): such pairs are skipped, not rewritten (AIMET
swaps ReLU6 for ReLU, which changes the float model; we do not). PRelu needs no change of its
slopes: prelu(x / s) = prelu(x) / s for any slope.

High-bias absorption: where A -> Relu -> B and A's output was a batch norm's (output ~ N(beta,
gamma^2) per channel, scaled along by CLE), c = max(0, beta - 3 |gamma|) is taken out of A's bias
and added to B's (B's bias += W_B c, summed over the kernel): relu(x) = relu(x - c) + c wherever
x >= c, which holds for all but the 3-sigma tail. B must have no padding (a padded border would
add c where the float model adds 0).

Every step is an IEEE operation on whole arrays in a fixed order (abs, max, sqrt, divide,
multiply): the output bytes are the same on every machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir import Model, Node
from .fold import fold_for_quantization

HOMOGENEOUS = ("Relu", "PRelu", "LeakyRelu", "MaxPool")
MAX_ROUNDS = 20
TOLERANCE = 1e-3  # |log s| below which a round changes nothing worth another
SIGMAS = 3.0


@dataclass(frozen=True)
class Pair:
    """Two layers CLE scales against each other, and the ops between them."""

    first: Node
    second: Node
    between: tuple[str, ...]  # the ops of the nodes between them, in order


@dataclass(frozen=True)
class Equalized:
    model: Model
    pairs: tuple[Pair, ...]
    rounds: int
    absorbed: int  # pairs whose high bias was absorbed


def equalize_model(model: Model, absorb: bool = True) -> Equalized:
    """The model with batch norms folded, its layer pairs equalized and (with `absorb`) their
    high biases absorbed."""
    shifts = _batch_norm_shifts(model)
    folded = fold_for_quantization(model)
    weights = dict(folded.weights)
    pairs = find_pairs(folded)
    rounds, moved = 0, math.inf
    while pairs and rounds < MAX_ROUNDS and moved >= TOLERANCE:
        moved = max(_equalize(p, weights, shifts) for p in pairs)
        rounds += 1
    absorbed = sum(_absorb(p, weights, shifts) for p in pairs) if absorb else 0
    return Equalized(Model(folded.graph, weights), tuple(pairs), rounds, absorbed)


def find_pairs(model: Model) -> list[Pair]:
    """The A -> (homogeneous ops) -> B pairs of a folded model, in graph order."""
    graph = model.graph
    consumers = graph.consumers()
    outputs = {t.name for t in graph.outputs}
    uses = {name: len(readers) for name, readers in consumers.items()}
    pairs = []
    for node in graph.nodes:
        if not _scalable(node, model, uses):
            continue
        between: list[str] = []
        tensor = node.outputs[0]
        while tensor not in outputs and len(consumers.get(tensor, [])) == 1:
            reader = consumers[tensor][0]
            if reader.inputs[0] != tensor:
                break
            if _scalable(reader, model, uses) and _channels_in(reader, model) == \
                    _channels_out(node, model):
                pairs.append(Pair(node, reader, tuple(between)))
                break
            if not _homogeneous(reader, model):
                break
            between.append(reader.op)
            tensor = reader.outputs[0]
    return pairs


def _scalable(node: Node, model: Model, uses: dict[str, int]) -> bool:
    """A Conv, or a Gemm reading A as is, whose weight (and bias) are its own constants."""
    if node.op not in ("Conv", "Gemm") or len(node.inputs) < 2 or len(node.outputs) != 1:
        return False
    if node.op == "Gemm" and node.attr("transA", 0):
        return False
    own = [name for name in node.inputs[1:] if name]
    return all(name in model.weights and uses.get(name, 0) == 1 for name in own) and \
        model.weights[node.inputs[1]].dtype == np.float32


def _homogeneous(node: Node, model: Model) -> bool:
    if node.op in HOMOGENEOUS:
        return node.op != "PRelu" or (len(node.inputs) > 1 and node.inputs[1] in model.weights)
    if node.op == "Clip":  # only as a ReLU: a lower bound of 0 and no upper bound
        low = model.weights.get(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] \
            else None
        no_high = len(node.inputs) < 3 or not node.inputs[2]
        return no_high and (low is None or float(np.max(low)) == 0.0) and \
            node.attr("max") is None
    return False


def _out_axis(node: Node) -> int:
    return 0 if node.op == "Conv" or node.attr("transB", 0) else 1


def _channels_out(node: Node, model: Model) -> int:
    return model.weights[node.inputs[1]].shape[_out_axis(node)]


def _channels_in(node: Node, model: Model) -> int:
    w = model.weights[node.inputs[1]]
    if node.op == "Conv":
        return w.shape[1] * int(node.attr("group", 1))
    return w.shape[1 - _out_axis(node)]


def _in_view(node: Node, w: np.ndarray) -> np.ndarray:
    """B's weight as [groups, out per group, in per group, rest]: input channel i is
    [i // in_g, :, i % in_g]."""
    if node.op == "Gemm":
        rows = w if node.attr("transB", 0) else w.T  # [N, K]
        return rows.reshape(1, rows.shape[0], rows.shape[1], 1)
    groups = int(node.attr("group", 1))
    return w.reshape(groups, w.shape[0] // groups, w.shape[1], -1)


def _equalize(pair: Pair, weights: dict[str, np.ndarray],
              shifts: dict[str, tuple[np.ndarray, np.ndarray]]) -> float:
    """Scale one pair in place in `weights`; the largest |log s| applied."""
    a, b = pair.first, pair.second
    w1 = weights[a.inputs[1]]
    w2 = weights[b.inputs[1]]
    r1 = np.moveaxis(np.abs(w1), _out_axis(a), 0).reshape(w1.shape[_out_axis(a)], -1).max(1)
    view = _in_view(b, np.abs(w2))
    r2 = view.max(axis=(1, 3)).reshape(-1)
    r1, r2 = r1.astype(np.float64), r2.astype(np.float64)
    ok = (r1 > 0) & (r2 > 0) & np.isfinite(r1) & np.isfinite(r2)
    s = np.ones_like(r1)
    s[ok] = np.sqrt(r1[ok] / r2[ok])
    shape = [1] * w1.ndim
    shape[_out_axis(a)] = -1
    weights[a.inputs[1]] = (w1 / s.reshape(shape)).astype(np.float32)
    if len(a.inputs) > 2 and a.inputs[2]:
        weights[a.inputs[2]] = (weights[a.inputs[2]] / s).astype(np.float32)
    scaled = _in_view(b, w2.astype(np.float64)) * s.reshape(view.shape[0], 1, view.shape[2], 1)
    weights[b.inputs[1]] = _from_in_view(b, scaled, w2.shape).astype(np.float32)
    if a.outputs[0] in shifts:
        beta, gamma = shifts[a.outputs[0]]
        shifts[a.outputs[0]] = (beta / s, gamma / s)
    return float(np.max(np.abs(np.log(s)))) if s.size else 0.0


def _from_in_view(node: Node, view: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if node.op == "Gemm":
        rows = view.reshape(view.shape[1], view.shape[2])
        return rows if node.attr("transB", 0) else rows.T
    return view.reshape(shape)


def _absorb(pair: Pair, weights: dict[str, np.ndarray],
            shifts: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
    a, b = pair.first, pair.second
    if pair.between != ("Relu",) or a.outputs[0] not in shifts or len(a.inputs) < 3 \
            or not a.inputs[2] or len(b.inputs) < 3 or not b.inputs[2]:
        return False
    if b.op == "Conv" and any(int(p) for p in b.attr("pads", ()) or ()) or \
            b.op == "Conv" and b.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return False
    beta, gamma = shifts[a.outputs[0]]
    c = np.maximum(0.0, beta - SIGMAS * np.abs(gamma))
    if not np.any(c > 0):
        return False
    weights[a.inputs[2]] = (weights[a.inputs[2]] - c).astype(np.float32)
    view = _in_view(b, weights[b.inputs[1]].astype(np.float64))
    groups, per_group = view.shape[0], view.shape[2]
    # B's bias for output channel o gains sum over its input channels and kernel of W c
    gain = (view * c.reshape(groups, 1, per_group, 1)).sum(axis=3).sum(axis=2).reshape(-1)
    weights[b.inputs[2]] = (weights[b.inputs[2]] + gain).astype(np.float32)
    return True


def _batch_norm_shifts(model: Model) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """BatchNormalization output -> (beta, gamma) as float64, for batch norms whose parameters
    are constants: its output's mean and deviation per channel."""
    shifts = {}
    for node in model.graph.nodes:
        if node.op == "BatchNormalization" and all(n in model.weights for n in node.inputs[1:3]):
            gamma = model.weights[node.inputs[1]].astype(np.float64).reshape(-1)
            beta = model.weights[node.inputs[2]].astype(np.float64).reshape(-1)
            shifts[node.outputs[0]] = (beta, gamma)
    return shifts

