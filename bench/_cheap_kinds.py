"""Cheap stand-ins for the action kinds udo-build does not implement yet (a benchmark plugin).

Load it with `UDO_BUILD_PLUGINS=/abs/path/bench/_cheap_kinds.py`. Only kinds that are not already
registered are added, under the names the planner uses (`package`, `convert`, `quantize`,
`prepare`, `assemble`, `run`): once udo-build implements a kind for real, the real one is used.

Each stand-in derives a small deterministic output from what enters its key: the sha256 over the
kind, its key parameters (canonical JSON) and the bytes of every input, stretched to
UDO_BENCH_OUTPUT_BYTES bytes (default 1024): half a repeated text line, half SHAKE-256 output,
so the store keeps them zstd-compressed at about half their size.
UDO_BENCH_SLEEP_MS makes every action sleep that long (for kill tests). Nothing heavy is
imported: loading this module costs well under a millisecond.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

from udo_build.builder.actions import ActionContext, Produced, action_kind, registered

SLEEP_ENV = "UDO_BENCH_SLEEP_MS"
SIZE_ENV = "UDO_BENCH_OUTPUT_BYTES"
VERSION = 1

# kind -> (key parameters, output names): the outputs the plan reads or publishes (DESIGN.md)
KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "package": (("backend", "archs", "with_kernels"), ("package",)),
    "convert": ((), ("bundle",)),
    "quantize": (("act_bitwidth", "weights_bitwidth", "bias_bitwidth", "per_channel",
                  "quantizer", "float_fallback"), ("bundle", "encodings")),
    "prepare": (("arch", "vtcm_mb", "optimization_level", "input_dimensions", "outputs",
                 "precision"), ("record",)),
    "assemble": ((), ("bundle",)),
    "run": (("arch", "vtcm_mb", "optimization_level", "input_dimensions", "outputs",
             "precision", "mode", "check"), ("outputs", "report")),
}


def derive(kind: str, params: dict[str, object], ctx: ActionContext) -> bytes:
    """The output bytes: a function of the kind, its key parameters and its inputs only."""
    h = hashlib.sha256(f"udo-bench/{kind}/{VERSION}\0".encode())
    h.update(json.dumps(params, sort_keys=True, separators=(",", ":")).encode())
    for name in ctx.input_names():
        data = ctx.input_bytes(name)
        h.update(f"\0{name}\0{len(data)}\0".encode())
        h.update(data)
    size = max(int(os.environ.get(SIZE_ENV, "1024")), 128)
    line = f"{kind} {h.hexdigest()}\n".encode()
    text = (line * (size // 2 // len(line) + 1))[:size // 2]  # compresses: stored as .zst
    return text + hashlib.shake_256(h.digest()).digest(size - len(text))


def publish_path(kind: str, params: dict[str, object]) -> str:
    """The folder of the outputs in the output folder: one per key (names do not enter it),
    unless the plan says where they go."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    return f"bench/{kind}/{digest}"


def _make(kind: str, keyed: tuple[str, ...], outputs: tuple[str, ...]) -> None:
    def run(ctx: ActionContext) -> Produced:
        sleep_ms = float(os.environ.get(SLEEP_ENV, "0") or 0)
        if sleep_ms > 0:
            time.sleep(sleep_ms / 1000)
        params = {p: ctx.params.get(p) for p in keyed}
        produced = {name: derive(f"{kind}/{name}", params, ctx) for name in outputs}
        publish = {f"{publish_path(kind, params)}/{name}.bin": name for name in outputs}
        return Produced(produced, publish, f"cheap {kind} (bench stand-in)")

    run.__name__ = run.__qualname__ = f"cheap_{kind}"
    run.__doc__ = f"Bench stand-in for {kind}: a digest of its key parameters and inputs."
    action_kind(kind, version=VERSION, params=keyed)(run)


def register_missing() -> list[str]:
    """Register a stand-in for every kind udo-build lacks; returns the kinds added."""
    present = registered()
    added = []
    for kind, (keyed, outputs) in KINDS.items():
        if kind not in present:
            _make(kind, keyed, outputs)
            added.append(kind)
    return added


ADDED = register_missing()
