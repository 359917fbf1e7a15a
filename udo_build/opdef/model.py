"""The normalized, format-neutral model of an op package.

Both loaders (XML OpDefCollection, SNPE JSON UDO config) produce an `OpPackageDef`. Generic
datatypes may be `BACKEND_SPECIFIC`; each tensor and parameter carries per-backend overrides
(from a SupplementalOpDefList or `per_core_data_types`). `resolve_backend` turns the package into
the one a backend builds: only that backend's ops, every datatype and layout concrete, the package
name kept (the vendor tools name every backend's package by its PackageName).

`to_json` is the canonical form (stable bytes, used for cache keys); `from_json` reads it back.
Origins (file and line) are kept for messages but are not part of equality or the JSON form.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..canonical import canonical_json, typed_digest
from ..errors import Problem, raise_if_any
from .vocab import BACKEND_SPECIFIC, BACKENDS

SCHEMA = "udo-build/opdef"
SCHEMA_VERSION = 1
DEFAULT_KINDS = ("tensor", "scalar", "boolean", "string")


@dataclass(frozen=True)
class Origin:
    """Where a definition came from: for messages only, never for equality or keys."""

    file: str = ""
    line: int | None = None
    field: str = ""

    def problem(self, message: str, hint: str | None = None, suffix: str = "") -> Problem:
        name = f"{self.field}{suffix}" if self.field else None
        return Problem(message, self.file or None, self.line, None, name, hint)


NO_ORIGIN = Origin()


@dataclass(frozen=True)
class Default:
    """A default value: a tensor (nested tuples), a scalar number, a boolean or a string."""

    kind: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": _listify(self.value)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Default:
        return Default(data["kind"], _tuplify(data["value"]))


@dataclass(frozen=True)
class BackendOverride:
    """What one backend says about a tensor or parameter (datatypes, layout)."""

    backend: str
    datatypes: tuple[str, ...] = ()
    layout: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "datatypes": list(self.datatypes), "layout": self.layout}

    @staticmethod
    def from_json(data: dict[str, Any]) -> BackendOverride:
        return BackendOverride(data["backend"], tuple(data["datatypes"]), data["layout"])


@dataclass(frozen=True)
class TensorDef:
    """An input or output of an op."""

    name: str
    datatypes: tuple[str, ...]
    rank: str = "ND"
    layout: str = "UNDEFINED"
    mandatory: bool = True
    repeated: bool = False
    static: bool = False
    default: Default | None = None
    description: str = ""
    shape_text: str = ""
    overrides: tuple[BackendOverride, ...] = ()
    origin: Origin = field(default=NO_ORIGIN, compare=False, repr=False)


@dataclass(frozen=True)
class ParamDef:
    """A parameter of an op: scalar or tensor, maybe an enumeration."""

    name: str
    datatypes: tuple[str, ...]
    rank: str = "SCALAR"
    layout: str = "UNDEFINED"
    mandatory: bool = False
    default: Default | None = None
    enumeration: tuple[str, ...] = ()
    description: str = ""
    shape_text: str = ""
    overrides: tuple[BackendOverride, ...] = ()
    origin: Origin = field(default=NO_ORIGIN, compare=False, repr=False)


@dataclass(frozen=True)
class Reference:
    source: str = ""
    url: str = ""


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[TensorDef, ...]
    outputs: tuple[TensorDef, ...]
    params: tuple[ParamDef, ...] = ()
    backends: tuple[str, ...] = BACKENDS
    use_default_translation: bool = False
    description: str = ""
    references: tuple[Reference, ...] = ()
    dsp_arch_types: tuple[str, ...] = ()
    origin: Origin = field(default=NO_ORIGIN, compare=False, repr=False)

    def param(self, name: str) -> ParamDef | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class OpPackageDef:
    """An op package: its identity and ops. `backend` is set once resolved for one backend."""

    name: str
    domain: str
    version: str
    ops: tuple[OpDef, ...]
    backend: str | None = None
    # "xml" or "json": only changes the wording of hints, never equality or the JSON form
    source_format: str = field(default="", compare=False)

    def op(self, name: str) -> OpDef | None:
        return next((o for o in self.ops if o.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "domain": self.domain,
            "version": self.version,
            "backend": self.backend,
            "ops": [_op_json(op) for op in self.ops],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> OpPackageDef:
        return OpPackageDef(
            data["name"], data["domain"], data["version"],
            tuple(_op_from_json(op) for op in data["ops"]), data.get("backend"),
        )

    def canonical_bytes(self) -> bytes:
        return canonical_json({"schema": SCHEMA, "version": SCHEMA_VERSION,
                               "value": self.to_json()})

    def digest(self) -> str:
        return typed_digest(SCHEMA, SCHEMA_VERSION, self.to_json())


# -- per-backend resolution ---------------------------------------------------------------------


def resolve_backend(package: OpPackageDef, backend: str) -> OpPackageDef:
    """The package as `backend` builds it, or a UserError naming every unresolved op and tensor."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    problems: list[Problem] = []
    ops = [op for op in package.ops if backend in op.backends]
    if not ops:
        supported = sorted({b for op in package.ops for b in op.backends})
        raise_if_any([Problem(
            f"package {package.name} has no op for backend {backend}",
            hint=f"its ops support: {', '.join(supported) or 'no backend'}",
        )])
    resolved = tuple(_resolve_op(op, backend, package.source_format, problems) for op in ops)
    raise_if_any(problems)
    return replace(package, ops=resolved, backend=backend)


