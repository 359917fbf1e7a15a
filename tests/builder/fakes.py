"""Stand-in action kinds for engine tests: cheap, deterministic, and counting their runs.

They register only the kinds udo-build does not implement yet, under the kinds' real names, so
the tests exercise the real planner and engine with every step of the pipeline. Implemented
kinds stay real, behind the same failure and delay injection (FAIL, SLOW).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

from udo_build.builder import actions, executors
from udo_build.builder.actions import ActionContext, Produced, Tree, action_kind

CALLS: list[str] = []
FAIL: set[str] = set()  # action kinds (or "kind:param=value") that raise StepFailed
SLOW: dict[str, float] = {}  # action kinds (or "kind:param=value") -> seconds they sleep first


def _fingerprint(ctx: ActionContext) -> bytes:
    h = hashlib.sha256(json.dumps(ctx.params, sort_keys=True).encode())
    for name in ctx.input_names():
        h.update(name.encode())
        h.update(ctx.input_bytes(name))
    return h.hexdigest().encode()


def _maybe_fail(kind: str, ctx: ActionContext) -> None:
    from udo_build.errors import StepFailed

    tags = {kind, *(f"{kind}:{k}={v}" for k, v in ctx.params.items())}
    time.sleep(max((SLOW[t] for t in tags & SLOW.keys()), default=0.0))
    if tags & FAIL:
        raise StepFailed(kind, "failing on purpose")


def _package(ctx: ActionContext) -> Produced:
    CALLS.append(f"package:{ctx.params['backend']}")
    _maybe_fail("package", ctx)
    folder = ctx.workdir / "pkg"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "ops.cpp").write_bytes(ctx.input_bytes("opdef"))
    (folder / "Makefile").write_text(f"# {ctx.params['backend']} {ctx.params['archs']}\n")
    return Produced({"tree": Tree(folder)}, {f"packages/{ctx.params['backend']}": "tree"})


def _simple(kind: str, *outputs: str):  # type: ignore[no-untyped-def]
    def run(ctx: ActionContext) -> Produced:
        CALLS.append(kind)
        _maybe_fail(kind, ctx)
        return Produced({output: _fingerprint(ctx) + output.encode() for output in outputs})
    run.__name__ = kind
    return run


KINDS = {
    "package": (1, ("backend", "archs", "with_kernels"), _package),
    "convert": (1, (), _simple("convert", "bundle")),
    "quantize": (1, ("act_bitwidth", "weights_bitwidth", "bias_bitwidth", "per_channel",
                     "quantizer", "float_fallback"), _simple("quantize", "bundle", "encodings")),
    "prepare": (1, ("arch", "vtcm_mb", "optimization_level", "input_dimensions", "outputs",
                    "precision"), _simple("prepare", "record")),
    "assemble": (1, (), _simple("assemble", "bundle")),
    "run": (1, ("arch", "vtcm_mb", "optimization_level", "input_dimensions", "outputs",
                "precision", "mode", "check"), _simple("run", "report")),
}


def _failing(kind: str, run):  # type: ignore[no-untyped-def]
    """A real kind with failure injection (FAIL) in front of it."""
    def wrapper(ctx: ActionContext) -> Produced:
        _maybe_fail(kind, ctx)
        return run(ctx)
    return wrapper


@contextmanager
def fake_kinds() -> Iterator[list[str]]:
    actions.load_kinds()
    added, real = [], {}
    for name, (version, params, fn) in KINDS.items():
        kind = actions.get_kind(name)
        sets: tuple[str, ...] = ()
        if kind is not None:  # implemented: keep it (its key too), but let FAIL fail it
            real[name] = kind
            actions.unregister(name)
            fn = _failing(name, kind.run)
            version, params, sets = kind.version, kind.params, kind.set_inputs
        action_kind(name, version=version, params=params, set_inputs=sets)(fn)
        added.append(name)
    CALLS.clear()
    FAIL.clear()
    SLOW.clear()
    executors.START_METHOD = "fork"  # the workers inherit these kinds and FAIL, SLOW
    try:
        yield CALLS
    finally:
        executors.START_METHOD = ""
        for name in added:
            actions.unregister(name)
        for name, kind in real.items():  # as registered: set inputs and resources too
            action_kind(name, version=kind.version, params=kind.params,
                        set_inputs=kind.set_inputs, resources=dict(kind.resources))(kind.run)
        FAIL.clear()
        SLOW.clear()
