"""The float runtime: output selection, feed checks, freeing intermediates, UDO kernels and
their failures, and load-time errors."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

from udo_build.errors import StepFailed, UserError
from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.kernels.oppkg import OpPackage, OpPackageError
from udo_build.runtime.float_session import KernelError, Session


def f32(name: str, *shape: int | str) -> TensorInfo:
    return TensorInfo(name, "float32", tuple(shape))


def chain(*ops: tuple[str, str], inputs: tuple[TensorInfo, ...] = (f32("x", 2, 3),),
          weights: dict[str, np.ndarray] | None = None) -> Model:
    """x -> op1 -> t1 -> op2 -> t2 ... (op given as (package, op)); the last tensor is `y`."""
    nodes, previous = [], inputs[0].name
    for i, (package, op) in enumerate(ops, 1):
        out = "y" if i == len(ops) else f"t{i}"
        nodes.append(Node.make(f"n{i}", op, [previous], [out], package=package))
        previous = out
    values = tuple(f32(f"t{i}", 2, 3) for i in range(1, len(ops)))
    return Model(Graph("g", inputs, (f32("y", 2, 3),), tuple(nodes), values), weights or {})


X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


# -- outputs ------------------------------------------------------------------------------------


def test_default_outputs_are_the_graph_outputs() -> None:
    session = Session(chain(("default", "Neg"), ("default", "Relu")))
    result = session.run({"x": X})
    assert list(result) == ["y"]
    np.testing.assert_array_equal(result["y"], np.maximum(-X, 0))


def test_any_tensor_can_be_requested_in_the_order_asked() -> None:
    session = Session(chain(("default", "Neg"), ("default", "Relu"), ("default", "Exp")))
    result = session.run({"x": X}, ["t2", "x", "t1"])
    assert list(result) == ["t2", "x", "t1"]
    np.testing.assert_array_equal(result["t1"], -X)
    np.testing.assert_array_equal(result["t2"], np.maximum(-X, 0))
    assert result["x"] is X or np.array_equal(result["x"], X)


def test_only_what_the_outputs_need_runs() -> None:
    calls = []
    package = OpPackage("Spy")

    @package.op("Record")
    def record(x: np.ndarray) -> np.ndarray:
        calls.append(1)
        return x + 1

    session = Session(chain(("default", "Neg"), ("Spy", "Record")), {"Spy": package})
    session.run({"x": X}, ["t1"])
    assert calls == []
    session.run({"x": X})
    assert calls == [1]


def test_unknown_output_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no tensor 'nope'"):
        Session(chain(("default", "Neg"))).run({"x": X}, ["nope"])


# -- feeds --------------------------------------------------------------------------------------


@pytest.mark.parametrize("feeds, message", [
    ({"x": X, "z": X}, r"unknown input 'z'; the model's inputs are: 'x' \(float32\[2x3\]\)"),
    ({}, r"missing input 'x' \(float32\[2x3\]\)"),
    ({"x": X.astype(np.float64)}, "input 'x': expected float32, given float64"),
    ({"x": X.reshape(3, 2)}, r"input 'x': expected shape \[2, 3\], given \[3, 2\]"),
    ({"x": X[None]}, r"input 'x': expected shape \[2, 3\], given \[1, 2, 3\]"),
])
def test_bad_feeds_name_the_input_and_what_differs(feeds: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        Session(chain(("default", "Neg"))).run(feeds)


def test_symbolic_dimensions_accept_any_size() -> None:
    model = chain(("default", "Neg"), inputs=(f32("x", "batch", 3),))
    out = Session(model).run({"x": np.ones((5, 3), np.float32)})["y"]
    assert out.shape == (5, 3)


def test_an_input_nothing_reads_need_not_be_fed() -> None:
    model = chain(("default", "Neg"), inputs=(f32("x", 2, 3), f32("unused", 1)))
    assert Session(model).run({"x": X})["y"].shape == (2, 3)


# -- freeing ------------------------------------------------------------------------------------


def test_intermediates_are_freed_after_their_last_use() -> None:
    """Every Make returns a fresh array and remembers it weakly; each call notes which earlier
    arrays are still alive. t1's last reader is n2 and n3 reads only t2, so while n3 runs, t1
    must be gone; n4 reads t1 again in the second graph, so there t1 lives until n4."""
    made: dict[str, weakref.ref] = {}
    alive: list[list[str]] = []
    package = OpPackage("Probe")

    @package.op("Make")
    def make(x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        alive.append(sorted(name for name, ref in made.items() if ref() is not None))
        out = x + 1
        made[f"t{len(made) + 1}"] = weakref.ref(out)
        return out

    def nodes(*edges: tuple[str, ...]) -> tuple[Node, ...]:
        return tuple(Node.make(f"n{i}", "Make", ins, [out], package="Probe")
                     for i, (*ins, out) in enumerate(edges, 1))

    def run(*edges: tuple[str, ...], outputs: list[str] | None = None) -> list[list[str]]:
        made.clear()
        alive.clear()
        values = tuple(f32(e[-1], 2, 3) for e in edges[:-1])
        graph = Graph("g", (f32("x", 2, 3),), (f32(edges[-1][-1], 2, 3),), nodes(*edges),
                      values)
        Session(Model(graph), {"Probe": package}).run({"x": X}, outputs)
        return alive

    assert run(("x", "a"), ("a", "b"), ("b", "c"), ("c", "y")) == [[], ["t1"], ["t2"], ["t3"]]
    assert run(("x", "a"), ("a", "b"), ("b", "c"), ("c", "a", "y")) == [
        [], ["t1"], ["t1", "t2"], ["t1", "t3"]]
    # a requested intermediate stays alive to the end
    assert run(("x", "a"), ("a", "b"), ("b", "c"), ("c", "y"), outputs=["y", "a"]) == [
        [], ["t1"], ["t1", "t2"], ["t1", "t3"]]


def test_streamed_tensors_come_as_made_and_go_after_their_last_reader() -> None:
    """`stream` hands each requested tensor over as its step makes it, the values `run` gives;
    a caller that drops each before the next holds none of them: each lives until its last
    reader, as an unrequested one does (`run` keeps every requested one to the end)."""
    made: dict[str, weakref.ref] = {}
    alive: list[list[str]] = []
    package = OpPackage("Probe")

    @package.op("Make")
    def make(x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        alive.append(sorted(name for name, ref in made.items() if ref() is not None))
        out = x + 1 if y is None else x + y
        made[f"t{len(made) + 1}"] = weakref.ref(out)
        return out

    edges = [("x", "a"), ("a", "b"), ("b", "c"), ("c", "a", "y")]
    graph = Graph("g", (f32("x", 2, 3),), (f32("y", 2, 3),), tuple(
        Node.make(f"n{i}", "Make", ins, [out], package="Probe")
        for i, (*ins, out) in enumerate(edges, 1)), tuple(f32(n, 2, 3) for n in "abc"))
    session = Session(Model(graph), {"Probe": package})
    ran = session.run({"x": X}, ["y", "c", "x", "a"])
    made.clear()
    alive.clear()
    streamed = []
    for name, value in session.stream({"x": X}, ["y", "c", "x", "a"]):
        assert not value.flags.writeable
        streamed.append((name, value.copy()))
        value = None  # type: ignore[assignment]
    assert [name for name, _ in streamed] == ["x", "a", "c", "y"]  # as made
    assert all(np.array_equal(v, ran[name]) for name, v in streamed)
    assert alive == [[], ["t1"], ["t1", "t2"], ["t1", "t3"]]  # c (t3) is gone once y is made
    assert not any(ref() is not None for ref in made.values())


def test_plans_are_built_once_per_set_of_outputs() -> None:
    session = Session(chain(("default", "Neg"), ("default", "Relu")))
    assert session.plan(("y",)) is session.plan(("y",))
    assert session.plan(("t1", "y")) is not session.plan(("y",))
    assert [s.frees for s in session.plan(("y",)).steps] == [("x",), ("t1",)]
    assert [s.frees for s in session.plan(("t1", "y")).steps] == [("x",), ()]


# -- user kernels -------------------------------------------------------------------------------


def udo_package() -> OpPackage:
    package = OpPackage("UserPkg")

    @package.op("Softplus")
    def softplus(x: np.ndarray, *, beta: float = 1.0) -> np.ndarray:
        return (np.log1p(np.exp(-np.abs(beta * x))) + np.maximum(beta * x, 0)) / beta

    @package.op("Boom")
    def boom(x: np.ndarray) -> np.ndarray:
        raise ValueError("the user's kernel broke")

    @package.op("Wide")
    def wide(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float64)

    @package.op("Pair")
    def pair(x: np.ndarray) -> np.ndarray:
        return x

    @package.op("Scribble")
    def scribble(x: np.ndarray) -> np.ndarray:
        x += 1  # writes into its input
        return x

    return package


def test_kernels_cannot_write_into_weights_or_feeds_and_outputs_are_the_callers() -> None:
    node = Node.make("s", "Scribble", ["w"], ["y"], package="UserPkg")
    weight = np.ones((2, 3), np.float32)
    model = Model(Graph("g", (), (f32("y", 2, 3),), (node,)), {"w": weight})
    with pytest.raises(StepFailed, match="read-only"):
        Session(model, {"UserPkg": udo_package()}).run({})
    assert (weight == 1).all()
    identity = Model(Graph("g", (f32("x", 2, 3),), (f32("y", 2, 3), f32("w", 2, 3)),
                           (Node.make("i", "Identity", ["x"], ["y"]),)), {"w": weight})
    x = X.copy()
    out = Session(identity).run({"x": x}, ["y", "w"])
    out["y"][...] = 7
    out["w"][...] = 7
    assert (x == X).all() and (weight == 1).all()


def test_a_udo_runs_the_users_kernel_with_its_attributes() -> None:
    node = Node.make("sp", "Softplus", ["x"], ["y"], {"beta": 2.0}, package="UserPkg")
    model = Model(Graph("g", (f32("x", 2, 3),), (f32("y", 2, 3),), (node,)))
    y = Session(model, {"UserPkg": udo_package()}).run({"x": X})["y"]
    np.testing.assert_allclose(y, np.log1p(np.exp(2 * X)) / 2, rtol=1e-6)
    assert y.dtype == np.float32


@pytest.mark.parametrize("op, message", [
    ("Boom", "UserPkg::Boom (node n2) raised ValueError: the user's kernel broke"),
    ("Wide", "UserPkg::Wide (node n2) raised TypeError: output 'y' is float64, the model says "
             "float32"),
    ("Scribble", "UserPkg::Scribble (node n2) raised ValueError: output array is read-only"),
])
def test_a_failing_user_kernel_is_the_users_step_failing(op: str, message: str) -> None:
    session = Session(chain(("default", "Neg"), ("UserPkg", op)), {"UserPkg": udo_package()})
    with pytest.raises(StepFailed) as info:
        session.run({"x": X})
    assert info.value.step == "run"
    assert info.value.message == message


def test_a_user_kernel_returning_too_few_outputs_fails_its_step() -> None:
    node = Node.make("p", "Pair", ["x"], ["a", "b"], package="UserPkg")
    model = Model(Graph("g", (f32("x", 2, 3),), (f32("b", 2, 3),), (node,)))
    with pytest.raises(StepFailed, match=r"UserPkg::Pair \(node p\) raised ValueError: "
                                         r"returned 1 output\(s\), the node has 2"):
        Session(model, {"UserPkg": udo_package()}).run({"x": X})


def test_a_failing_default_kernel_is_not_blamed_on_the_user() -> None:
    node = Node.make("r", "Reshape", ["x", "shape"], ["y"])
    model = Model(Graph("g", (f32("x", 2, 3),), (f32("y", 4),), (node,)),
                  {"shape": np.array([4], np.int64)})
    with pytest.raises(KernelError, match=r"default::Reshape \(node r\) raised ValueError"):
        Session(model).run({"x": X})


# -- load errors --------------------------------------------------------------------------------


def test_a_missing_implementation_lists_what_exists() -> None:
    with pytest.raises(OpPackageError, match=r"UserPkg has no implementation of Nope; it has: "
                                             r"Boom, Pair, Scribble, Softplus, Wide"):
        Session(chain(("UserPkg", "Nope")), {"UserPkg": udo_package()})


def test_a_missing_package_lists_the_packages() -> None:
    with pytest.raises(OpPackageError, match=r"no op package 'Other'; it has: UserPkg, default"):
        Session(chain(("Other", "Op")), {"UserPkg": udo_package()})


def test_a_node_reading_an_unknown_tensor_fails_the_load() -> None:
    node = Node.make("n", "Add", ["x", "ghost"], ["y"])
    with pytest.raises(UserError, match="node 'n' \\(Add\\) reads 'ghost'"):
        Session(Model(Graph("g", (f32("x", 2, 3),), (f32("y", 2, 3),), (node,))))


def test_the_default_package_cannot_be_replaced() -> None:
    with pytest.raises(OpPackageError, match="cannot be named 'default'"):
        Session(chain(("default", "Neg")), {"default": OpPackage("default")})


def test_the_model_is_not_changed() -> None:
    from .test_fusion import conv_bn_relu

    model = conv_bn_relu()
    before = (model.graph, {k: v.copy() for k, v in model.weights.items()})
    Session(model).run({"x": np.ones((1, 3, 6, 6), np.float32)})
    assert model.graph == before[0]
    assert model.weights.keys() == before[1].keys()
    assert all(np.array_equal(model.weights[k], v) for k, v in before[1].items())
