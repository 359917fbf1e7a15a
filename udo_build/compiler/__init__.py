"""The HTP graph compiler: a bundle -> one offline cache record per target.

    from udo_build.compiler import CompileTarget, compile_bundle, read_record
    target = CompileTarget("v73", 8, optimization_level=2, precision="int8")
    compiled = compile_bundle(bundle, target)
    data = compiled.record()

Modules, in pipeline order:

- shapes.py   shape inference for input dimension overrides
- lower.py    the model -> the HTP form (4-D bhwc, explicit transposes, requested outputs)
- ops.py      the HTP op vocabulary, layout classes, tensor properties, the `HTP` dialect of
              the rewrite IR (udo_build.rewrite: the OpGraph, rules as data, replacements and
              the one driver, shared with the float runtime and quantization)
- tiling.py   AUTOSPLIT: the `AutoSplit` replacement and the typical slice
- layout_rules.py, fusion_rules.py   the default package's rules (the folds are the shared
              `udo_build.rewrite.fold` rules in the HTP vocabulary)
- passes.py   constprop, cse, dce, and the pipeline of each level
- select.py   implementation selection; memory.py VTCM planning
- record.py   the record format (writer, checked reader, summary)
- expand.py, execute.py   the kernels that implement each op; running a prepared graph
- driver.py   the steps together (`compile_bundle`)

User rules come from op packages: `package.rule(Rule(...))` in a kernels module.
"""

from __future__ import annotations

from ..rewrite.engine import RuleLoopError, Trace
from .driver import COMPILER_VERSION, Compiled, CompileTarget, compile_bundle
from .execute import IO, Runner
from .layout_rules import elementwise
from .record import EXTENSION, read_header, read_record, summary

__all__ = ["COMPILER_VERSION", "EXTENSION", "IO", "Compiled", "RuleLoopError", "Runner",
           "CompileTarget", "Trace", "compile_bundle", "elementwise", "read_header", "read_record",
           "summary"]
