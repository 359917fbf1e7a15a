"""The float plan's residual Adds written over their addend (udo_build.runtime.addend): a
convolution whose addend dies with it writes its output into the addend's memory. Where it
applies (ResNet's blocks: the block's input read by a convolution first), where it must not
(a reader that may keep a view, a requested tensor, the addend as the convolution's own input,
a rows kernel with several k blocks, which keeps partial sums in its output), and that the
numbers are those of the plain plan, run after run, with the compiled kernel and without it."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.kernels import compiled
from udo_build.kernels.default.conv import ConvWeights
from udo_build.runtime.addend import onto_addend
from udo_build.runtime.float_session import Session

from .plans import every_tensor, plain

SHAPE = (2, 8, 12, 12)


def _blocks(*, side: bool = False, own_input: bool = False) -> Model:
    """x -> 1x1 -> t; a block: t -> 1x1 + Relu -> 3x3 + Relu -> 1x1, + t, Relu -> u (one
    FusedConv over its addend t); then u -> 1x1 + Relu -> 1x1, + u -> y (an Add the loader
    leaves apart: u's maker is a fusion of its own). `side`: an Identity reads t too (output
    "side"); `own_input`: the block's last convolution reads t itself, its own addend."""
    rng = np.random.default_rng(8)
    n, c, h, w = SHAPE
    weights = {"w0": rng.standard_normal((16, c, 1, 1)).astype(np.float32) * 0.3,
               "wa": rng.standard_normal((8, 16, 1, 1)).astype(np.float32) * 0.3,
               "wb": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.3,
               "wc": rng.standard_normal((16, 16 if own_input else 8, 1, 1)).astype(
                   np.float32) * 0.3,
               "bc": rng.standard_normal(16).astype(np.float32),
               "wd": rng.standard_normal((8, 16, 1, 1)).astype(np.float32) * 0.3,
               "we": rng.standard_normal((16, 8, 1, 1)).astype(np.float32) * 0.3}
    nodes = [Node.make("c0", "Conv", ["x", "w0"], ["t"]),
             Node.make("ca", "Conv", ["t", "wa"], ["a"]),
             Node.make("ra", "Relu", ["a"], ["ar"]),
             Node.make("cb", "Conv", ["ar", "wb"], ["b"], {"pads": [1, 1, 1, 1]}),
             Node.make("rb", "Relu", ["b"], ["br"]),
             Node.make("cc", "Conv", ["t" if own_input else "br", "wc"], ["c"]),
             Node.make("add1", "Add", ["c", "t"], ["s"]),
             Node.make("r1", "Relu", ["s"], ["u"]),
             Node.make("cd", "Conv", ["u", "wd"], ["d"]),
             Node.make("rd", "Relu", ["d"], ["dr"]),
             Node.make("ce", "Conv", ["dr", "we"], ["e"]),
             Node.make("add2", "Add", ["e", "u"], ["y"])]
    outputs = [TensorInfo("y", "float32", (n, 16, h, w))]
    if side:  # read before the block's last convolution
        nodes.insert(1, Node.make("side", "Identity", ["t"], ["side"]))
        outputs.append(TensorInfo("side", "float32", (n, 16, h, w)))
    wide = (n, 16, h, w)
    values = tuple(TensorInfo(name, "float32", (n, 8, h, w) if name in ("a", "ar", "b", "br",
                                                                         "d", "dr") else wide)
                   for name in ("t", "a", "ar", "b", "br", "c", "s", "u", "d", "dr", "e"))
    graph = Graph("blocks", (TensorInfo("x", "float32", SHAPE),), tuple(outputs),
                  tuple(nodes), values)
    return Model(graph, weights)


def _onto(session: Session, outputs: tuple[str, ...]) -> int:
    return sum(step.fn is onto_addend for step in session.plan(outputs).steps)


