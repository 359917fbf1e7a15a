"""Generation: a prompt prefilled, then N tokens decoded greedily, the KV cache fed forward.

    settings = GenerateSettings.from_params(params["generate"])
    layout = CacheLayout.of(settings.cache, inputs, outputs)   # the model's cache I/O
    prompt = read_prompt(text, file, layout.vocab)              # token ids; errors at file:line
    found = generate(prompt, settings.tokens, layout, size, load)  # load(S): Runners of
    found.metrics()                                             # graph S; the run's metrics

The model's cache I/O convention (`CacheIO`, every name declarable under a run's
`generate.cache`; the defaults are optimum's ONNX decoder exports):

    inputs   input_ids [1, S], position_ids [1, S] (integers)
             attention_mask [1, 1, S, C]: additive (0 attends, `masked` does not), or [1, C]:
                 optimum's (1 attends, 0 does not; the past's C - S positions, then the new S)
             past_key_values.<layer>.key / .value: [.., C - S, ..] (the cache axis: the one
                 axis where a past and its present differ)
    outputs  logits [1, S, V]
             present.<layer>.key / .value: [.., C, ..], the past with this step's S appended
             (`past` and `present` are templates with `{layer}` (0, 1, ...) and `{kind}`
             (key, value))

A graph of S new tokens at context C has its past at C - S; the model's own S and C come from
its static shapes, and a graph of another S (a prompt graph AR-128, a token graph AR-1) has
the dimensions `layout.dims(S)`. The cache is the vendor runtimes' fixed-size one (udo_build.
runtime.decode): a present's newest C - S' positions become the next step's past, the newest
last; the mask attends the newest `filled` past positions (the tokens so far) and, causally,
the step's own tokens; position_ids count the tokens so far.

The prompt (L tokens) goes through the prompt graph of size P in ceil(L / P) steps, the first
left-padded (padding attends only itself and is masked for every token after it); the last
prompt step's last logits give the first new token, and each of the N - 1 decode steps (AR-1)
feeds the previous token. Greedy: a token is its logits' argmax (the first of equal values).

Two chains run side by side, each feeding its OWN cache forward: the float model's, whose
tokens are the generation, and the record's (int8 or fp16), fed the float model's tokens so
that every step compares logits over the same text. The record's own pick at each step (its
argmax) agrees with the float model's up to `first_mismatch`: that far a free-running record
generates the same text. The graphs run one after the other, the prompt graph's steps, then
the token graph's: `load(S)` gives both chains' runners of the graph of S tokens when its steps
begin (the token graph's also when no token is decoded: the run reports both records), and
those of the prompt graph are dropped before the token graph's are loaded (a process never
holds both graphs' sessions: an LLM's are hundreds of megabytes each). Times (tokens per
second) are measured here but never enter the metrics (an artifact is the same bytes on every
machine): `Speed` says them in words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from ..errors import UserError
from .decode import window

Shape = tuple[int, ...] | None
Runner = Callable[[dict[str, Any]], Mapping[str, Any]]


class Runners(NamedTuple):
    """The step functions of one graph (by its size), for both chains."""

    float: Runner
    record: Runner


Loader = Callable[[int], Runners]  # the runners of the graph of S new tokens
KINDS = ("key", "value")


class LayoutError(ValueError):
    """The model does not follow the cache convention: (field under `generate`, message,
    hint)."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.field, self.message, self.hint = field, message, hint


