"""`sequence-feeds`: the float bundle, the kernels of its custom ops and a file of token id
sequences (`quantize.sequences`) -> the calibration inputs of an LLM made by the model itself:
each sequence prefilled through the float model in steps of its own size, the KV cache fed
forward (udo_build.runtime.sequences). Output `feeds`: a folder holding `list.txt`, an input
list (`name:=path` per input, one line per step), and the `.npy` files it names, in each
input's own type. Every step that reads calibration inputs (quantize, the algorithms, the
mixed-precision search) reads this list as it reads a recipe's `input_list`.

Parameter `cache`: the model's cache names, as a generate run's `generate.cache`
(udo_build.runtime.generate.CacheIO; the defaults are optimum's ONNX exports).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UserError
from ..actions import ActionContext, action_kind
from .inputs import kernel_files

if TYPE_CHECKING:
    from ..action_io import Produced

LIST = "list.txt"


@action_kind("sequence-feeds", version=1, params=("cache",))
def sequence_feeds(ctx: ActionContext) -> Produced:
    from ...ir.bundle import read_bundle
    from ...kernels.load import packages_for
    from ...runtime.float_session import Session
    from ...runtime.sequences import read_sequences, sequence_feeds, step_count
    from ..action_io import Produced, Tree

    bundle = read_bundle(ctx.input_reader("bundle"), "float bundle")
    layout = _layout(bundle.model, ctx.params.get("cache"))
    file = str(ctx.source_path("sequences") or "sequences")
    sequences = read_sequences(ctx.input_bytes("sequences").decode("utf-8", "replace"), file,
                               layout)
    session = Session(bundle.model, packages_for(bundle, kernel_files(ctx)))
    total = step_count(sequences, layout.tokens)
    progress = ctx.progress("token sequences", total)
    folder = ctx.workdir / "feeds"
    (folder / "steps").mkdir(parents=True)
    lines = []
    run = _run(session, layout.outputs)
    for index, feed in enumerate(sequence_feeds(sequences, layout, run)):
        lines.append(" ".join(_write(folder, index, position, name, value)
                              for position, (name, value) in enumerate(sorted(feed.items()))))
        if progress is not None:
            progress(index + 1, total)
    (folder / LIST).write_text("\n".join(lines) + "\n")
    return Produced({"feeds": Tree(folder)}, description=f"{total} calibration inputs from "
                    f"{len(sequences)} token sequence{'s' * (len(sequences) != 1)}")


def _run(session: Any, outputs: list[str]) -> Any:
    def run(feed: dict[str, Any]) -> Any:
        return session.run(feed, outputs)
    return run


def _write(folder: Path, index: int, position: int, name: str, value: Any) -> str:
    """One input's file (`steps/<step>_<input>.npy`, no pickle) and its list entry."""
    import numpy as np

    relative = f"steps/{index:05d}_{position:03d}.npy"
    np.save(folder / relative, np.ascontiguousarray(value), allow_pickle=False)
    return f"{name}:={relative}"


def _layout(model: Any, cache: Any) -> Any:
    from ...runtime.generate import CacheIO, CacheLayout, LayoutError

    inputs = {t.name: (t.static_shape, t.dtype) for t in model.graph.inputs}
    outputs = {t.name: t.static_shape for t in model.graph.outputs}
    try:
        return CacheLayout.of(CacheIO.from_params(cache), inputs, outputs)
    except LayoutError as exc:
        raise UserError(exc.message, field=f"quantize.cache.{exc.field.removeprefix('cache.')}"
                        if exc.field != "cache" else "quantize.cache",
                        hint=exc.hint or None) from None
