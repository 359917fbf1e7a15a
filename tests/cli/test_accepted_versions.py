"""docs/ops.md's claim "ONNX versions the importer accepts" (bench/conformance.py
accepted_versions), checked for the ops whose inputs and attributes moved between versions:
at every listed version of Reduce*, Pad, DFT, Split, Slice and Resize, a minimal model at that
opset converts through the CLI (exit 0) and `run` on the float session gives what onnx's
reference evaluator gives."""

from __future__ import annotations

import importlib.util
import io
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from udo_build.cli import main
from udo_build.runtime.results import file_name

BENCH = Path(__file__).resolve().parents[2] / "bench"
REDUCTIONS = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
              "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")
OPS = (*REDUCTIONS, "Pad", "DFT", "Split", "Slice", "Resize")
# a version onnx's reference evaluator lacks (Split 1) or runs wrongly (Resize 10 reads its
# scales as roi): the model it runs instead, of the same semantics
REFERENCE_MODEL: dict[tuple[str, int], Callable[[onnx.ModelProto], None]] = {
    ("Split", 1): lambda m: m.opset_import[0].__setattr__("version", 2),
    ("Resize", 10): lambda m: _resize_10_as_11(m),
}

Node = tuple[onnx.NodeProto, dict[str, np.ndarray], tuple[int, ...], int]  # node, consts, x, outs


def _accepted_versions() -> Callable[[str], str]:
    name = "conformance"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].accepted_versions


def claimed() -> list[tuple[str, int]]:
    accepted = _accepted_versions()
    return [(op, int(v)) for op in OPS
            for v in re.findall(r"(?:^|, )(\d+)", accepted(op))]


def reduction(op: str, version: int) -> Node:
    if version >= (13 if op == "ReduceSum" else 18):
        node = helper.make_node(op, ["x", "axes"], ["y0"], keepdims=0)
        return node, {"axes": np.array([1, -1], np.int64)}, (2, 3, 4), 1
    return helper.make_node(op, ["x"], ["y0"], axes=[1, -1], keepdims=0), {}, (2, 3, 4), 1


def pad(version: int) -> Node:
    pads = [0, 0, 1, 2, 0, 0, 0, 1]
    if version == 1:
        return helper.make_node("Pad", ["x"], ["y0"], paddings=pads, value=0.5), {}, \
            (1, 2, 3, 3), 1
    if version == 2:
        return helper.make_node("Pad", ["x"], ["y0"], pads=pads, value=0.5), {}, (1, 2, 3, 3), 1
    consts = {"pads": np.array(pads, np.int64), "value": np.array(0.5, np.float32)}
    if version < 18:
        return helper.make_node("Pad", ["x", "pads", "value"], ["y0"]), consts, (1, 2, 3, 3), 1
    consts.update(pads=np.array([1, 2, 0, 1], np.int64), axes=np.array([2, 3], np.int64))
    return helper.make_node("Pad", ["x", "pads", "value", "axes"], ["y0"]), consts, \
        (1, 2, 3, 3), 1


def dft(version: int) -> Node:
    if version < 20:
        return helper.make_node("DFT", ["x"], ["y0"], axis=1), {}, (1, 8, 1), 1
    return helper.make_node("DFT", ["x", "", "axis"], ["y0"]), \
        {"axis": np.array(1, np.int64)}, (1, 8, 1), 1


def split(version: int) -> Node:
    if version < 13:
        return helper.make_node("Split", ["x"], ["y0", "y1"], axis=1, split=[1, 3]), {}, \
            (2, 4), 2
    node = helper.make_node("Split", ["x", "split"], ["y0", "y1"], axis=1)
    return node, {"split": np.array([1, 3], np.int64)}, (2, 4), 2


def slice_(version: int) -> Node:
    if version == 1:
        return helper.make_node("Slice", ["x"], ["y0"], starts=[1, 0], ends=[3, -1],
                                axes=[0, 1]), {}, (4, 5), 1
    consts = {"starts": np.array([1, 0], np.int64), "ends": np.array([3, -1], np.int64),
              "axes": np.array([0, 1], np.int64), "steps": np.array([1, 2], np.int64)}
    return helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y0"]), \
        consts, (4, 5), 1