@dataclass(frozen=True)
class CacheIO:
    """The names of a model's generation inputs and outputs (see the module docstring)."""

    input_ids: str = "input_ids"
    position_ids: str = "position_ids"
    attention_mask: str = "attention_mask"
    logits: str = "logits"
    past: str = "past_key_values.{layer}.{kind}"
    present: str = "present.{layer}.{kind}"
    masked: float = -255.0  # an additive mask's "does not attend" (16-bit activations hold it)

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> CacheIO:
        return cls(**{k: (float(v) if k == "masked" else str(v))
                      for k, v in (params or {}).items()})

    def to_params(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class GenerateSettings:
    """A run entry's `generate:` section (its prompt file is an input of the run, not a
    parameter: its bytes enter the key, never its path)."""

    tokens: int  # new tokens
    prefill: int | None = None  # tokens per prompt step; None: the model's own
    cache: CacheIO = CacheIO()

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("tokens", "prefill", "cache")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> GenerateSettings:
        prefill = params.get("prefill")
        return cls(int(params["tokens"]), None if prefill is None else int(prefill),
                   CacheIO.from_params(params.get("cache")))

    def to_params(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "prefill": self.prefill, "cache": self.cache.to_params()}


@dataclass(frozen=True)
class CacheLayout:
    """The cache convention resolved against one model's shapes."""

    io: CacheIO
    tokens: int  # the model's own S
    context: int  # C
    axis: int  # the cache axis of every past and present
    pairs: tuple[tuple[str, str], ...]  # (present, past), layer by layer, key then value
    shapes: Mapping[str, tuple[int, ...]] = field(repr=False)  # the inputs' own
    dtypes: Mapping[str, str] = field(repr=False)
    vocab: int = 0

    @classmethod
    def of(cls, io: CacheIO, inputs: Mapping[str, tuple[Shape, str]],
           outputs: Mapping[str, Shape]) -> CacheLayout:
        """The layout of a model with these inputs ((shape, dtype) by name) and outputs (shape
        by name); a LayoutError when it does not follow `io`."""
        ids = _static(io.input_ids, "input_ids", inputs, "an input")
        if len(ids) != 2 or ids[0] != 1:
            raise LayoutError("cache.input_ids", f"input '{io.input_ids}' is {list(ids)}, not "
                              "[1, S]", "generation runs one sequence: batch 1")
        logits = _static(io.logits, "logits", outputs, "an output")
        if len(logits) != 3 or logits[0] != 1 or logits[1] not in (1, ids[1]):
            raise LayoutError("cache.logits", f"output '{io.logits}' is {list(logits)}, not "
                              f"[1, {ids[1]}, V]", "the logits of the step's tokens (or of its "
                              "last), batch 1")
        pairs = _pairs(io, inputs, outputs)
        past, present = _static(pairs[0][1], "past", inputs, "an input"), outputs[pairs[0][0]]
        axis, context = _cache_axis(pairs[0], past, present, ids[1])
        mask = _static(io.attention_mask, "attention_mask", inputs, "an input")
        if tuple(mask) not in ((1, 1, ids[1], context), (1, context)):
            raise LayoutError("cache.attention_mask", f"input '{io.attention_mask}' is "
                              f"{list(mask)}", f"[1, 1, {ids[1]}, {context}] (additive) or "
                              f"[1, {context}] (1 attends)")
        _static(io.position_ids, "position_ids", inputs, "an input")
        known = {io.input_ids, io.position_ids, io.attention_mask, *(p for _, p in pairs)}
        extra = sorted(set(inputs) - known)
        if extra:
            raise LayoutError("cache", f"the model has inputs generation does not feed: "
                              f"{', '.join(extra)}", "declare the cache's names under "
                              "generate.cache, or export the model without them")
        return cls(io, ids[1], context, axis, pairs,
                   {n: tuple(s) for n, (s, _) in inputs.items() if s is not None},
                   {n: d for n, (_, d) in inputs.items()}, int(logits[-1]))

    @property
    def outputs(self) -> list[str]:
        """What every step needs of the model: the logits and the presents."""
        return [self.io.logits, *(present for present, _ in self.pairs)]

    def dims(self, size: int) -> dict[str, list[int]]:
        """The input dimensions of the graph of `size` new tokens at this context."""
        io, c = self.io, self.context
        dims = {io.input_ids: [1, size], io.position_ids: [1, size],
                io.attention_mask: [1, 1, size, c] if self.mask_rank == 4 else [1, c]}
        for _, past in self.pairs:
            shape = list(self.shapes[past])
            shape[self.axis] = c - size
            dims[past] = shape
        return dims

    @property
    def mask_rank(self) -> int:
        return len(self.shapes[self.io.attention_mask])


def _static(name: str, field_name: str, tensors: Mapping[str, Any], what: str
            ) -> tuple[int, ...]:
    if name not in tensors:
        raise LayoutError(f"cache.{field_name}", f"'{name}' is not {what} of the model",
                          f"name it under generate.cache.{field_name}; the model's: "
                          + ", ".join(tensors))
    shape = tensors[name][0] if what == "an input" else tensors[name]
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise LayoutError(f"cache.{field_name}", f"'{name}' has no static shape",
                          "generation derives its graphs' dimensions from the model's own")
    return tuple(shape)


def _pairs(io: CacheIO, inputs: Mapping[str, Any], outputs: Mapping[str, Any]
           ) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    while True:
        layer = len(pairs) // 2
        try:
            names = [(io.present.format(layer=layer, kind=k),
                      io.past.format(layer=layer, kind=k)) for k in KINDS]
        except (KeyError, IndexError, ValueError) as exc:
            raise LayoutError("cache", f"a cache name template does not format: {exc!r}",
                              "use {layer} and {kind} only (write other braces twice)") from None
        if names[0][1] not in inputs:
            break
        for present, past in names:
            if past not in inputs:
                raise LayoutError("cache.past", f"'{past}' is not an input of the model", "")
            if present not in outputs:
                raise LayoutError("cache.present", f"'{present}' is not an output of the model",
                                  "outputs: " + ", ".join(outputs))
        pairs += names
    if not pairs:
        first = io.past.format(layer=0, kind="key")
        raise LayoutError("cache.past", f"the model has no cache input '{first}'",
                          "declare the model's cache names under generate.cache.past and "
                          ".present ({layer} and {kind} placeholders); inputs: "
                          + ", ".join(inputs))
    return tuple(pairs)


def _cache_axis(pair: tuple[str, str], past: tuple[int, ...], present: Shape, size: int
                ) -> tuple[int, int]:
    """(the cache axis, the context) from a past and its present at the model's own S."""
    if present is None or len(present) != len(past):
        raise LayoutError("cache.present", f"'{pair[0]}' has no static shape of the rank of "
                          f"'{pair[1]}'", "the present is the past with the new tokens")
    axes = [a for a, (p, q) in enumerate(zip(past, present, strict=True)) if p != q]
    if len(axes) != 1 or present[axes[0]] - past[axes[0]] != size:
        raise LayoutError("cache.present", f"'{pair[0]}' {list(present)} is not '{pair[1]}' "
                          f"{list(past)} with {size} positions more along one axis",
                          "the present is the past with the step's new tokens appended")
    return axes[0], int(present[axes[0]])


def read_prompt(text: str, file: str, vocab: int) -> list[int]:
    """A prompt file's token ids: integers separated by white space or commas, `#` to the end
    of a line a comment; each in [0, vocab). A UserError names the file, line and column."""
    ids: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        ids += token_ids(line, file, number, vocab, "generate.prompt")
    if not ids:
        raise UserError("the prompt holds no token ids", file=file, field="generate.prompt",
                        hint="write the prompt's token ids, separated by spaces")
    return ids


def token_ids(line: str, file: str, number: int, vocab: int, field: str) -> list[int]:
    """The token ids of one line of a token file (white space or commas between them, `#` to
    the end of the line a comment); a UserError names the file, line, column and `field`."""
    ids: list[int] = []
    column = 0
    for word in line.split("#", 1)[0].replace(",", " ").split(" "):
        column += len(word) + 1
        if not word.strip():
            continue
        at = column - len(word)
        word = word.strip()
        if not word.isdigit() or int(word) >= vocab:
            raise UserError(f"'{word}' is not a token id of the model", file=file, line=number,
                            column=at, field=field,
                            hint=f"token ids are integers from 0 to {vocab - 1}")
        ids.append(int(word))
    return ids


def check_length(prompt: int, tokens: int, layout: CacheLayout, prefill: int, file: str
                 ) -> None:
    """A UserError when the prompt and the new tokens do not fit the model's context (or the
    prompt graph has no past)."""
    if not 1 <= prefill < layout.context:
        raise UserError(f"a prompt graph of {prefill} tokens leaves no past at context "
                        f"{layout.context}", field="generate.prefill",
                        hint=f"1 to {layout.context - 1} tokens per prompt step")
    if prompt + tokens - 1 > layout.context:
        raise UserError(f"the prompt's {prompt} tokens and {tokens} new ones need "
                        f"{prompt + tokens - 1} positions; the model's context is "
                        f"{layout.context}", file=file, field="generate.tokens",
                        hint=f"at most {layout.context + 1 - prompt} new tokens after this "
                        "prompt")


class CacheChain:
    """One model's chain: its cache (each past, fed from the last step's presents) and how
    many of its newest positions hold tokens (also the next token's position)."""

    def __init__(self, layout: CacheLayout) -> None:
        self.layout = layout
        self.past: dict[str, Any] = {}
        self.filled = 0

    def feed(self, chunk: Sequence[int], size: int) -> dict[str, Any]:
        """The inputs of a step of `chunk`'s tokens in the graph of `size` (left-padded)."""
        import numpy as np

        io, dims = self.layout.io, self.layout.dims(size)
        pad = size - len(chunk)
        ids = np.zeros((1, size), np.int64)
        ids[0, pad:] = chunk
        positions = np.zeros((1, size), np.int64)
        positions[0, pad:] = self.filled + np.arange(len(chunk))
        dtypes = self.layout.dtypes
        feed = {io.input_ids: ids.astype(dtypes[io.input_ids]),
                io.position_ids: positions.astype(dtypes[io.position_ids]),
                io.attention_mask: self._mask(size, pad).astype(dtypes[io.attention_mask])}
        for _, past in self.layout.pairs:
            shape = dims[past]
            value = self.past.get(past)
            feed[past] = (np.zeros(shape, dtypes[past]) if value is None else
                          window(value, shape).astype(dtypes[past], copy=True))
        return feed

    def _mask(self, size: int, pad: int) -> Any:
        import numpy as np

        context, past = self.layout.context, self.layout.context - size
        if self.layout.mask_rank == 2:
            mask = np.zeros((1, context))
            mask[0, past - self.filled:past] = 1
            mask[0, past + pad:] = 1
            return mask
        mask = np.full((1, 1, size, context), self.layout.io.masked, np.float32)
        for t in range(size):
            if t < pad:
                mask[0, 0, t, past + t] = 0.0  # padding attends itself only
                continue
            mask[0, 0, t, past - self.filled:past] = 0.0
            mask[0, 0, t, past + pad:past + t + 1] = 0.0
        return mask

    def advance(self, outputs: Mapping[str, Any], count: int) -> None:
        """After a step of `count` tokens: its presents are the next step's past."""
        import numpy as np

        self.past = {past: np.asarray(outputs[present]) for present, past in self.layout.pairs}
        self.filled += count


class Speed(NamedTuple):
    """Tokens per second of one chain: the prompt's steps and the decode steps (AR-1)."""

    prompt_tokens: int
    prompt_seconds: float
    decode_tokens: int  # the decode steps (the first new token comes from the prompt's)
    decode_seconds: float

    def describe(self) -> str:
        return (f"prefill {_rate(self.prompt_tokens, self.prompt_seconds)} tok/s, decode "
                f"{_rate(self.decode_tokens, self.decode_seconds)} tok/s")


def _rate(tokens: int, seconds: float) -> str:
    return "-" if tokens == 0 or seconds <= 0 else f"{tokens / seconds:.1f}"


@dataclass
class Generation:
    """What a generation found: the float model's tokens, the record's pick at each step,
    each step's last logits of both, and how long each chain's steps took."""

    prompt: list[int]
    prefill: int
    tokens: list[int] = field(default_factory=list)
    picks: list[int] = field(default_factory=list)
    logits: list[tuple[Any, Any]] = field(default_factory=list)  # (record's, float's)
    seconds: dict[str, list[float]] = field(default_factory=lambda: {
        "record": [0.0, 0.0], "float": [0.0, 0.0]})

    def speed(self, chain: str) -> Speed:
        prompt, decode = self.seconds[chain]
        return Speed(len(self.prompt), prompt, max(0, len(self.tokens) - 1), decode)

    def metrics(self) -> dict[str, Any]:
        """The run's metrics (udo_build.runtime.metrics): over the steps' last logits, SQNR,
        worst error and top-1 agreement (the token match); `decode`, the logits' SQNR per
        step; `generate`, the tokens."""
        from .metrics import Agreement, decode_metrics, sqnr_db

        agreement = Agreement()
        steps = []
        for got, want in self.logits:
            agreement.add({"logits": got}, {"logits": want})
            steps.append({"logits": sqnr_db(got, want)})
        match = [p == t for p, t in zip(self.picks, self.tokens, strict=True)]
        return {**agreement.metrics(), "decode": decode_metrics(steps), "generate": {
            "prompt_tokens": len(self.prompt), "prefill": self.prefill,
            "prompt_steps": len(chunks(len(self.prompt), self.prefill)),
            "new_tokens": len(self.tokens), "tokens": list(self.tokens),
            "record_tokens": list(self.picks), "match": match,
            "token_match": sum(match) / len(match),
            "first_mismatch": match.index(False) if False in match else None}}


def chunks(length: int, size: int) -> list[int]:
    """The prompt's steps: token counts, the first the remainder (left-padded)."""
    count = -(-length // size)
    return [length - size * (count - 1)] + [size] * (count - 1)


def generate(prompt: Sequence[int], tokens: int, layout: CacheLayout, prefill: int,
             load: Loader, clock: Callable[[], float] = time.perf_counter) -> Generation:
    """Prefill `prompt` and decode `tokens` new tokens greedily on both chains (see the module
    docstring); `load(size)`: both chains' runners of the graph of `size` tokens (`prefill`,
    then 1), asked for when that graph's steps begin, the earlier graph's dropped first."""
    import numpy as np

    found = Generation(list(prompt), prefill)
    chains = {"float": CacheChain(layout), "record": CacheChain(layout)}
    runners: dict[str, Runner] = {}

    def step(chunk: Sequence[int], size: int, phase: int) -> None:
        last = {}
        for name, chain in chains.items():
            started = clock()
            outputs = runners[name](chain.feed(chunk, size))
            found.seconds[name][phase] += clock() - started
            chain.advance(outputs, len(chunk))
            last[name] = np.asarray(outputs[layout.io.logits], np.float32)[0, -1].copy()
        found.logits.append((last["record"], last["float"]))
        found.tokens.append(int(np.argmax(last["float"])))
        found.picks.append(int(np.argmax(last["record"])))

    runners.update(load(prefill)._asdict())
    start = 0
    for count in chunks(len(prompt), prefill):
        step(prompt[start:start + count], prefill, 0)
        start += count
        if start < len(prompt):  # only the prompt's last logits choose a token
            del found.logits[-1], found.tokens[-1], found.picks[-1]
    if prefill != 1:  # the prompt graph's runners go before the token graph's come
        runners.clear()
        runners.update(load(1)._asdict())
    for _ in range(tokens - 1):
        step([found.tokens[-1]], 1, 1)
    return found
