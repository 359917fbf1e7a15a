"""Generation (udo_build.runtime.generate) over a numpy Llama (tests/examples/test_llama.py,
the tiny example's weights): the cached generation gives the tokens and logits of a full
recompute over the growing sequence without a cache, whatever the prompt graph's size (left
padding, several prompt steps, token by token); prompt files and cache conventions are
checked with messages that say where."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from udo_build.errors import UserError
from udo_build.runtime.generate import (
    CacheChain,
    CacheIO,
    CacheLayout,
    LayoutError,
    Runners,
    chunks,
    generate,
    read_prompt,
)

from ..conftest import EXAMPLES
from ..examples.test_llama import generator, llama

CONTEXT = 24
IO = CacheIO(past="past_{kind}_{layer}", present="present_{kind}_{layer}")
PROMPT = [17, 400, 3, 99, 256, 511, 0, 42, 7, 300]


@cache
def weights() -> dict[str, np.ndarray]:
    proto = onnx.load(EXAMPLES / "llama" / "model" / "llama_tiny.onnx")
    return {t.name: numpy_helper.to_array(t).astype(np.float64)
            for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}


def run(feed: dict[str, Any]) -> dict[str, Any]:
    return llama(weights(), {k: np.asarray(v) for k, v in feed.items()},
                 generator().SIZES["tiny"])


def layout(size: int = 4, io: CacheIO = IO) -> CacheLayout:
    cache_in, cache_out = (1, 2, CONTEXT - size, 32), (1, 2, CONTEXT, 32)
    inputs: dict[str, Any] = {io.input_ids: ((1, size), "int64"),
                              io.position_ids: ((1, size), "int64"),
                              io.attention_mask: ((1, 1, size, CONTEXT), "float32")}
    outputs: dict[str, Any] = {io.logits: (1, size, 512)}
    for layer in range(2):
        for kind in ("key", "value"):
            inputs[io.past.format(layer=layer, kind=kind)] = (cache_in, "float32")
            outputs[io.present.format(layer=layer, kind=kind)] = cache_out
    return CacheLayout.of(io, inputs, outputs)


def recomputed(sequence: list[int]) -> np.ndarray:
    """The last logits of the whole sequence, run at once without a cache."""
    s = len(sequence)
    empty = np.zeros((1, 2, 0, 32))
    mask = np.triu(np.full((s, s), -255.0), 1)[None, None]
    feed = {"input_ids": np.array([sequence]), "position_ids": np.arange(s)[None],
            "attention_mask": mask, **{f"past_{k}_{i}": empty for k in ("key", "value")
                                       for i in range(2)}}
    return run(feed)["logits"][0, -1]


@pytest.mark.parametrize(("length", "prefill"), [(10, 4), (3, 4), (10, 1)])
def test_the_cached_generation_equals_a_full_recompute_without_a_cache(length: int,
                                                                       prefill: int) -> None:
    prompt = PROMPT[:length]
    found = generate(prompt, 6, layout(), prefill, lambda size: Runners(run, run))
    assert len(found.tokens) == 6 and found.tokens == found.picks
    for t, token in enumerate(found.tokens):
        want = recomputed(prompt + found.tokens[:t])
        got = found.logits[t][1]
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want)), t
        assert token == int(np.argmax(want)), t
    metrics = found.metrics()
    assert metrics["top1_agreement"] == 1.0 and metrics["sqnr_db"] is None
    assert metrics["generate"]["first_mismatch"] is None
    assert metrics["generate"]["prompt_steps"] == len(chunks(length, prefill))


def test_the_record_chain_is_compared_step_by_step_on_the_float_models_tokens() -> None:
    """A record whose logits differ from the float model's at one step: that step's token
    does not match, the others do (it is fed the float model's tokens), its SQNR is finite."""
    calls = []

    def noisy(feed: dict[str, Any]) -> dict[str, Any]:
        out = dict(run(feed))
        calls.append(1)
        if len(calls) == 5:  # step 2: after 3 prompt steps (2 + 4 + 4) and a decode step
            logits = out["logits"].copy()
            logits[0, -1, 5] = np.max(logits) + 1.0
            out["logits"] = logits
        return out

    found = generate(PROMPT, 5, layout(), 4, lambda size: Runners(run, noisy))
    metrics = found.metrics()
    assert metrics["generate"]["match"] == [True, True, False, True, True]
    assert metrics["generate"]["first_mismatch"] == 2 and metrics["top1_agreement"] == 0.8
    per_step = [s["logits"] for s in metrics["decode"]["sqnr_db"]]
    assert per_step[2] is not None and all(s is None for i, s in enumerate(per_step) if i != 2)


class Graph:
    """A graph's runner that knows its size (the feed must be of it)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, feed: dict[str, Any]) -> dict[str, Any]:
        assert feed["input_ids"].shape == (1, self.size)
        return run(feed)


@pytest.mark.parametrize(("prefill", "loads"), [(4, [4, 1]), (1, [1])])
def test_each_graph_is_loaded_when_its_steps_begin_the_prompt_graphs_dropped_first(
        prefill: int, loads: list[int]) -> None:
    """A process holds one graph's sessions at a time: the prompt graph's are loaded for the
    prompt's steps and no longer held when the token graph's are loaded (an LLM's sessions
    are hundreds of megabytes each); a prompt graph of one token serves the decode too."""
    import gc
    import weakref

    asked: list[int] = []
    held: list[weakref.ref[Graph]] = []

    def load(size: int) -> Runners:
        gc.collect()
        assert all(ref() is None for ref in held), "the prompt graph's runners are still held"
        asked.append(size)
        float_run, record_run = Graph(size), Graph(size)
        held.extend((weakref.ref(float_run), weakref.ref(record_run)))
        return Runners(float_run, record_run)

    found = generate(PROMPT, 4, layout(), prefill, load)
    assert asked == loads and len(found.tokens) == 4 and found.tokens == found.picks


def test_chunks_put_the_remainder_first() -> None:
    assert chunks(10, 4) == [2, 4, 4] and chunks(8, 4) == [4, 4] and chunks(3, 4) == [3]


def test_a_prompt_file_error_names_the_file_line_and_column() -> None:
    assert read_prompt("# a comment\n1 2, 3\n\n4  # four\n", "p.txt", 10) == [1, 2, 3, 4]
    with pytest.raises(UserError) as bad:
        read_prompt("1 2\n3 x7 4\n", "prompt.txt", 10)
    problem = bad.value.problems[0]
    assert (problem.file, problem.line, problem.column) == ("prompt.txt", 2, 3)
    assert "'x7'" in problem.message
    with pytest.raises(UserError) as big:
        read_prompt("1\n\n12\n", "prompt.txt", 10)
    assert big.value.problems[0].line == 3 and "0 to 9" in str(big.value)
    with pytest.raises(UserError, match="no token ids"):
        read_prompt("# nothing\n", "prompt.txt", 10)


def test_the_layout_derives_each_graphs_dimensions() -> None:
    found = layout()
    assert (found.tokens, found.context, found.axis, found.vocab) == (4, CONTEXT, 2, 512)
    dims = found.dims(1)
    assert dims["input_ids"] == [1, 1] and dims["attention_mask"] == [1, 1, 1, CONTEXT]
    assert dims["past_value_1"] == [1, 2, CONTEXT - 1, 32]
    assert found.outputs[0] == "logits" and len(found.outputs) == 5


def test_a_model_without_the_cache_names_says_which_to_declare() -> None:
    with pytest.raises(LayoutError) as missing:
        layout(io=IO).of(CacheIO(), {n: (s, "float32") for n, s in
                                     layout().dims(4).items()}, {"logits": (1, 4, 512)})
    assert missing.value.field == "cache.past" and "generate.cache" in missing.value.hint


def test_the_feed_pads_left_and_masks_padding_and_empty_cache_positions() -> None:
    """The additive mask of the tiny model's convention, and optimum's [1, C] one: a step of
    2 tokens in a graph of 4 after 3 cached tokens attends the 3 newest past positions and,
    causally, the 2 tokens; padding attends itself only; positions continue from 3."""
    chain = CacheChain(layout())
    chain.filled = 3
    feed = chain.feed([5, 6], 4)
    assert feed["input_ids"].tolist() == [[0, 0, 5, 6]]
    assert feed["position_ids"].tolist() == [[0, 0, 3, 4]]
    attends = (feed["attention_mask"][0, 0] == 0).nonzero()
    past = CONTEXT - 4
    assert sorted(zip(*(a.tolist() for a in attends), strict=True)) == sorted(
        [(0, past), (1, past + 1)] + [(t, c) for t in (2, 3) for c in range(past - 3, past)]
        + [(2, past + 2), (3, past + 2), (3, past + 3)])
    assert set(np.unique(feed["attention_mask"]).tolist()) == {-255.0, 0.0}
    assert feed["past_key_1"].shape == (1, 2, past, 32) and not feed["past_key_1"].any()
    shapes = {n: (tuple(d), "int64" if n == "attention_mask" else "float32")
              for n, d in layout().dims(4).items()}
    shapes["attention_mask"] = ((1, CONTEXT), "int64")
    optimum = CacheChain(CacheLayout.of(IO, shapes, {
        "logits": (1, 4, 512), **{f"present_{k}_{i}": (1, 2, CONTEXT, 32)
                                  for k in ("key", "value") for i in range(2)}}))
    optimum.filled = 3
    mask = optimum.feed([5, 6], 4)["attention_mask"]
    assert mask.dtype == np.int64 and mask[0].nonzero()[0].tolist() == [
        past - 3, past - 2, past - 1, past + 2, past + 3]
