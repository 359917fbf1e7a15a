"""The kernels stub: a Python module in the emulator's op-package API for the ops that have no
numpy kernels yet, each raising NotImplementedError until written.

It is made from the generic op definitions (before per-backend resolution) so that every
backend's package carries the same module; datatypes that differ per backend are listed per
backend in the docstrings.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from ..opdef.model import OpDef, ParamDef, TensorDef
from ..opdef.vocab import BACKEND_SPECIFIC
from .names import docstring, one_line, py_literal, py_names, snake
from .tables import dtype

WIDTH = 96


@dataclass(frozen=True)
class StubOp:
    name: str
    signature: str  # def softplus(x: np.ndarray, *, beta: float = 1.0) -> np.ndarray:
    doc: tuple[str, ...]  # docstring lines, escaped, not indented for the function body
    config: str


def stub_ops(ops: list[tuple[OpDef, str]]) -> tuple[StubOp, ...]:
    """(generic op, config file name) pairs -> the stub's functions, names unique."""
    fns = py_names(snake(op.name) for op, _ in ops)
    return tuple(_stub(op, fn, config) for (op, config), fn in zip(ops, fns, strict=True))


def _stub(op: OpDef, fn: str, config: str) -> StubOp:
    names = py_names([t.name for t in op.inputs] + [p.name for p in op.params])
    inputs, params = names[:len(op.inputs)], names[len(op.inputs):]
    args = _input_args(op.inputs, inputs)
    if params and not args[-1].startswith("*"):
        args.append("*")
    args += [_param_arg(p, n) for p, n in zip(op.params, params, strict=True)]
    if len(op.outputs) == 1 and not op.outputs[0].repeated:
        returns = "np.ndarray"
    elif any(t.repeated for t in op.outputs):
        returns = "tuple[np.ndarray, ...]"
    else:
        returns = "tuple[" + ", ".join("np.ndarray" for _ in op.outputs) + "]"
    return StubOp(op.name, _signature(fn, args, returns), _doc(op, inputs, params), config)


def _signature(fn: str, args: list[str], returns: str) -> str:
    """`def fn(args) -> returns:` on one line, or one argument per line when too long."""
    line = f"def {fn}({', '.join(args)}) -> {returns}:"
    if len(line) <= WIDTH:
        return line
    return f"def {fn}(\n" + "".join(f"    {a},\n" for a in args) + f") -> {returns}:"


def _input_args(inputs: tuple[TensorDef, ...], names: list[str]) -> list[str]:
    """Inputs positionally: a Repeated last input as *args, trailing optional ones default to
    None (the emulator's rule for optional inputs)."""
    args = []
    for i, (t, name) in enumerate(zip(inputs, names, strict=True)):
        rest = inputs[i:]
        if t.repeated and i == len(inputs) - 1:
            args.append(f"*{name}: np.ndarray")
        elif t.repeated:
            args.append(f"{name}: list[np.ndarray]")
        elif all(not r.mandatory and not r.repeated for r in rest):
            args.append(f"{name}: np.ndarray | None = None")
        else:
            args.append(f"{name}: np.ndarray")
    return args


def _param_arg(p: ParamDef, name: str) -> str:
    datatypes = _concrete(p)
    if p.rank != "SCALAR":
        annotation = "np.ndarray | list"
    elif p.enumeration:
        annotation = "int"
    else:
        annotation = dtype(datatypes[0]).py if datatypes else "float"
    if p.mandatory:
        return f"{name}: {annotation}"
    if p.default is None:
        return f"{name}: {annotation} | None = None"
    return f"{name}: {annotation} = {py_literal(p.default.value)}"


def _concrete(item: TensorDef | ParamDef) -> tuple[str, ...]:
    """The generic datatypes, or (BACKEND_SPECIFIC) the first backend's."""
    if BACKEND_SPECIFIC not in item.datatypes:
        return item.datatypes
    return next((o.datatypes for o in item.overrides if o.datatypes), ())


def datatypes_text(item: TensorDef | ParamDef, backends: tuple[str, ...]) -> str:
    """`FLOAT_32`, or per backend when they differ: `CPU: FLOAT_32; HTP: UFIXED_POINT_8`."""
    generic = item.datatypes if BACKEND_SPECIFIC not in item.datatypes else None
    per = {}
    for b in backends:
        o = next((o for o in item.overrides if o.backend == b and o.datatypes), None)
        chosen = o.datatypes if o else generic
        if chosen:
            per[b] = chosen
    if len(set(per.values())) <= 1:
        return ", ".join(next(iter(per.values()), item.datatypes))
    return "; ".join(f"{b}: {', '.join(d)}" for b, d in per.items())


def _doc(op: OpDef, inputs: list[str], params: list[str]) -> tuple[str, ...]:
    """Docstring lines (not yet indented for the function body)."""
    lines = textwrap.wrap(one_line(op.description) or f"The {op.name} op.", WIDTH - 4,
                          break_on_hyphens=False)
    sections = (
        ("Inputs", [(n, t, _tensor_facts(t)) for t, n in zip(op.inputs, inputs, strict=True)]),
        ("Outputs", [(t.name, t, _tensor_facts(t)) for t in op.outputs]),
        ("Parameters", [(n, p, _param_facts(p)) for p, n in zip(op.params, params, strict=True)]),
    )
    for title, items in sections:
        if not items:
            continue
        lines += ["", f"{title}:"]
        for name, item, facts in items:
            head = name + (f" (named '{one_line(item.name)}' in the op config)"
                           if name != item.name else "")
            head += f": {one_line(item.description)}" if item.description else ""
            lines += textwrap.wrap(head, WIDTH - 8, initial_indent="    ",
                                   subsequent_indent="        ", break_on_hyphens=False)
            text = f"{facts}; datatypes {datatypes_text(item, op.backends)}"
            lines += textwrap.wrap(text, WIDTH - 8, initial_indent="        ",
                                   subsequent_indent="        ", break_on_hyphens=False)
    return tuple(docstring(line) for line in lines)


def _tensor_facts(t: TensorDef) -> str:
    facts = [f"rank {t.rank}"] + ([t.layout] if t.layout not in ("UNDEFINED", "") else [])
    facts += ["optional"] * (not t.mandatory) + ["repeated"] * t.repeated
    facts += [f"default {py_literal(t.default.value)}"] if t.default else []
    return ", ".join(facts)


def _param_facts(p: ParamDef) -> str:
    facts = [p.rank, "mandatory" if p.mandatory else "optional"]
    if p.enumeration:
        facts.append("enumeration " + ", ".join(f"{v}={i}" for i, v in enumerate(p.enumeration)))
    if p.default is not None:
        shown = py_literal(p.default.value)
        if p.enumeration and p.default.kind == "scalar":
            shown = f"{p.enumeration[p.default.value]} ({shown})"
        facts.append(f"default {shown}" + (" (ignored: mandatory)" if p.mandatory else ""))
    return ", ".join(facts)
