"""What the templates see of an op: its tensors and parameters with identifiers, C++ types,
literals of their defaults, and the facts the skeletons need (counts, registrations).

`op_view` is a pure function of a resolved `OpDef`; the templates never compute a name or a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..opdef.model import Default, OpDef, ParamDef, TensorDef
from .names import (
    c_literal,
    cpp_names,
    flatten,
    is_whole,
    lower_first,
    one_line,
    py_literal,
    shape,
    snake,
)
from .tables import DTYPES, GENERIC_TENSOR, REAL_VALUED, DType, Registration, dtype, registration


@dataclass(frozen=True)
class DefaultView:
    kind: str  # tensor | scalar | boolean | string
    value: Any  # as normalized: a number, bool, string or nested tuple
    text: str  # for comments: 1.0, CEIL (1), [1, 2, 3], "fast path", true
    dt: DType  # the type its values are stored as
    c_type: str  # the C++ type of a scalar default, or of a tensor default's elements
    scalar: str  # the C++ literal of a scalar default ("" for a tensor)
    values: tuple[str, ...]  # the C++ literals of a tensor default, flattened
    dims: tuple[int, ...]  # the dimensions of a tensor default


@dataclass(frozen=True)
class TensorView:
    name: str
    ident: str
    datatypes: tuple[str, ...]
    rank: str
    layout: str
    mandatory: bool
    repeated: bool
    static: bool
    description: str
    htp_type: str  # a concrete HTP tensor type, or the template parameter standing for several
    cl_type: str
    cl_macro: str  # the OpenCL kernel's type macro of this tensor
    default: DefaultView | None
    access: str = ""  # C++ expression of it in a CPU node (`node->inputs[0]`)
    count: str = ""  # C++ expression of how many tensors a Repeated one is ("": one)

    @property
    def summary(self) -> str:
        facts = [", ".join(self.datatypes), f"rank {self.rank}"]
        facts += [self.layout] if self.layout != "UNDEFINED" else []
        facts += ["optional"] * (not self.mandatory) + ["repeated"] * self.repeated
        facts += ["static"] * self.static
        facts += [f"default {self.default.text}"] if self.default else []
        text = f"{self.name} ({'; '.join(facts)})"
        return one_line(f"{text}: {self.description}" if self.description else text)


@dataclass(frozen=True)
class ParamView:
    name: str
    ident: str
    datatypes: tuple[str, ...]
    dt: DType
    rank: str
    is_tensor: bool
    mandatory: bool
    default: DefaultView | None
    enumeration: tuple[str, ...]
    description: str
    htp_type: str

    @property
    def summary(self) -> str:
        facts = [", ".join(self.datatypes), self.rank]
        facts.append("mandatory" if self.mandatory else "optional")
        if self.enumeration:
            facts.append("enumeration " + ", ".join(f"{v}={i}"
                                                    for i, v in enumerate(self.enumeration)))
        facts += [f"default {self.default.text}"] if self.default else []
        text = f"{self.name} ({'; '.join(facts)})"
        return one_line(f"{text}: {self.description}" if self.description else text)

    @property
    def storage(self) -> DType:
        """The type values are kept as: the default's (a real default of a fixed-point type is
        a float), else the parameter's."""
        return self.default.dt if self.default else self.dt

    @property
    def cpu_type(self) -> str:
        """The member type in the CPU skeleton's parameter struct."""
        if self.is_tensor:
            return f"std::vector<{_cpu_scalar(self.storage, element=True)}>"
        return _cpu_scalar(self.storage, element=False)

    @property
    def cl_arg(self) -> str:
        """The OpenCL kernel argument of the parameter ("": strings stay on the host)."""
        if self.dt.literal == "string":
            return ""
        if self.is_tensor:
            return f"__global const {self.dt.cl}* {self.ident}"
        scalar = {"bool": "int", "half": "float"}.get(self.dt.literal, self.dt.cl)
        return f"const {scalar} {self.ident}"

    @property
    def cpu_init(self) -> str:
        """The default member initializer of the CPU parameter struct ("{}": none)."""
        d = self.default
        if d is None:
            return "{}"
        if self.is_tensor:
            return "{" + ", ".join(d.values) + "}"
        if self.storage.literal == "bool":
            return "true" if d.scalar == "1" else "false"
        if self.storage.literal == "half":
            return c_literal(d.value, DTYPES["FLOAT_32"])
        return d.scalar


