"""The op package API of the emulator: the Python analog of the vendor's op-package macros.

    package = OpPackage("SoftplusPackage")

    @package.op("Softplus", cost=Cost.FAST)                 # the generic (float) implementation
    def softplus(x, *, beta=1.0): ...

    @package.op("Softplus", cost=Cost.FREE, types=("uint8",))   # a typed one, cheaper
    def softplus_u8(x, *, beta=1.0): ...

    package.param_order("Softplus", ("beta", False, 1.0))   # name, mandatory, default

An implementation is a plain function: its inputs positionally (numpy arrays, in definition
order), its parameters as keyword-only arguments; it returns an array, or a tuple for several
outputs. Registration only records metadata (op, cost, flags, the tensor types it accepts); it
rejects duplicates and bad signatures. `select` picks the cheapest implementation whose types
match the inputs, with the generic one (types=None, works on float values) as the fallback; a
missing op's error lists what the package has.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Any

Kernel = Callable[..., Any]


class Cost(IntEnum):
    """How expensive an implementation is; the cheapest matching one is chosen."""

    FREE = 0
    FAST = 1
    SNAIL = 2
    GLACIAL = 3


class Flags(IntFlag):
    NONE = 0
    IS_CONST = 1  # the op's output is a constant (folded at prepare)
    INHIBIT_CONST_PROP = 2  # never fold this op, even on constant inputs
    RESOURCE_HVX = 4  # runs on the vector units


class OpPackageError(Exception):
    """A mistake in registering or looking up implementations (a bug in a kernels module)."""


@dataclass(frozen=True)
class Impl:
    op: str
    fn: Kernel
    cost: Cost
    flags: Flags
    types: tuple[str, ...] | None  # dtypes of the inputs it accepts; None: generic (float)

    @property
    def generic(self) -> bool:
        return self.types is None

    def matches(self, input_types: Sequence[str]) -> bool:
        if self.types is None:
            return True
        if len(self.types) == 1:  # one type for every input
            return all(t == self.types[0] for t in input_types)
        return tuple(input_types[: len(self.types)]) == self.types

    def describe(self) -> str:
        types = "generic" if self.types is None else ",".join(self.types)
        return f"{self.fn.__module__}.{self.fn.__qualname__} ({types}, {self.cost.name})"


@dataclass(frozen=True)
class Param:
    name: str
    mandatory: bool
    default: Any = None


class OpPackage:
    def __init__(self, name: str) -> None:
        if not name or not name.replace("_", "a").isalnum():
            raise OpPackageError(f"op package name {name!r} is not an identifier")
        self.name = name
        self._impls: dict[str, list[Impl]] = {}
        self._params: dict[str, tuple[Param, ...]] = {}
        self._rules: list[Any] = []
        self._cpu_only: set[str] = set()

    def __repr__(self) -> str:
        return f"OpPackage({self.name!r}, ops={sorted(self._impls)})"

    # -- registration ---------------------------------------------------------------------------

    def op(self, name: str, *, cost: Cost = Cost.FAST, flags: Flags = Flags.NONE,
           types: Sequence[str] | None = None) -> Callable[[Kernel], Kernel]:
        """Register the decorated function as an implementation of op `name`."""
        def decorate(fn: Kernel) -> Kernel:
            self.add(Impl(name, fn, Cost(cost), Flags(flags),
                          None if types is None else tuple(types)))
            return fn
        return decorate

    def add(self, impl: Impl) -> None:
        _check_signature(self.name, impl)
        existing = self._impls.setdefault(impl.op, [])
        for other in existing:
            if other.types == impl.types:
                raise OpPackageError(
                    f"{self.name}::{impl.op} has two implementations for the same types: "
                    f"{other.describe()} and {impl.describe()}")
        existing.append(impl)

    def param_order(self, op: str, *params: tuple[str, bool, Any] | Param) -> None:
        """The parameters of `op` in order, each (name, mandatory, default)."""
        order = tuple(p if isinstance(p, Param) else Param(*p) for p in params)
        names = [p.name for p in order]
        if len(set(names)) != len(names):
            raise OpPackageError(f"{self.name}::{op}: a parameter is listed twice: {names}")
        self._params[op] = order

    def rule(self, rule: Any) -> Any:
        """Register an optimization rule (a `udo_build.rewrite.rules.Rule` value) that the
        graph compiler applies with the default package's rules; names are unique."""
        name = getattr(rule, "name", None)
        if not isinstance(name, str) or not name:
            raise OpPackageError(f"{self.name}: a rule needs a name, got {rule!r}")
        if any(r.name == name for r in self._rules):
            raise OpPackageError(f"{self.name}: two rules are named {name!r}")
        self._rules.append(rule)
        return rule

    # -- lookup ---------------------------------------------------------------------------------

    def rules(self) -> list[Any]:
        """The optimization rules registered with `rule`, in registration order."""
        return list(self._rules)

    def ops(self) -> list[str]:
        return sorted(self._impls)

    def has(self, op: str) -> bool:
        """Whether the package implements `op` (without sorting every op, as `ops` does)."""
        return op in self._impls

    def impls(self, op: str) -> list[Impl]:
        return list(self._impls.get(op, ()))

    def cpu_only(self, *ops: str) -> None:
        """Say that the HTP has no implementation of these ops: a graph using one runs it on the
        CPU runtime (a subnet of its own; see udo_build.compiler.partition)."""
        unknown = sorted(set(ops) - set(self._impls))
        if unknown:
            raise OpPackageError(f"{self.name}: cpu_only names ops it does not have: {unknown}")
        self._cpu_only.update(ops)

    def on_htp(self, op: str) -> bool:
        """Whether the HTP runs `op`: the package has it, not marked `cpu_only`."""
        return op in self._impls and op not in self._cpu_only

    def params(self, op: str) -> tuple[Param, ...]:
        return self._params.get(op, ())

    def select(self, op: str, input_types: Sequence[str]) -> Impl:
        """The cheapest implementation accepting these input types (generic as the fallback)."""
        impls = self._impls.get(op)
        if not impls:
            raise OpPackageError(
                f"op package {self.name} has no implementation of {op}; it has: "
                + (", ".join(self.ops()) or "nothing"))
        typed = [i for i in impls if not i.generic and i.matches(input_types)]
        if typed:
            return min(typed, key=lambda i: (i.cost, len(i.types or ())))
        generic = [i for i in impls if i.generic]
        if generic:
            return generic[0]
        raise OpPackageError(
            f"{self.name}::{op} has no implementation for inputs of types "
            f"{', '.join(input_types)}; it has: " + "; ".join(i.describe() for i in impls))

    def merge(self, other: OpPackage) -> None:
        """Add every implementation and parameter order of `other` (duplicates are errors)."""
        for impls in other._impls.values():
            for impl in impls:
                self.add(impl)
        self._params.update(other._params)
        for rule in other._rules:
            self.rule(rule)


def _check_signature(package: str, impl: Impl) -> None:
    where = f"{package}::{impl.op} ({impl.fn.__module__}.{impl.fn.__qualname__})"
    if not callable(impl.fn):
        raise OpPackageError(f"{where}: an implementation must be a function")
    try:
        sig = inspect.signature(impl.fn)
    except (TypeError, ValueError):
        return  # builtins and ufuncs: nothing to check
    kinds = [p.kind for p in sig.parameters.values()]
    positional = [k for k in kinds if k in (inspect.Parameter.POSITIONAL_ONLY,
                                             inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if not positional and inspect.Parameter.VAR_POSITIONAL not in kinds:
        raise OpPackageError(f"{where}: takes no inputs; inputs come first, positionally")
    for p in sig.parameters.values():
        optional_input = p.default is None
        if (p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is not p.empty
                and not optional_input):
            raise OpPackageError(
                f"{where}: parameter '{p.name}' has a default but is positional; make the op's "
                "parameters keyword-only (put them after a '*'); only optional inputs default "
                "to None")
