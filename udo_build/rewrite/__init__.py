"""The one rewrite engine: rules as data applied to a graph of SSA values, to a fixed point.

    from udo_build.rewrite.engine import Trace, rewrite
    changed = rewrite(graph, rules, ctx, Trace(), pass_name="rules@3000")

Used by the compiler (on its HTP form), the float runtime's load-time plan and quantization's
folding (on a model's nodes, in the model's own layout and vocabulary). It sits below the
runtime: it imports only udo_build.ir, udo_build.errors, udo_build.canonical and numpy.

- graph.py     the IR: immutable `Op` values over SSA values in an `OpGraph` with use lists; the
               graph's `Dialect` (op layouts and shapes: the compiler's HTP one, the model's)
- rules.py     patterns (`Op`, `Const`), constraints as values, `Rule`, priorities
- replace.py   replacements as values (`New`, `CopyAttrs`, `WithType`, `WithSize`, `InputsOf`,
               `OpOf`, `ConstScalar`, `GenShape`, values with a `build` method, `Call`)
- engine.py    the driver: worklist to a fixed point, iteration cap, trace
- fold.py      the folding rules every vocabulary shares (`fold_rules(vocabulary)`)
- model.py     a model's node list as an OpGraph in the model's layout, and back
"""
