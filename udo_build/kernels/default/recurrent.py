"""Recurrent ops: RNN, GRU and LSTM, every direction, activation, clip, sequence length,
initial state and layout that ONNX defines.

The three share one driver: the input in [seq, batch, input] (layout 0) or [batch, seq, input]
(layout 1); per direction, the weights' gates in ONNX order (RNN: one; GRU: z, r, h; LSTM: i, o,
f, c); a step function from (x W^T + b, state) to the new state. Past a batch entry's
sequence length its state is held and its Y rows are zero; the reverse direction runs over
each entry's own valid steps, last to first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ._package import DEFAULT

Act = Callable[[np.ndarray], np.ndarray]
Step = Callable[[np.ndarray, tuple[np.ndarray, ...], int], tuple[np.ndarray, ...]]

# name: (uses alpha, uses beta, default alpha, default beta, function)
_ACTIVATIONS: dict[str, tuple[bool, bool, float, float, Callable[..., np.ndarray]]] = {
    "relu": (False, False, 0.0, 0.0, lambda x, a, b: np.maximum(x, 0)),
    "tanh": (False, False, 0.0, 0.0, lambda x, a, b: np.tanh(x)),
    "sigmoid": (False, False, 0.0, 0.0, lambda x, a, b: 1 / (1 + np.exp(-x))),
    "affine": (True, True, 1.0, 0.0, lambda x, a, b: a * x + b),
    "leakyrelu": (True, False, 0.01, 0.0, lambda x, a, b: np.where(x >= 0, x, a * x)),
    "thresholdedrelu": (True, False, 1.0, 0.0, lambda x, a, b: np.where(x > a, x, 0)),
    "scaledtanh": (True, True, 1.0, 1.0, lambda x, a, b: a * np.tanh(b * x)),
    "hardsigmoid": (True, True, 0.2, 0.5, lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "elu": (True, False, 1.0, 0.0, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1))),
    "softsign": (False, False, 0.0, 0.0, lambda x, a, b: x / (1 + np.abs(x))),
    "softplus": (False, False, 0.0, 0.0, lambda x, a, b: np.logaddexp(x, 0)),
}


def _activations(names: Sequence[str] | None, defaults: Sequence[str], directions: int,
                 alphas: Sequence[float] | None, betas: Sequence[float] | None
                 ) -> list[list[Act]]:
    """The activation functions of each direction; alphas and betas are consumed in order by
    the functions that take them (the ONNX operator's default otherwise)."""
    names = list(names) if names else list(defaults) * directions
    if len(defaults) == 1 and directions == 1 and len(names) == 2:  # RNN: Tanh, Tanh
        names = names[:len(defaults)]
    if len(names) != len(defaults) * directions:
        raise ValueError(f"activations {names}: expected {len(defaults)} per direction "
                         f"({directions} direction(s))")
    alpha_left, beta_left = list(alphas or ()), list(betas or ())
    functions: list[Act] = []
    for name in names:
        spec = _ACTIVATIONS.get(name.lower())
        if spec is None:
            raise ValueError(f"activation {name!r} is not one of " + ", ".join(_ACTIVATIONS))
        takes_alpha, takes_beta, alpha, beta, fn = spec
        alpha = alpha_left.pop(0) if takes_alpha and alpha_left else alpha
        beta = beta_left.pop(0) if takes_beta and beta_left else beta
        functions.append(lambda x, fn=fn, a=alpha, b=beta: fn(x, a, b).astype(x.dtype))
    per = len(defaults)
    return [functions[d * per:(d + 1) * per] for d in range(directions)]


@dataclass(frozen=True)
class _Layer:
    """One recurrent op's inputs, normalized to layout 0 and per-direction weights."""

    x: np.ndarray  # [seq, batch, input]
    lengths: np.ndarray  # [batch]
    states: tuple[np.ndarray, ...]  # each [directions, batch, hidden]
    directions: int
    layout: int


def _layer(x: np.ndarray, w: np.ndarray, sequence_lens: np.ndarray | None,
           states: Sequence[np.ndarray | None], direction: str, layout: int) -> _Layer:
    directions = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(direction)
    if directions is None:
        raise ValueError(f"direction {direction!r} is not one of forward, reverse, "
                         "bidirectional")
    if w.shape[0] != directions:
        raise ValueError(f"W has {w.shape[0]} direction(s), direction {direction!r} needs "
                         f"{directions}")
    if layout:
        x = x.transpose(1, 0, 2)
    seq, batch = x.shape[:2]
    lengths = np.full(batch, seq, dtype=np.int64) if sequence_lens is None \
        else np.asarray(sequence_lens).astype(np.int64).reshape(batch)
    normalized = tuple(s if s is None or not layout else s.transpose(1, 0, 2) for s in states)
    return _Layer(x, lengths, normalized, directions, layout)  # type: ignore[arg-type]


def _reverse_valid(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """x [seq, batch, ...] with each batch entry's first lengths[b] steps reversed."""
    out = x.copy()
    for b, n in enumerate(lengths.tolist()):
        out[:n, b] = x[:n, b][::-1]
    return out


def _run(x: np.ndarray, lengths: np.ndarray, states: tuple[np.ndarray, ...], step: Step,
         reverse: bool) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """One direction: Y [seq, batch, hidden] and the final states."""
    if reverse:
        x = _reverse_valid(x, lengths)
    ys = np.zeros((x.shape[0],) + states[0].shape, dtype=x.dtype)
    for t in range(x.shape[0]):
        live = (t < lengths)[:, None]
        new = step(x[t], states, t)
        states = tuple(np.where(live, n, s) for n, s in zip(new, states, strict=True))
        ys[t] = np.where(live, new[0], 0)
    return (_reverse_valid(ys, lengths) if reverse else ys), states


def _recur(layer: _Layer, hidden: int, direction: str, count: int,
           make_step: Callable[[int], Step]) -> tuple[np.ndarray, ...]:
    """Y and the final states (Y_h[, Y_c]) in the op's layout, over every direction."""
    batch = layer.x.shape[1]
    ys, finals = [], []
    for d in range(layer.directions):
        states = tuple(np.zeros((batch, hidden), layer.x.dtype) if s is None
                       else s[d].astype(layer.x.dtype) for s in layer.states[:count])
        states += tuple(np.zeros((batch, hidden), layer.x.dtype)
                        for _ in range(count - len(states)))
        reverse = direction == "reverse" or d == 1
        y, final = _run(layer.x, layer.lengths, states, make_step(d), reverse)
        ys.append(y)
        finals.append(final)
    y = np.stack(ys, axis=1)  # [seq, directions, batch, hidden]
    outs = tuple(np.stack([f[i] for f in finals]) for i in range(count))
    if layer.layout:
        return (y.transpose(2, 0, 1, 3),) + tuple(o.transpose(1, 0, 2) for o in outs)
    return (y,) + outs


def _clipper(clip: float | None) -> Act:
    if clip is None:
        return lambda v: v
    return lambda v: np.clip(v, -clip, clip)


def _biases(b: np.ndarray | None, d: int, width: int,
            dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """W's and R's biases of direction d ([width] each); zeros when there is no B."""
    if b is None:
        zeros = np.zeros(width, dtype=dtype)
        return zeros, zeros
    return b[d, :width], b[d, width:2 * width]


def _hidden(w: np.ndarray, gates: int, hidden_size: int | None) -> int:
    hidden = w.shape[1] // gates
    if hidden_size is not None and hidden_size != hidden:
        raise ValueError(f"hidden_size {hidden_size} does not match W ({w.shape[1]} rows for "
                         f"{gates} gate(s))")
    return hidden


@DEFAULT.op("RNN")
def rnn(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
        sequence_lens: np.ndarray | None = None, initial_h: np.ndarray | None = None, *,
        activation_alpha: Sequence[float] | None = None,
        activation_beta: Sequence[float] | None = None,
        activations: Sequence[str] = ("Tanh", "Tanh"), clip: float | None = None,
        direction: str = "forward", hidden_size: int | None = None,
        layout: int = 0) -> tuple[np.ndarray, ...]:
    """H = f(x W^T + H R^T + Wb + Rb)."""
    layer = _layer(x, w, sequence_lens, (initial_h,), direction, layout)
    hidden = _hidden(w, 1, hidden_size)
    acts = _activations(activations, ("Tanh",), layer.directions, activation_alpha,
                        activation_beta)
    cut = _clipper(clip)

    def make_step(d: int) -> Step:
        bias = sum(_biases(b, d, hidden, x.dtype))
        wt, rt, (f,) = w[d].T, r[d].T, acts[d]
        return lambda xt, s, t: (f(cut(xt @ wt + s[0] @ rt + bias)),)

    return _recur(layer, hidden, direction, 1, make_step)


@DEFAULT.op("GRU")
def gru(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
        sequence_lens: np.ndarray | None = None, initial_h: np.ndarray | None = None, *,
        activation_alpha: Sequence[float] | None = None,
        activation_beta: Sequence[float] | None = None,
        activations: Sequence[str] | None = None, clip: float | None = None,
        direction: str = "forward", hidden_size: int | None = None, layout: int = 0,
        linear_before_reset: int = 0) -> tuple[np.ndarray, ...]:
    """Gates z, r, h: H = (1 - z) h + z H, h = g(x Wh^T + (r H) Rh^T + Rbh + Wbh), or with
    linear_before_reset h = g(x Wh^T + r (H Rh^T + Rbh) + Wbh)."""
    layer = _layer(x, w, sequence_lens, (initial_h,), direction, layout)
    n = _hidden(w, 3, hidden_size)
    acts = _activations(activations, ("Sigmoid", "Tanh"), layer.directions, activation_alpha,
                        activation_beta)
    cut = _clipper(clip)

    def make_step(d: int) -> Step:
        wb, rb = _biases(b, d, 3 * n, x.dtype)
        wt, rt, (f, g) = w[d].T, r[d].T, acts[d]

        def step(xt: np.ndarray, s: tuple[np.ndarray, ...], t: int) -> tuple[np.ndarray]:
            h = s[0]
            xw = xt @ wt + wb
            hr = h @ rt[:, :2 * n] + rb[:2 * n]
            z = f(cut(xw[:, :n] + hr[:, :n]))
            reset = f(cut(xw[:, n:2 * n] + hr[:, n:]))
            if linear_before_reset:
                cand = xw[:, 2 * n:] + reset * (h @ rt[:, 2 * n:] + rb[2 * n:])
            else:
                cand = xw[:, 2 * n:] + (reset * h) @ rt[:, 2 * n:] + rb[2 * n:]
            return ((1 - z) * g(cut(cand)) + z * h,)

        return step

    return _recur(layer, n, direction, 1, make_step)


@DEFAULT.op("LSTM")
def lstm(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray | None = None,
         sequence_lens: np.ndarray | None = None, initial_h: np.ndarray | None = None,
         initial_c: np.ndarray | None = None, p: np.ndarray | None = None, *,
         activation_alpha: Sequence[float] | None = None,
         activation_beta: Sequence[float] | None = None,
         activations: Sequence[str] | None = None, clip: float | None = None,
         direction: str = "forward", hidden_size: int | None = None, input_forget: int = 0,
         layout: int = 0) -> tuple[np.ndarray, ...]:
    """Gates i, o, f, c with peepholes P (i, o, f): C = f C + i g(c), H = o h(C); with
    input_forget, f = 1 - i."""
    layer = _layer(x, w, sequence_lens, (initial_h, initial_c), direction, layout)
    n = _hidden(w, 4, hidden_size)
    acts = _activations(activations, ("Sigmoid", "Tanh", "Tanh"), layer.directions,
                        activation_alpha, activation_beta)
    cut = _clipper(clip)

    def make_step(d: int) -> Step:
        bias = sum(_biases(b, d, 4 * n, x.dtype))
        peep = np.zeros(3 * n, x.dtype) if p is None else p[d]
        wt, rt, (f, g, h) = w[d].T, r[d].T, acts[d]

        def step(xt: np.ndarray, s: tuple[np.ndarray, ...], t: int) -> tuple[np.ndarray, ...]:
            gates = xt @ wt + s[0] @ rt + bias
            i = f(cut(gates[:, :n] + peep[:n] * s[1]))
            forget = 1 - i if input_forget else \
                f(cut(gates[:, 2 * n:3 * n] + peep[2 * n:] * s[1]))
            c = forget * s[1] + i * g(cut(gates[:, 3 * n:]))
            o = f(cut(gates[:, n:2 * n] + peep[n:2 * n] * c))
            return o * h(c), c

        return step

    return _recur(layer, n, direction, 2, make_step)
