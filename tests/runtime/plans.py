"""What the float plan's rewrites are checked against: the same model's plan with every tensor
requested, where no rewrite applies (a requested tensor is yielded as it is made)."""

from __future__ import annotations

import numpy as np

from udo_build.ir import Model
from udo_build.runtime.float_session import Session


def every_tensor(model: Model) -> tuple[Session, tuple[str, ...]]:
    """A fresh session of `model` and the names of all its tensors, for `plain`."""
    return Session(model), tuple(n for node in model.graph.nodes for n in node.outputs)


def plain(session: Session, names: tuple[str, ...], x: np.ndarray,
          outputs: list[str]) -> dict[str, np.ndarray]:
    """`outputs` of the plan that requests every tensor (`names`), fed x."""
    found = session.run({"x": x}, list(names))
    return {name: found[name] for name in outputs}
