"""Calibration over token sequences: every input of an LLM's graph made by the model itself.

    sequences = read_sequences(text, file, layout)        # token ids, one sequence per line
    for feed in sequence_feeds(sequences, layout, run):   # run(feed) -> the step's outputs
        ...                                               # one calibration input per step

A decoder with a KV cache takes, besides its token ids, positions, a mask and the past keys
and values of every layer. Stand-ins for the past (random values, as an input list of made-up
tensors gives) do not have the ranges of the keys and values the model makes, and encodings
calibrated on them clip the real ones or waste their steps on values that never come: on the
small Llama of bench/llm.py at 16-bit activations and 8-bit weights, the generation's logits
were 11.3 dB from the float model after calibrating on stand-ins, and 30.7 dB after
calibrating on the model's own chains. So each sequence goes through the float model the way a
generation prefills its prompt (udo_build.runtime.generate): in steps of the model's own S
tokens, the first left-padded, each step's presents fed forward as the next step's past, the
mask and the positions advanced; every step's feed is one calibration input. A sequence longer
than S gives steps with a real past; one of at most S tokens gives one step with none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import UserError
from .generate import CacheChain, CacheLayout, chunks, token_ids

FIELD = "quantize.sequences"


def read_sequences(text: str, file: str, layout: CacheLayout) -> list[list[int]]:
    """The token id sequences of a sequences file: one per line, ids separated by white space
    or commas, `#` to the end of a line a comment, blank lines skipped. A UserError names the
    file, line and column of an id outside the vocabulary, or the line of a sequence longer
    than the model's context."""
    found: list[list[int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        ids = token_ids(line, file, number, layout.vocab, FIELD)
        if not ids:
            continue
        if len(ids) > layout.context:
            raise UserError(f"a sequence of {len(ids)} tokens does not fit the model's context "
                            f"of {layout.context}", file=file, line=number, field=FIELD,
                            hint=f"at most {layout.context} tokens per line: split it")
        found.append(ids)
    if not found:
        raise UserError("the sequences file holds no token ids", file=file, field=FIELD,
                        hint="write one sequence of token ids per line, separated by spaces")
    return found


def step_count(sequences: Sequence[Sequence[int]], size: int) -> int:
    """How many calibration inputs the sequences give at the model's own S = `size`."""
    return sum(len(chunks(len(s), size)) for s in sequences)


def sequence_feeds(sequences: Sequence[Sequence[int]], layout: CacheLayout,
                   run: Callable[[dict[str, Any]], Mapping[str, Any]]
                   ) -> Iterator[dict[str, Any]]:
    """Each step's feed, sequence by sequence (see the module docstring); `run(feed)` gives
    the step's outputs, of which the presents are fed forward."""
    size = layout.tokens
    for sequence in sequences:
        chain = CacheChain(layout)
        start = 0
        for count in chunks(len(sequence), size):
            feed = chain.feed(sequence[start:start + count], size)
            start += count
            yield feed
            if start < len(sequence):  # the last step's presents feed nothing
                chain.advance(run(feed), count)
