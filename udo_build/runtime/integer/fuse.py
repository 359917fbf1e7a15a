"""A residual Add fused into the convolution that feeds it: one step, one pass per output block.

ResNet's blocks end in an Add (or Sum) of a convolution's 8-bit output and the block's input,
run as a lookup in the table of every pair of bytes (`eltwise.add`). When nothing else reads the
convolution's output and the plan does not return it, the two run as one step: the convolution
requantizes its accumulator and looks the result up with the other input's bytes in the same
pass (`LookedUp`, compiled: `passes.requantized`), so the convolution's output is never written
and read back. The numbers are the two steps' exactly: the same requantization, the same table,
and where the compiled pass does not run, the same numpy passes one after the other.

The step runs where the Add ran (the other input may be made after the convolution); the
convolution's inputs stay alive until then (the plan frees each after its last reader).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from . import conv as conv_kernel
from . import eltwise, passes
from .fixed import Requant, lookup

QStep = Any  # plan.QStep (plan.py runs this pass: it is not imported here, no cycle)


@dataclass(frozen=True, eq=False)
class LookedUp:
    """A requantization whose 8-bit result goes straight through a pair table with `other`:
    table[q << 8 | other] (`q_first`) or table[other << 8 | q]. It stands in for the Requant
    the convolution kernel applies."""

    requant: Requant
    table: np.ndarray
    other: np.ndarray
    q_first: bool
    sum: passes.SumForm | None = None  # the table computed instead (the same bytes)

    def apply(self, acc: np.ndarray, offset: np.ndarray | float | None = None, *,
              owned: bool = False) -> np.ndarray:
        r = self.requant
        if not r.wide:
            fast = passes.requantized(np.asarray(acc), r.factor, offset, (r.lo, r.hi),
                                      r.zero_point, r.dtype, (self.table, self.other,
                                                              self.q_first), self.sum)
            if fast is not None:
                return fast
        q = r.apply(acc, offset, owned=owned)
        return lookup(self.table, q, self.other) if self.q_first else lookup(
            self.table, self.other, q)


def conv_then_lookup(*args: Any, requant: Requant, table: np.ndarray, q_first: bool,
                     sum: passes.SumForm | None = None, **kwargs: Any) -> np.ndarray:
    """The integer convolution of args[:-1], its result looked up with args[-1] (or, with
    `sum`, the same bytes computed)."""
    *inputs, other = args
    return conv_kernel.conv(*inputs, requant=LookedUp(requant, table, other, q_first, sum),
                            **kwargs)


def fuse_residuals(steps: Sequence[QStep], keep: set[str]) -> list[QStep]:
    """`steps` with each residual Add of an integer convolution's output fused into it (see the
    module docstring); `keep`: the tensors the plan returns (never fused away)."""
    reads = Counter(name for step in steps for name in step.inputs if name)
    made = {name: i for i, step in enumerate(steps) for name in step.outputs if name}
    out: list[QStep | None] = list(steps)
    for j, step in enumerate(steps):
        if not _table_add(step):
            continue
        for side, name in enumerate(step.inputs):
            i = made.get(name)
            if i is None or name in keep or reads[name] != 1 or not _fusable(out[i]):
                continue
            first = out[i]
            assert first is not None
            other = step.inputs[1 - side]
            out[j] = replace(first, fn=conv_then_lookup, inputs=(*first.inputs, other),
                             outputs=step.outputs,
                             kwargs={**first.kwargs, "table": step.kwargs["table"],
                                     "q_first": side == 0,
                                     "sum": _sum_form(step, first, side)},
                             label=f"{first.label} + {step.label}")
            out[i] = None
            break
    return [s for s in out if s is not None]


def _sum_form(add: QStep, conv: QStep, side: int) -> passes.SumForm | None:
    """The Add's table as its arithmetic (`passes.sum_form`: checked against every pair), the
    convolution's output its input `side`; None where it is not the same bytes, or cannot be
    checked here (no compiled library)."""
    kwargs = add.kwargs
    return passes.sum_form(kwargs["table"], kwargs["requant"], kwargs["zero_points"],
                           conv.kwargs["requant"].dtype, side == 0)


def _table_add(step: QStep) -> bool:
    return (step.integer and step.fn is eltwise.add and step.kwargs.get("table") is not None
            and len(step.inputs) == 2 and step.inputs[0] != step.inputs[1]
            and all(step.inputs))


def _fusable(step: QStep | None) -> bool:
    """An integer Conv with one output, 8-bit, its requantization not wide."""
    if step is None or not step.integer or step.fn is not conv_kernel.conv:
        return False
    requant = step.kwargs.get("requant")
    return (isinstance(requant, Requant) and not requant.wide and requant.dtype.itemsize == 1
            and len([o for o in step.outputs if o]) == 1)
