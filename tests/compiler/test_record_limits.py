"""A record the readers would refuse is never written: its graph description (the payload's JSON)
is held to the reader's limit when the record is packed."""

from __future__ import annotations

import pytest

from udo_build.compiler import record, record_read
from udo_build.errors import UserError


def test_the_writer_refuses_a_graph_description_the_reader_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record, "MAX_GRAPH_JSON", 1000)
    key = {"key": "k", "sizes": {}}
    assert record.pack_record(key, b"{" + b" " * 997 + b"}", [], 1)  # 999 bytes: written
    with pytest.raises(UserError) as info:
        record.pack_record(key, b"{" + b" " * 1000 + b"}", [], 1)
    assert "graph description" in str(info.value)
    assert "weights_block_size" in (info.value.problem.hint or "")


def test_the_limits_are_one() -> None:
    """The reader's limit fits a 1.1B-parameter decoder's LPBQ block scales (133 MiB a graph)."""
    assert record.MAX_GRAPH_JSON is record_read.MAX_GRAPH_JSON
    assert 133 << 20 < record_read.MAX_GRAPH_JSON <= record_read.MAX_PAYLOAD // 16