def _reference(model: Model, x: np.ndarray, outputs: list[str]) -> dict[str, np.ndarray]:
    """The same tensors from a plan without the rewrite (`plans.plain`)."""
    session, names = every_tensor(model)
    assert _onto(session, names) == 0
    return plain(session, names, x, outputs)


def test_the_block_writes_over_its_input(kernel_path: str) -> None:
    model = _blocks()
    session = Session(model)
    assert _onto(session, ("y",)) == 1
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    expected = _reference(model, x, ["y"])["y"]
    for _ in range(3):  # later runs: lent buffers
        np.testing.assert_array_equal(session.run({"x": x})["y"], expected)


def test_what_someone_else_sees_is_left_alone(kernel_path: str) -> None:
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    cases = ((_blocks(side=True), ("y", "side"), 0),  # an Identity reads t (a view of it)
             (_blocks(), ("y", "t"), 0),  # t requested
             (_blocks(), ("y", "u"), 1),  # the result requested: it is an array of its own
             (_blocks(own_input=True), ("y",), 0))  # the convolution reads t itself
    for model, outputs, onto in cases:
        session = Session(model)
        assert _onto(session, outputs) == onto, outputs
        expected = _reference(model, x, list(outputs))
        for _ in range(2):
            got = session.run({"x": x}, list(outputs))
            for name in outputs:
                np.testing.assert_array_equal(got[name], expected[name])


def test_a_kernel_that_keeps_partial_sums_in_its_output_gets_its_own() -> None:
    """The rows orientation with several k blocks keeps partial sums in y: y over z would
    lose z. The kernel says so (udo_conv_onto_addend), and such a block's plan, though it
    qualifies, gives the plain plan's numbers."""
    lib = compiled.library()
    if lib is None:
        pytest.skip("no C compiler (or it failed): the compiled convolution cannot run here")

    def onto(x: tuple[int, ...], w: tuple[int, ...]) -> tuple[int, int]:
        call = ConvWeights(np.zeros(w, np.float32)).call(
            np.zeros(x, np.float32), None, None, 1, None, "NOTSET", None, None, None)
        return int(lib.conv_cols(call.address)), int(lib.conv_onto_addend(call.address))

    assert onto((1, 300, 20, 20), (16, 300, 1, 1)) == (0, 0)  # rows, three k blocks
    assert onto((1, 64, 20, 20), (16, 64, 1, 1)) == (0, 1)  # rows, one k block
    assert onto((1, 300, 7, 7), (128, 300, 1, 1)) == (1, 1)  # cols: tiles in a scratch
    rng = np.random.default_rng(3)
    k = 300
    weights = {"w0": rng.standard_normal((16, 8, 1, 1)).astype(np.float32),
               "wa": rng.standard_normal((k, 16, 1, 1)).astype(np.float32) * 0.3,
               "wc": rng.standard_normal((16, k, 1, 1)).astype(np.float32) * 0.1}
    shape = (1, 8, 20, 20)
    nodes = (Node.make("c0", "Conv", ["x", "w0"], ["t"]),
             Node.make("ca", "Conv", ["t", "wa"], ["a"]),
             Node.make("ra", "Relu", ["a"], ["ar"]),
             Node.make("cc", "Conv", ["ar", "wc"], ["c"]),
             Node.make("add", "Add", ["c", "t"], ["y"]))
    values = (TensorInfo("t", "float32", (1, 16, 20, 20)), TensorInfo("a", "float32",
                                                                      (1, k, 20, 20)),
              TensorInfo("ar", "float32", (1, k, 20, 20)),
              TensorInfo("c", "float32", (1, 16, 20, 20)))
    model = Model(Graph("deep", (TensorInfo("x", "float32", shape),),
                        (TensorInfo("y", "float32", (1, 16, 20, 20)),), nodes, values), weights)
    session = Session(model)
    assert _onto(session, ("y",)) == 1
    x = rng.standard_normal(shape).astype(np.float32)
    expected = _reference(model, x, ["y"])["y"]
    for _ in range(2):
        np.testing.assert_array_equal(session.run({"x": x})["y"], expected)