def resize(version: int) -> Node:
    scales = np.array([1, 1, 2, 1.5], np.float32)
    if version == 10:
        return helper.make_node("Resize", ["x", "scales"], ["y0"], mode="linear"), \
            {"scales": scales}, (1, 1, 2, 2), 1
    consts = {"roi": np.array([], np.float32), "scales": scales}
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y0"], mode="linear",
                            coordinate_transformation_mode="half_pixel")
    return node, consts, (1, 1, 2, 2), 1


def _resize_10_as_11(m: onnx.ModelProto) -> None:
    """Resize 10 is Resize 11 with asymmetric coordinates and no roi."""
    node = m.graph.node[0]
    node.input[:] = ["x", "roi", "scales"]
    node.attribute.append(helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
    m.graph.initializer.append(numpy_helper.from_array(np.array([], np.float32), "roi"))
    m.opset_import[0].version = 11


def reference(op: str, version: int, proto: onnx.ModelProto) -> ReferenceEvaluator:
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    if (op, version) in REFERENCE_MODEL:
        REFERENCE_MODEL[op, version](proto)
    return ReferenceEvaluator(proto)


BUILDERS: dict[str, Callable[[int], Node]] = {
    **{op: (lambda v, op=op: reduction(op, v)) for op in REDUCTIONS},
    "Pad": pad, "DFT": dft, "Split": split, "Slice": slice_, "Resize": resize}


def model(op: str, version: int) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    node, consts, shape, outs = BUILDERS[op](version)
    names = [f"y{i}" for i in range(outs)]

    def make(out_shapes: list[list[int] | None]) -> onnx.ModelProto:
        graph = helper.make_graph(
            [node], f"{op}{version}", [helper.make_tensor_value_info(
                "x", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
             for n, s in zip(names, out_shapes, strict=True)],
            initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])

    got = reference(op, version, make([None] * outs)).run(None, {"x": np.zeros(shape, "f")})
    proto = make([list(np.shape(g)) for g in got])
    onnx.checker.check_model(proto)
    return proto, shape


@pytest.mark.parametrize("op, version", claimed(), ids=lambda v: str(v))
def test_every_accepted_version_converts_and_runs_as_onnx_reference(
        op: str, version: int, tmp_path: Path) -> None:
    proto, shape = model(op, version)
    x = np.random.default_rng(version).uniform(0.5, 2.0, shape).astype(np.float32)
    onnx.save(proto, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "list.txt").write_text("x:=x.npy\n")
    for argv in (["convert", str(tmp_path / "m.onnx"), "--out", str(tmp_path / "m.udb")],
                 ["run", str(tmp_path / "m.udb"), "--input-list", str(tmp_path / "list.txt"),
                  "--output-dir", str(tmp_path / "out")]):
        err = io.StringIO()
        assert main(argv, stdout=io.StringIO(), stderr=err, env={}) == 0, err.getvalue()
    want = reference(op, version, proto).run(None, {"x": x})
    for i, expected in enumerate(want):
        got = np.load(tmp_path / "out" / "Result_0" / f"{file_name(f'y{i}')}.npy")
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_versions_the_converter_cannot_adapt_are_refused_and_not_claimed(tmp_path: Path) -> None:
    """bench/conformance.py NO_ADAPTER: convert refuses them (exit 2), docs/ops.md omits them;
    if onnx's converter learns one, this fails and the list shrinks."""
    conformance = sys.modules["conformance"]
    for op, version in sorted(conformance.NO_ADAPTER):
        assert str(version) not in conformance.accepted_versions(op).split(", ")
        proto, _ = model(op, version)
        onnx.save(proto, tmp_path / "m.onnx")
        err = io.StringIO()
        code = main(["convert", str(tmp_path / "m.onnx"), "--out", str(tmp_path / "m.udb")],
                    stdout=io.StringIO(), stderr=err, env={})
        assert code == 2, err.getvalue()
        assert "cannot convert the model from opset" in err.getvalue(), err.getvalue()


def test_the_claim_lists_the_versions_that_moved_inputs() -> None:
    versions = dict.fromkeys(OPS, ())
    for op, version in claimed():
        versions[op] = (*versions[op], version)
    assert {18} <= set(versions["ReduceMean"]) and {13} <= set(versions["ReduceSum"])
    assert {11, 18} <= set(versions["Pad"]) and {17, 20} <= set(versions["DFT"])
    assert {13, 18} <= set(versions["Split"]) and {1, 10} <= set(versions["Slice"])