def _cpu_scalar(dt: DType, element: bool) -> str:
    if dt.literal == "string":
        return "std::string"
    if dt.literal == "bool":
        return "uint8_t" if element else "bool"
    if dt.literal == "half":
        return "uint16_t" if element else "float"  # a tensor keeps the raw half bits
    return dt.c


@dataclass(frozen=True)
class OpView:
    name: str
    fn: str  # softplus (the vendor style: softplusImpl)
    snake: str
    description: str
    config: str  # the file name of the op config that defines it
    inputs: tuple[TensorView, ...]
    outputs: tuple[TensorView, ...]
    params: tuple[ParamView, ...]
    template: tuple[str, ...]  # HTP template parameters (empty: not a template)
    registrations: tuple[Registration, ...]

    @property
    def source(self) -> str:
        """Where the op is defined, for comments."""
        return one_line(self.config) or "the op definitions"

    @property
    def min_inputs(self) -> int:
        return _minimum(self.inputs)

    @property
    def max_inputs(self) -> int | None:
        return None if any(t.repeated for t in self.inputs) else len(self.inputs)

    @property
    def min_outputs(self) -> int:
        return _minimum(self.outputs)

    @property
    def max_outputs(self) -> int | None:
        return None if any(t.repeated for t in self.outputs) else len(self.outputs)

    @property
    def tensor_params(self) -> tuple[ParamView, ...]:
        return tuple(p for p in self.params if p.is_tensor)

    @property
    def htp_args(self) -> tuple[str, ...]:
        """The HTP implementation's arguments: outputs, then inputs, then parameters."""
        return (*(f"{t.htp_type}& {t.ident}" for t in self.outputs),
                *(f"const {t.htp_type}& {t.ident}" for t in self.inputs),
                *(f"const {p.htp_type}& {p.ident}" for p in self.params))

    @property
    def idents(self) -> tuple[str, ...]:
        return tuple(x.ident for x in (*self.outputs, *self.inputs, *self.params))

    @property
    def template_line(self) -> str:
        return ("template <" + ", ".join(f"typename {t}" for t in self.template) + ">"
                if self.template else "")


def _minimum(tensors: tuple[TensorView, ...] | tuple[TensorDef, ...]) -> int:
    """Tensors up to the last mandatory one must be given."""
    return max((i + 1 for i, t in enumerate(tensors) if t.mandatory), default=0)


def op_view(op: OpDef, config: str) -> OpView:
    names = cpp_names([t.name for t in (*op.outputs, *op.inputs)] + [p.name for p in op.params])
    out_names = names[:len(op.outputs)]
    in_names = names[len(op.outputs):len(op.outputs) + len(op.inputs)]
    param_names = names[len(op.outputs) + len(op.inputs):]
    template = _template_params((*op.outputs, *op.inputs))
    prefix = snake(op.name).upper()
    outputs = tuple(_tensor(t, n, template, prefix, a)
                    for t, n, a in zip(op.outputs, out_names, _access(op.outputs, "outputs"),
                                       strict=True))
    inputs = tuple(_tensor(t, n, template, prefix, a)
                   for t, n, a in zip(op.inputs, in_names, _access(op.inputs, "inputs"),
                                      strict=True))
    params = tuple(_param(p, n) for p, n in zip(op.params, param_names, strict=True))
    return OpView(
        name=op.name, fn=lower_first(op.name), snake=snake(op.name),
        description=one_line(op.description), config=config, inputs=inputs, outputs=outputs,
        params=params, template=tuple(template.values()),
        registrations=_registrations(template, (*outputs, *inputs)),
    )


# -- HTP tensor types: one template parameter per distinct list of several datatypes ------------


def _template_params(tensors: tuple[TensorDef, ...]) -> dict[tuple[str, ...], str]:
    sets = list(dict.fromkeys(t.datatypes for t in tensors if len(_htp_types(t.datatypes)) > 1))
    if len(sets) == 1:
        return {sets[0]: "TensorType"}
    return {s: f"TensorType{i}" for i, s in enumerate(sets)}


def _htp_types(datatypes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(dtype(d).htp for d in datatypes))


