"""Shapes that graphs compute, zero-size and 0-d tensors, and ranks other than 4, through the
compiler: shape inference knows what the float runtime will compute (shape subgraphs feeding
Reshape and Expand, empty inputs), a shape that depends on a run-time value is refused, and the
prepared graph's numbers are the float runtime's."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.compiler import Runner
from udo_build.compiler.shapes import infer
from udo_build.errors import UserError
from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.runtime.float_session import Session

from .helpers import G, check_float, prepare, w


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def shape_subgraph() -> Model:
    """x (n, c, h, w) -> Reshape to (n, c, h * w) with the shape computed from x's own shape,
    then Expand of a constant to (2, n, c, h * w) computed the same way (rank 4 and 5)."""
    g = G()
    s = g.op("Shape", "x", out="s")
    n_c = g.op("Gather", s, g.const("i01", _i64(0, 1)), out="n_c", axis=0)
    hw = g.op("ReduceProd", g.op("Gather", s, g.const("i23", _i64(2, 3)), out="h_w", axis=0),
              g.const("ax0", _i64(0)), out="hw", keepdims=1)
    flat = g.op("Reshape", "x", g.op("Concat", n_c, hw, out="to3", axis=0), out="flat")
    five = g.op("Concat", g.const("two", _i64(2)), n_c, hw, out="to5", axis=0)
    g.op("Expand", g.const("one", np.ones((1, 1, 1), np.float32)), five, out="e")
    g.op("Add", "e", flat, out="y")
    return g.model({"x": (1, 3, 4, 5)}, ["y"])


@pytest.mark.parametrize("dims", [None, {"x": [2, 3, 6, 2]}])
def test_a_computed_shape_is_the_one_the_runtime_computes(dims: dict | None) -> None:
    model = shape_subgraph()
    compiled = prepare(model, dims=dims)
    n, c, h, wd = dims["x"] if dims else (1, 3, 4, 5)
    assert compiled.io.outputs["y"] == (2, n, c, h * wd)  # (was (0, 0, ...) from zeros)
    got = check_float(model, compiled)
    x = np.random.default_rng(0).standard_normal((n, c, h, wd)).astype(np.float32)
    want = np.broadcast_to(1 + x.reshape(n, c, h * wd), (2, n, c, h * wd))
    np.testing.assert_allclose(got["y"], want, rtol=1e-6)


def test_shape_inference_follows_the_values_of_shape_subgraphs() -> None:
    infos = infer(shape_subgraph(), {"x": (2, 3, 6, 2)}).infos
    assert infos["to3"].shape == (3,) and infos["flat"].shape == (2, 3, 12)
    assert infos["e"].shape == (2, 2, 3, 12)


def _model(inputs: dict[str, tuple[str, tuple[int, ...]]], nodes: list[Node],
           outputs: dict[str, tuple[str, tuple[int, ...] | None]],
           weights: dict[str, np.ndarray] | None = None) -> Model:
    ins = tuple(TensorInfo(n, d, s) for n, (d, s) in inputs.items())
    outs = tuple(TensorInfo(n, d, s) for n, (d, s) in outputs.items())
    return Model(Graph("net", ins, outs, tuple(nodes)), dict(weights or {}))


def test_an_empty_axes_input_reduces_everything_as_the_runtime_does() -> None:
    """ReduceSum's axes as an input of shape (0,): its value is known (nothing), so the output
    is (1, 1, 1); the prepared graph reshapes the empty tensor to (0,), not to ONNX's copy of
    the 4-D tensor's dimension 0 (a Reshape the compiler makes states exact shapes)."""
    node = Node.make("r", "ReduceSum", ["data", "axes"], ["y"], {"keepdims": 1})
    model = _model({"data": ("float32", (3, 2, 2)), "axes": ("int64", (0,))}, [node],
                   {"y": ("float32", None)})
    compiled = prepare(model, precision="fp16")
    assert compiled.io.outputs["y"] == (1, 1, 1)
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    feeds = {"data": x, "axes": np.zeros(0, np.int64)}
    got = Runner(compiled.graph, compiled.io, "fp16").run(feeds)["y"]
    want = Session(model).run(feeds)["y"]
    assert got.shape == want.shape == (1, 1, 1) and float(got[0, 0, 0]) == float(want.sum())


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_zero_size_tensors_and_rank_1_outputs_run(precision: str) -> None:
    """A Slice that selects nothing (rank 3, a 0 dimension), a Split with a part of size 0, and a
    Concat of a computed rank-1 tensor with rank-1 constants (axis 0 of rank 1 is axis 3 of
    the 4-D form: the constants are backfilled as the data is)."""
    g = G()
    g.op("Slice", "x", g.const("st", _i64(10)), g.const("en", _i64(12)), g.const("ax", _i64(1)),
         out="empty")
    g.op("Split", "v", g.const("sizes", _i64(0, 6)), out="none", outputs=["all"], axis=0)
    g.op("Concat", g.const("head", np.ones(2, np.float32)), "v",
         g.const("tail", np.zeros(1, np.float32)), out="joined", axis=0)
    model = g.model({"x": (2, 3, 4), "v": (6,)}, ["empty", "none", "all", "joined"])
    compiled = prepare(model, outputs={"tensors": ["empty", "none", "all", "joined"]},
                       precision=precision)
    assert compiled.io.outputs == {"empty": (2, 0, 4), "none": (0,), "all": (6,),
                                   "joined": (9,)}
    x = {"x": w(2, 3, 4), "v": w(6)}
    got = Runner(compiled.graph, compiled.io, precision).run(x)
    want = Session(model).run(x, list(compiled.io.outputs))
    for name, value in want.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=1e-3 if precision == "fp16" else 0)
    assert got["none"].size == 0 and got["joined"][:2].tolist() == [1, 1]