def _resolve_op(op: OpDef, backend: str, fmt: str, problems: list[Problem]) -> OpDef:
    inputs = tuple(_resolve_item(op, t, "input", backend, fmt, problems) for t in op.inputs)
    outputs = tuple(_resolve_item(op, t, "output", backend, fmt, problems) for t in op.outputs)
    params = tuple(_resolve_item(op, p, "parameter", backend, fmt, problems) for p in op.params)
    if backend in ("DSP", "HTP"):
        for kind, tensors in (("input", op.inputs), ("output", op.outputs)):
            for t in tensors:
                if t.repeated:
                    problems.append(t.origin.problem(
                        f"op {op.name}, {kind} '{t.name}': Repeated {kind}s are not supported "
                        f"on {backend}",
                        hint="set Repeated to false, or do not build this op for DSP or HTP",
                    ))
    return replace(op, inputs=inputs, outputs=outputs, params=params, backends=(backend,))


def _resolve_item(op: OpDef, item: Any, kind: str, backend: str, fmt: str,
                  problems: list[Problem]) -> Any:
    override = next((o for o in item.overrides if o.backend == backend), None)
    suffix = item.origin.file.rsplit(".", 1)[-1].lower() if item.origin.file else ""
    fmt = suffix if suffix in ("xml", "json") else fmt
    datatypes = override.datatypes if override and override.datatypes else item.datatypes
    layout = override.layout if override and override.layout else item.layout
    if BACKEND_SPECIFIC in datatypes or not datatypes:
        problems.append(item.origin.problem(
            f"op {op.name}, {kind} '{item.name}': datatype BACKEND_SPECIFIC is not resolved for "
            f"backend {backend}",
            hint=_resolve_hint(fmt, backend, op.name, item.name, "Datatype"),
        ))
    if layout == BACKEND_SPECIFIC:
        problems.append(item.origin.problem(
            f"op {op.name}, {kind} '{item.name}': layout BACKEND_SPECIFIC is not resolved for "
            f"backend {backend}",
            hint=_resolve_hint(fmt, backend, op.name, item.name, "Shape/Layout"),
        ))
    return replace(item, datatypes=datatypes, layout=layout, overrides=())


def _resolve_hint(fmt: str, backend: str, op: str, name: str, what: str) -> str:
    """How to resolve, in the terms of the config's format."""
    if fmt == "json":
        core = "DSP" if backend == "HTP" else backend
        return f"give '{name}' a data_type, or a per_core_data_types entry for {core}"
    return (f'give {name} a {what} in a SupplementalOpDef for {op} under '
            f'<SupplementalOpDefList Backend="{backend}">')


# -- canonical JSON -----------------------------------------------------------------------------


def _listify(value: Any) -> Any:
    return [_listify(v) for v in value] if isinstance(value, tuple) else value


def _tuplify(value: Any) -> Any:
    return tuple(_tuplify(v) for v in value) if isinstance(value, list) else value


def _common_json(item: TensorDef | ParamDef) -> dict[str, Any]:
    return {
        "name": item.name,
        "datatypes": list(item.datatypes),
        "rank": item.rank,
        "layout": item.layout,
        "mandatory": item.mandatory,
        "default": item.default.to_json() if item.default else None,
        "description": item.description,
        "shape_text": item.shape_text,
        "overrides": [o.to_json() for o in item.overrides],
    }


def _tensor_json(t: TensorDef) -> dict[str, Any]:
    return {**_common_json(t), "repeated": t.repeated, "static": t.static}


def _param_json(p: ParamDef) -> dict[str, Any]:
    return {**_common_json(p), "enumeration": list(p.enumeration)}


def _op_json(op: OpDef) -> dict[str, Any]:
    return {
        "name": op.name,
        "description": op.description,
        "inputs": [_tensor_json(t) for t in op.inputs],
        "outputs": [_tensor_json(t) for t in op.outputs],
        "parameters": [_param_json(p) for p in op.params],
        "backends": list(op.backends),
        "use_default_translation": op.use_default_translation,
        "references": [{"source": r.source, "url": r.url} for r in op.references],
        "dsp_arch_types": list(op.dsp_arch_types),
    }


def _common_args(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": data["name"],
        "datatypes": tuple(data["datatypes"]),
        "rank": data["rank"],
        "layout": data["layout"],
        "mandatory": data["mandatory"],
        "default": Default.from_json(data["default"]) if data["default"] else None,
        "description": data["description"],
        "shape_text": data["shape_text"],
        "overrides": tuple(BackendOverride.from_json(o) for o in data["overrides"]),
    }


def _op_from_json(data: dict[str, Any]) -> OpDef:
    return OpDef(
        name=data["name"],
        description=data["description"],
        inputs=tuple(TensorDef(**_common_args(t), repeated=t["repeated"], static=t["static"])
                     for t in data["inputs"]),
        outputs=tuple(TensorDef(**_common_args(t), repeated=t["repeated"], static=t["static"])
                      for t in data["outputs"]),
        params=tuple(ParamDef(**_common_args(p), enumeration=tuple(p["enumeration"]))
                     for p in data["parameters"]),
        backends=tuple(data["backends"]),
        use_default_translation=data["use_default_translation"],
        references=tuple(Reference(r["source"], r["url"]) for r in data["references"]),
        dsp_arch_types=tuple(data["dsp_arch_types"]),
    )
