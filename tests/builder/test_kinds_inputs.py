"""How kinds find their conventional inputs: numbered ones in index order, kernels, the list."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from udo_build.builder.actions import ActionContext
from udo_build.builder.kinds.inputs import input_list, kernel_files, numbered
from udo_build.store import Store


def test_numbered_inputs_come_in_index_order_and_the_list_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "a.raw").write_bytes(np.zeros(2, "<f4").tobytes())
    (tmp_path / "list.txt").write_text("%y\na.raw\n")
    sources = {f"config[{i}]": tmp_path / f"c{i}" for i in (10, 2, 0)}
    for path in [*sources.values(), tmp_path / "k.py"]:
        path.write_text("")
    sources.update({"kernels[0]": tmp_path / "k.py", "input_list": tmp_path / "list.txt",
                    "input_list.files[0]": tmp_path / "a.raw"})
    ctx = ActionContext.of_files({}, sources, Store(tmp_path / "store").cas)
    try:
        assert numbered(ctx, "config") == ["config[0]", "config[2]", "config[10]"]
        assert numbered(ctx, "record") == []
        kernels = kernel_files(ctx)  # copies in the action's work folder, under their names
        assert [p.name for p in kernels] == ["k.py"] and kernels[0].is_relative_to(ctx.workdir)
        listing = input_list(ctx)  # its files are the action's inputs, not the paths it names
        assert listing.output_tensors == ("y",)
        assert [p.read_bytes() for p in listing.files()] == [(tmp_path / "a.raw").read_bytes()]
        assert listing.files()[0].is_relative_to(ctx.workdir)
        assert ctx.source_path("kernels[0]") == tmp_path / "k.py"
    finally:
        ctx.cleanup()