def test_an_output_folded_to_a_weight_is_a_constant_of_the_record() -> None:
    """The importer folds Shape(x) of a static x into a weight: a graph with no nodes whose
    output is that weight prepares, and runs to the weight's value."""
    model = _model({"x": ("float32", (3, 4, 5))}, [], {"y": ("int64", (3,))},
                   {"y": _i64(3, 4, 5)})
    compiled = prepare(model, outputs={"tensors": ["y"]}, precision="fp16")
    got = Runner(compiled.graph, compiled.io, "fp16").run({"x": np.zeros((3, 4, 5), np.float32)})
    assert got["y"].tolist() == [3, 4, 5] and got["y"].dtype == np.int64


def test_a_shape_that_depends_on_a_run_time_value_is_refused() -> None:
    """A Reshape whose shape is a graph input: no record can fix its output shape; the error
    names the node and the tensor, and says it is not supported."""
    nodes = [Node.make("r", "Reshape", ["x", "shape"], ["y"]),
             Node.make("n", "Neg", ["y"], ["z"])]
    model = _model({"x": ("float32", (2, 6)), "shape": ("int64", (2,))}, nodes,
                   {"z": ("float32", None)})
    assert infer(model, {"x": (2, 6), "shape": (2,)}).dynamic.keys() == {"y", "z"}
    with pytest.raises(UserError, match=r"node r \(Reshape\) reads the value of 'shape'.*"
                                        "not supported"):
        prepare(model, precision="fp16")


def test_a_recorded_shape_stands_for_a_run_time_value_at_the_models_own_dimensions() -> None:
    """ReduceSum with its axes as an input: the model records the output shape (the exporter
    knew it), which holds at the model's own dimensions; the prepared graph computes the float
    runtime's numbers there, and other dimensions are refused."""
    node = Node.make("r", "ReduceSum", ["data", "axes"], ["y"], {"keepdims": 1})
    mid = Node.make("m", "Mul", ["data", "data"], ["sq"])
    model = _model({"data": ("float32", (3, 2, 2)), "axes": ("int64", (1,))},
                   [mid, node.with_attrs()], {"y": ("float32", (3, 1, 2))})
    model = Model(Graph("net", model.graph.inputs, model.graph.outputs,
                        (mid, Node.make("r", "ReduceSum", ["sq", "axes"], ["y"],
                                        {"keepdims": 1}))), {})
    compiled = prepare(model, precision="fp16")
    feeds = {"data": w(3, 2, 2), "axes": _i64(1)}
    got = Runner(compiled.graph, compiled.io, "fp16").run(feeds)["y"]
    want = Session(model).run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=2e-3)
    with pytest.raises(UserError, match="known only at run time"):
        prepare(model, dims={"data": [4, 2, 2]}, precision="fp16")


def test_a_fill_cast_without_a_recorded_shape_takes_its_cast_output_shape() -> None:
    """The importer writes ConstantOfShape + Cast for a fill type an attribute does not keep
    (its fill tensor has no recorded shape); with the shape a run-time input, the Cast's
    recorded output shape gives the fill's, and the record computes the runtime's values."""
    import onnx
    from onnx import TensorProto, helper

    from udo_build.model.onnx_import import import_onnx

    value = helper.make_tensor("value", TensorProto.INT32, [1], [7])
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["y"], value=value)], "fill",
        [helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [3, 4])])
    model = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert onnx.__version__ and [n.op for n in model.graph.nodes] == ["ConstantOfShape", "Cast"]
    compiled = prepare(model, precision="fp16")
    got = Runner(compiled.graph, compiled.io, "fp16").run({"shape": _i64(3, 4)})["y"]
    assert got.dtype == np.int32 and got.shape == (3, 4) and (got == 7).all()


def test_nodes_with_run_time_shapes_run_on_the_cpu_and_the_rest_on_the_htp() -> None:
    """The partition puts every node that reads or makes a tensor whose shape is known only at
    run time on the CPU runtime; the run computes the float runtime's numbers (fp16 on the
    HTP part)."""
    from udo_build.compiler.partition import CPU, HTP, node_runtimes, partition
    from udo_build.compiler.serve import record_for_run
    from udo_build.ir.bundle import Bundle
    from udo_build.runtime.records import RunSettings
    from udo_build.soc.target import CompileTarget

    nodes = [Node.make("pre", "Sigmoid", ["x"], ["s"]),
             Node.make("r", "Reshape", ["s", "shape"], ["y"]),
             Node.make("n", "Neg", ["y"], ["z"])]
    model = _model({"x": ("float32", (2, 6)), "shape": ("int64", (2,))}, nodes,
                   {"z": ("float32", None)})
    allowed = node_runtimes(model, None)
    assert allowed == {"pre": (HTP, CPU), "r": (CPU,), "n": (CPU,)}
    part = partition(model, allowed, ["z"])
    assert [(s.runtime, s.nodes) for s in part.subnets] == [(HTP, ("pre",)), (CPU, ("r", "n"))]
    settings = RunSettings(None, "sm8650", CompileTarget("v75", 8, 2, {}, "default", "fp16"))
    program, _, _ = record_for_run(Bundle(model, None, {}), settings, None, choose=False)
    feeds = {"x": w(2, 6), "shape": _i64(3, 4)}
    got = program.runner(None).run(feeds)["z"]
    want = Session(model).run(feeds)["z"]
    assert got.shape == want.shape == (3, 4)
    np.testing.assert_allclose(got, want, rtol=2e-3)
