"""Calibration feeds from token sequences (udo_build.runtime.sequences) over the numpy Llama of
tests/runtime/test_generate.py: each sequence goes through the model in steps of its own size,
the first left-padded, each step's past the model's own presents of the step before; the
sequences file is checked with messages that say where."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from udo_build.errors import UserError
from udo_build.runtime.generate import CacheChain
from udo_build.runtime.sequences import read_sequences, sequence_feeds, step_count

from .test_generate import CONTEXT, layout, run


def test_each_step_is_fed_the_presents_of_the_step_before() -> None:
    chain_layout = layout(size=4)
    sequences = [[5, 6, 7, 8, 9, 10], [1, 2, 3]]  # 2 + 4 tokens, then 3 (one padded step)
    calls: list[dict[str, Any]] = []

    def recording(feed: dict[str, Any]) -> dict[str, Any]:
        calls.append(feed)
        return run(feed)

    feeds = list(sequence_feeds(sequences, chain_layout, recording))
    assert len(feeds) == step_count(sequences, 4) == 3
    assert len(calls) == 1  # only a step whose presents feed a next one runs
    first, second, third = feeds
    assert first["input_ids"].tolist() == [[0, 0, 5, 6]]  # left-padded
    assert second["input_ids"].tolist() == [[7, 8, 9, 10]]
    assert second["position_ids"].tolist() == [[2, 3, 4, 5]]
    present = np.asarray(run(first)["present_key_0"], np.float32)  # the model's own keys
    past = second["past_key_0"]
    assert np.any(present[:, :, -2:]) and past.shape[2] == CONTEXT - 4
    assert np.array_equal(past, present[:, :, 4:])  # its newest positions: the first step's
    mask = second["attention_mask"][0, 0]
    assert np.all(mask[:, -6:-4] == 0.0)  # its 2 tokens attended by every new token
    assert np.all(mask[:, :-6] == -255.0)  # its padding and the empty cache are not
    assert third["input_ids"].tolist() == [[0, 1, 2, 3]]
    assert not any(np.any(third[f"past_{k}_{i}"]) for k in ("key", "value") for i in (0, 1))


def test_the_feeds_are_the_generations_own() -> None:
    """The same chain a generation's prompt steps feed (CacheChain), step for step."""
    chain_layout, sequence = layout(size=4), list(range(30, 41))
    chain = CacheChain(chain_layout)
    expected = []
    for count, start in ((3, 0), (4, 3), (4, 7)):
        feed = chain.feed(sequence[start:start + count], 4)
        expected.append(feed)
        chain.advance(run(feed), count)
    found = list(sequence_feeds([sequence], chain_layout, run))
    assert len(found) == 3
    for got, want in zip(found, expected, strict=True):
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k]) for k in want)


def test_a_sequences_file_has_one_sequence_per_line_with_comments() -> None:
    text = "# calibration\n1 2 3\n\n4, 5  # a comment\n"
    assert read_sequences(text, "seq.txt", layout()) == [[1, 2, 3], [4, 5]]


@pytest.mark.parametrize(("text", "message", "line", "column"), [
    ("1 2\n3 512 4\n", "'512' is not a token id of the model", 2, 3),
    ("1 2\n7 x\n", "'x' is not a token id of the model", 2, 3),
    ("# nothing\n\n", "holds no token ids", None, None),
    ("1\n" + " ".join(["3"] * (CONTEXT + 1)) + "\n", f"does not fit the model's context of "
     f"{CONTEXT}", 2, None),
])
def test_a_bad_sequences_file_is_an_error_at_its_line(text: str, message: str,
                                                       line: int | None,
                                                       column: int | None) -> None:
    with pytest.raises(UserError) as caught:
        read_sequences(text, "seq.txt", layout())
    problem = caught.value.problem
    assert message in problem.message
    assert (problem.file, problem.line, problem.column) == ("seq.txt", line, column)
    assert problem.field == "quantize.sequences"
