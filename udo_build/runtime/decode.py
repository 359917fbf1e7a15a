"""Decoding: a run whose steps chain, each step's outputs feeding the next step's inputs.

    settings = DecodeSettings.from_params(params["decode"])
    problems = settings.problems(inputs, outputs, requested)   # what the model cannot do
    chain = Chain(settings, first_feed)
    for t in range(settings.steps):
        outputs = step(chain.feed)
        chain.advance(outputs, given_for_step_t_plus_1)

The cache is the vendor runtimes' fixed-size one (their LLM deployments keep a KV cache of a
fixed length and an attention mask; executorch's Qualcomm runner calls the layout "shift
pointer"): an output `feed` names goes to its input as it is when their shapes are equal; when
the output is longer along one axis (a present of P + 1 positions, a past of P) the input takes
its last P positions, dropping the oldest (a sliding window). `position` (an input) is advanced
by 1 each step; `mask` (an input) slides with the cache by one along its last axis, the entry
that enters taking the value of the last one (the current token's own, which attends: 0 in an
additive mask, 1 in a boolean one). `next_input` feeds an output as the next token's input
(as generation feeds the sampled token). Every other input keeps its value unless the step's
line of the input list gives one.

A chain is a value of its own so that the quantized model and the float reference each feed
their OWN outputs forward (the error a step makes reaches the next: that is what makes drift
visible), and so that a "generate N tokens after a prompt" run can drive it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

Shape = tuple[int, ...] | None
Problem = tuple[str, str, str | None]  # (field path under `decode`, message, hint)


@dataclass(frozen=True)
class DecodeSettings:
    """A decode run entry's `decode:` section (its input list is the run's)."""

    steps: int
    feed: tuple[tuple[str, str], ...]  # (output, input), in the recipe's order
    position: str | None = None
    mask: str | None = None
    next_input: tuple[tuple[str, str], ...] = ()

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("steps", "feed", "position", "mask", "next_input")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DecodeSettings:
        return cls(int(params["steps"]), tuple((str(k), str(v)) for k, v in params["feed"]),
                   params.get("position"), params.get("mask"),
                   tuple((str(k), str(v)) for k, v in params.get("next_input") or ()))

    def to_params(self) -> dict[str, Any]:
        return {"steps": self.steps, "feed": [list(p) for p in self.feed],
                "position": self.position, "mask": self.mask,
                "next_input": [list(p) for p in self.next_input]}

    @property
    def fed(self) -> tuple[tuple[str, str, str], ...]:
        """(field, output, input) of every output fed forward: the cache, then next_input."""
        return tuple(("feed", o, i) for o, i in self.feed) + tuple(
            ("next_input", o, i) for o, i in self.next_input)

    @property
    def derived(self) -> dict[str, str]:
        """The inputs a step after the first takes from the chain: input -> the field."""
        found = {i: f"{field}.{o}" for field, o, i in self.fed}
        found.update({n: f for f, n in (("position", self.position), ("mask", self.mask)) if n})
        return found

    def problems(self, inputs: Mapping[str, Shape], outputs: Mapping[str, Shape],
                 requested: Sequence[str] | None) -> list[Problem]:
        """What the model (input and output shapes by name) or the run's outputs (`requested`,
        None: not known) cannot do of these settings."""
        found: list[Problem] = []
        claimed: dict[str, str] = {}
        for field, output, name in self.fed:
            path = f"{field}.{output}"
            found += _claim(claimed, name, path)
            found += _fed_problems(path, output, name, inputs, outputs, requested)
        for field, name in (("position", self.position), ("mask", self.mask)):
            if name is None:
                continue
            found += _claim(claimed, name, field)
            if name not in inputs:
                found.append((field, f"'{name}' is not an input of the model",
                              "inputs: " + ", ".join(inputs)))
        return found


def _claim(claimed: dict[str, str], name: str, path: str) -> list[Problem]:
    first = claimed.setdefault(name, path)
    if first == path:
        return []
    return [(path, f"input '{name}' is already derived by decode.{first}",
             "each input comes from one place")]


def _fed_problems(path: str, output: str, name: str, inputs: Mapping[str, Shape],
                  outputs: Mapping[str, Shape], requested: Sequence[str] | None
                  ) -> list[Problem]:
    if output not in outputs:
        return [(path, f"'{output}' is not an output of the model",
                 "outputs: " + ", ".join(outputs))]
    if requested is not None and output not in requested:
        return [(path, f"the run's outputs do not include '{output}', which it feeds forward",
                 f"add '{output}' to the run's outputs")]
    if name not in inputs:
        return [(path, f"'{name}' is not an input of the model", "inputs: " + ", ".join(inputs))]
    problem = window_problem(outputs[output], inputs[name])
    if problem is None:
        return []
    return [(path, f"output '{output}' {_shape(outputs[output])} cannot feed input '{name}' "
                   f"{_shape(inputs[name])}: {problem}",
             "feed an output of the input's shape, or one longer along one axis (the cache "
             "axis: its newest positions are kept)")]


def window_problem(have: Shape, want: Shape) -> str | None:
    """Why an output of shape `have` cannot feed an input of shape `want` (None: it can, or a
    shape is not known here)."""
    if have is None or want is None or tuple(have) == tuple(want):
        return None
    if len(have) != len(want):
        return f"rank {len(have)} is not {len(want)}"
    longer = [a for a, (h, w) in enumerate(zip(have, want, strict=True)) if h != w]
    if len(longer) > 1:
        return f"they differ along {len(longer)} axes (a window slides along one)"
    axis = longer[0]
    if have[axis] < want[axis]:
        return f"axis {axis} is shorter ({have[axis]} < {want[axis]})"
    return None


def _shape(shape: Shape) -> str:
    return "[?]" if shape is None else "[" + ", ".join(map(str, shape)) + "]"


def window(value: Any, shape: Sequence[int]) -> Any:
    """`value` fitted to `shape`: itself, or its last positions along the one longer axis."""
    import numpy as np

    value = np.asarray(value)
    if tuple(value.shape) == tuple(shape):
        return value
    index = tuple(slice(h - w, h) for h, w in zip(value.shape, shape, strict=True))
    return value[index]


def slide(mask: Any) -> Any:
    """The mask of the next step: one position older along its last axis, the entry that
    enters a copy of the last (the current token's own)."""
    import numpy as np

    mask = np.asarray(mask)
    return np.concatenate([mask[..., 1:], mask[..., -1:]], axis=-1)


class Chain:
    """The feed of one chain's current step; `advance` makes the next from its outputs."""

    def __init__(self, settings: DecodeSettings, first: Mapping[str, Any]) -> None:
        self.settings = settings
        self.feed = dict(first)
        self.step = 0

    def advance(self, outputs: Mapping[str, Any], given: Mapping[str, Any] | None = None
                ) -> None:
        """The next step's feed: the fed outputs (fitted to their inputs' shapes), the position
        + 1, the mask slid, the inputs `given` for the next step, the others as they were."""
        s = self.settings
        feed = {**self.feed, **(given or {})}
        for _, output, name in s.fed:
            feed[name] = window(outputs[output], self.feed[name].shape).astype(
                self.feed[name].dtype, copy=True)
        if s.position is not None:
            feed[s.position] = self.feed[s.position] + 1
        if s.mask is not None:
            feed[s.mask] = slide(self.feed[s.mask])
        self.feed = feed
        self.step += 1