def _registrations(template: dict[tuple[str, ...], str],
                   tensors: tuple[TensorView, ...]) -> tuple[Registration, ...]:
    """The generic implementation (every template parameter `Tensor`) as the fallback, then one
    typed implementation per position of the datatype lists."""
    if not template:
        return (registration((), all(t.htp_type == GENERIC_TENSOR for t in tensors)),)
    generic = tuple(GENERIC_TENSOR for _ in template)
    found = [registration(generic, True)]
    typed = [_htp_types(s) for s in template]
    if len({len(t) for t in typed}) == 1:
        for combo in zip(*typed, strict=True):
            if combo != generic and all(r.types != combo for r in found):
                found.append(registration(combo, False))
    return tuple(found)


# -- tensors and parameters ---------------------------------------------------------------------


def _tensor(t: TensorDef, ident: str, template: dict[tuple[str, ...], str], prefix: str,
            access: tuple[str, str]) -> TensorView:
    first = dtype(t.datatypes[0])
    htp = template.get(t.datatypes) or _htp_types(t.datatypes)[0]
    return TensorView(
        name=t.name, ident=ident, datatypes=t.datatypes, rank=t.rank, layout=t.layout,
        mandatory=t.mandatory, repeated=t.repeated, static=t.static,
        description=one_line(t.description), htp_type=htp, cl_type=first.cl,
        cl_macro=f"{prefix}_{ident.upper()}_T",
        default=default_view(t.default, first, ()) if t.default else None,
        access=access[0], count=access[1],
    )


def _access(tensors: tuple[TensorDef, ...], array: str) -> list[tuple[str, str]]:
    """(expression, count) of each tensor of the CPU skeleton's op (`operation`, a
    qnn::custom::CustomOp; `array`: inputs or outputs): the first Repeated one takes what the
    others leave; after it, tensors count from the end; optional ones may be missing (the
    accessor gives nullptr past the end)."""
    n = len(tensors)
    repeated = next((i for i, t in enumerate(tensors) if t.repeated), None)
    get = "operation->get" + array[:-1].title()  # getInput, getOutput
    count = "operation->num" + array[:-1].title() + "()"  # numInput(), numOutput()
    found = []
    for j in range(n):
        if repeated is not None and j == repeated:
            found.append((f"operation->{array}()" + (f" + {j}" if j else ""),
                          count + (f" - {n - 1}" if n > 1 else "")))
        elif repeated is not None and j > repeated:
            found.append((f"{get}({count} - {n - j})", ""))
        else:
            found.append((f"{get}({j})", ""))
    return found


def _param(p: ParamDef, ident: str) -> ParamView:
    dt = dtype(p.datatypes[0])
    is_tensor = p.rank != "SCALAR"
    return ParamView(
        name=p.name, ident=ident, datatypes=p.datatypes, dt=dt, rank=p.rank,
        is_tensor=is_tensor, mandatory=p.mandatory,
        default=default_view(p.default, dt, p.enumeration, is_tensor) if p.default else None,
        enumeration=p.enumeration, description=one_line(p.description),
        htp_type=dt.htp if len(p.datatypes) == 1 else GENERIC_TENSOR,
    )


def default_view(default: Default, dt: DType, enumeration: tuple[str, ...],
                 as_tensor: bool = False) -> DefaultView:
    value = default.value
    values = flatten(value)
    if dt.literal == "int" and not all(is_whole(v) for v in values):
        dt = REAL_VALUED  # a real value of a fixed-point type: not quantized here
    if dt.literal == "string" or default.kind == "string":
        dt = DTYPES["STRING"] if default.kind == "string" else dt
    tensor = default.kind == "tensor" or as_tensor
    half_scalar = dt.literal == "half" and not tensor  # a FLOAT_16 scalar is given as a float
    scalar_dt = DTYPES["FLOAT_32"] if dt.literal == "half" else dt
    dims = tuple(shape(value)) if default.kind == "tensor" else ((1,) if tensor else ())
    return DefaultView(
        kind=default.kind, value=value, text=_text(value, default.kind, enumeration), dt=dt,
        c_type="float" if half_scalar else dt.c,
        scalar="" if default.kind == "tensor" else c_literal(value, scalar_dt),
        values=tuple(c_literal(v, dt) for v in values) if tensor else (),
        dims=dims,
    )


def _text(value: Any, kind: str, enumeration: tuple[str, ...]) -> str:
    if enumeration and kind == "scalar":
        return f"{enumeration[value]} ({value})"
    if kind == "string":
        return '"' + one_line(value).replace('"', '\\"') + '"'
    if kind == "boolean":
        return "true" if value else "false"
    return one_line(py_literal(value).replace("True", "true").replace("False", "false"))
