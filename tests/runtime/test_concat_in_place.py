"""The float plan's channel Concats made in place (udo_build.runtime.concat): convolutions write
their channels straight into the Concat's output. Where it applies, where it must not (someone
else reads a convolution's output, a tensor is requested, another axis, an input that is no
convolution), and that the numbers are those of the plain plan, run after run, streamed, with
the compiled kernel and without it."""

from __future__ import annotations

import numpy as np

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.kernels.default.shape import concat
from udo_build.runtime.concat import Alloc, conv_into
from udo_build.runtime.float_session import Session

from .plans import every_tensor, plain

SHAPE = (2, 8, 12, 12)


def _fire(*, axis: int = 1, extra_reader: bool = False, plain_input: bool = False) -> Model:
    """A fire module: x -> squeeze 1x1 + Relu -> (expand 1x1 + Relu, expand 3x3 + Relu) ->
    Concat -> 1x1 -> y. `extra_reader`: a Sigmoid reads the 1x1 expand's output too (a second
    output); `plain_input`: the Concat's third input is the squeeze's Relu (no convolution of
    its own)."""
    rng = np.random.default_rng(5)
    n, c, h, w = SHAPE
    e1 = 10 if axis == 0 else 6  # Concat over the batch: equal channels
    weights = {"ws": rng.standard_normal((4, c, 1, 1)).astype(np.float32) * 0.3,
               "w1": rng.standard_normal((e1, 4, 1, 1)).astype(np.float32) * 0.3,
               "w3": rng.standard_normal((10, 4, 3, 3)).astype(np.float32) * 0.3,
               "b3": rng.standard_normal(10).astype(np.float32),
               "wo": rng.standard_normal((3, 16 + 4 * plain_input, 1, 1)).astype(np.float32)}
    nodes = [Node.make("squeeze", "Conv", ["x", "ws"], ["s"]),
             Node.make("squeeze_relu", "Relu", ["s"], ["sr"]),
             Node.make("e1", "Conv", ["sr", "w1"], ["e1"]),
             Node.make("e1_relu", "Relu", ["e1"], ["e1r"]),
             Node.make("e3", "Conv", ["sr", "w3", "b3"], ["e3"], {"pads": [1, 1, 1, 1]}),
             Node.make("e3_relu", "Relu", ["e3"], ["e3r"])]
    parts = ["e1r", "e3r", *(["sr"] if plain_input else [])]
    channels = 16 + 4 * plain_input
    cat_shape = (n, channels, h, w) if axis == 1 else (2 * n, 10, h, w)
    nodes.append(Node.make("cat", "Concat", parts, ["cat"], {"axis": axis}))
    outputs = [TensorInfo("y", "float32", (n, 3, h, w))]
    if axis == 1:
        nodes.append(Node.make("out", "Conv", ["cat", "wo"], ["y"]))
    else:
        nodes.append(Node.make("out", "Relu", ["cat"], ["y"]))
        outputs = [TensorInfo("y", "float32", cat_shape)]
    if extra_reader:
        nodes.append(Node.make("side", "Sigmoid", ["e1r"], ["side"]))
        outputs.append(TensorInfo("side", "float32", (n, e1, h, w)))
    values = (TensorInfo("s", "float32", (n, 4, h, w)), TensorInfo("sr", "float32", (n, 4, h, w)),
              TensorInfo("e1", "float32", (n, e1, h, w)),
              TensorInfo("e1r", "float32", (n, e1, h, w)),
              TensorInfo("e3", "float32", (n, 10, h, w)),
              TensorInfo("e3r", "float32", (n, 10, h, w)),
              TensorInfo("cat", "float32", cat_shape))
    graph = Graph("fire", (TensorInfo("x", "float32", SHAPE),), tuple(outputs), tuple(nodes),
                  values)
    return Model(graph, weights)


def _in_place(session: Session, outputs: tuple[str, ...]) -> tuple[int, int, int]:
    """How many steps of the plan write into a Concat, allocate one, and are a plain Concat."""
    steps = session.plan(outputs).steps
    return (sum(s.fn is conv_into for s in steps), sum(isinstance(s.fn, Alloc) for s in steps),
            sum(s.fn is concat for s in steps))


def _reference(model: Model, x: np.ndarray, outputs: list[str]) -> dict[str, np.ndarray]:
    """The same tensors from a plan without the rewrite (`plans.plain`)."""
    session, names = every_tensor(model)
    assert _in_place(session, names)[0] == 0
    return plain(session, names, x, outputs)


def test_convolutions_write_their_channels_of_the_concat(kernel_path: str) -> None:
    model = _fire()
    session = Session(model)
    assert _in_place(session, ("y",)) == (2, 1, 0)
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    expected = _reference(model, x, ["y"])["y"]
    results = [session.run({"x": x})["y"] for _ in range(3)]  # later runs: lent buffers
    for result in results:
        np.testing.assert_array_equal(result, expected)
    streamed = dict(session.stream({"x": x}, ["y"]))
    np.testing.assert_array_equal(streamed["y"], expected)


def test_what_someone_else_sees_keeps_the_plain_concat(kernel_path: str) -> None:
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    for model, outputs in ((_fire(extra_reader=True), ("y", "side")),
                           (_fire(plain_input=True), ("y",)),
                           (_fire(axis=0), ("y",))):
        session = Session(model)
        assert _in_place(session, outputs) == (0, 0, 1)
        got = session.run({"x": x}, list(outputs))
        expected = _reference(model, x, list(outputs))
        for name in outputs:
            np.testing.assert_array_equal(got[name], expected[name])
    session = Session(_fire())
    for requested in (("y", "cat"), ("y", "e3r"), ("cat",)):  # a requested tensor: as made
        assert _in_place(session, requested) == (0, 0, 1)
        got = dict(session.stream({"x": x}, list(requested)))
        expected = _reference(_fire(), x, list(requested))
        for name in requested:
            np.testing.assert_array_equal(got[name], expected[name])


def test_the_concat_gives_what_np_concatenate_gives(kernel_path: str) -> None:
    """The in-place result against the pieces run apart and joined by numpy."""
    model = _fire()
    session = Session(model)
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    pieces = session.run({"x": x}, ["e1r", "e3r"])
    joined = np.concatenate([pieces["e1r"], pieces["e3r"]], axis=1)
    wo = model.weights["wo"]
    expected = np.einsum("oc,nchw->nohw", wo[:, :, 0, 0].astype(np.float64), joined)
    got = session.run({"x": x})["y"]
    assert float(np.abs(got - expected).max()) <= 1e-5 * float(np.abs(expected).max())
