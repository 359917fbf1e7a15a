"""How kinds find their conventional inputs: numbered ones in index order, kernels, the list."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from udo_build.builder.actions import ActionContext
from udo_build.builder.kinds.inputs import input_list, kernel_files, numbered


def test_numbered_inputs_come_in_index_order_and_the_list_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "a.raw").write_bytes(np.zeros(2, "<f4").tobytes())
    (tmp_path / "list.txt").write_text("%y\na.raw\n")
    sources = {f"config[{i}]": tmp_path / f"c{i}" for i in (10, 2, 0)}
    sources.update({"kernels[0]": tmp_path / "k.py", "input_list": tmp_path / "list.txt"})
    ctx = ActionContext({}, sources, {}, None)
    try:
        assert numbered(ctx, "config") == ["config[0]", "config[2]", "config[10]"]
        assert numbered(ctx, "record") == []
        assert kernel_files(ctx) == [tmp_path / "k.py"]
        listing = input_list(ctx)
        assert listing.output_tensors == ("y",) and listing.files() == [tmp_path / "a.raw"]
    finally:
        ctx.cleanup()
