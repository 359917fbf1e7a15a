"""The prepared graph's shapes are the float runtime's, on every onnx backend case that converts.

For each case of the ops the default package claims (bench/_conformance.py), at the model's own
input dimensions: the float session runs the model on the case's inputs and gives every
tensor; the compiler prepares an fp16 record of it (level 2). Then every tensor the prepared
graph keeps under its model name (not a constant) has the float runtime's shape, backfilled to
4-D (`ops.backfill`), and its dtype; every op that runs in the model's layout (MODEL) makes its
outputs in the float runtime's shapes and takes inputs of as many elements as its model shapes
say (the executor reshapes them: a rule may have removed a reshape between). A case whose
tensors' shapes depend on values known only at run time (an input read as a shape or axes) is
refused with a "not supported" user error naming why, never prepared with guessed shapes.

The cases the importer refuses, and those the float session refuses (training-mode Dropout),
have no shapes to compare: they pass when the refusal is a user error (the conformance baseline,
tests/conformance, holds what each refusal says); anything else the float session raises fails.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

from udo_build.compiler import CompileTarget, compile_bundle
from udo_build.compiler.ops import backfill
from udo_build.errors import UserError
from udo_build.ir.bundle import Bundle
from udo_build.rewrite.graph import MODEL

from ..conformance.test_onnx_cases import CASES, CLAIMED, harness

TARGET = CompileTarget("v75", 8, 2, {}, "default", "fp16")


def _float_tensors(case: Any) -> tuple[Any, dict[str, np.ndarray]] | None:
    """The imported model and every tensor the float session computes on the case's inputs
    (None where the importer or the float session refuses the case with a user error)."""
    from udo_build.model.onnx_import import import_onnx
    from udo_build.runtime.float_session import Session

    try:
        model = import_onnx(case.model, file=f"{case.name}.onnx")
    except UserError:
        return None  # does not convert
    initialized = {i.name for i in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in initialized]
    feeds = dict(zip(names, map(harness._array, case.data_sets[0][0]), strict=False))
    every = [t.name for t in model.graph.inputs if t.name not in model.weights]
    every += [o for n in model.graph.nodes for o in n.outputs if o]
    try:
        with np.errstate(all="ignore"):
            return model, Session(model).run(feeds, every)
    except UserError as error:  # the float session's own verdict
        assert "not supported" in str(error), str(error)
        return None


def _mismatches(compiled: Any, tensors: dict[str, np.ndarray]) -> list[str]:
    g = compiled.graph
    out = []
    for vid, name in g.names.items():
        if vid in g.consts or name not in tensors:
            continue
        want = tensors[name]
        t = g.types[vid]
        if t.shape != backfill(want.shape) or t.dtype != want.dtype.name:
            out.append(f"{name}: prepared {t.dtype}{list(t.shape)}, float "
                       f"{want.dtype.name}{list(want.shape)}")
    for op in g.ops.values():
        if op.layout != MODEL:
            continue
        n = len(op.inputs)
        for vid, shape in zip(op.inputs, op.model[:n], strict=True):
            if vid >= 0 and math.prod(shape) != math.prod(g.types[vid].shape):
                out.append(f"{op.op} (op {op.id}) takes {g.names[vid]} "
                           f"{list(g.types[vid].shape)} as {list(shape)}")
        for vid, shape in zip(op.outputs, op.model[n:], strict=True):
            name = g.names[vid]
            if name in tensors and tuple(shape) != tensors[name].shape:
                out.append(f"{op.op} (op {op.id}) makes {name} as {list(shape)}, float "
                           f"{list(tensors[name].shape)}")
    return out


@pytest.mark.parametrize("name", CLAIMED)
def test_prepared_shapes_are_the_float_runtimes(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = _float_tensors(CASES[name])
        if found is None:
            return
        model, tensors = found
        try:
            compiled = compile_bundle(Bundle(model, None, {}), TARGET)
        except UserError as error:
            assert "not supported" in str(error), str(error)  # an honest refusal only
            return
    problems = _mismatches(compiled, tensors)
    assert not problems, "\n".join(problems[:10])
