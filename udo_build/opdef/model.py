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
from ..errors import Diagnostics, Problem, raise_if_any
from .vocab import BACKEND_SPECIFIC, BACKENDS

# what the vendor's generators type a BACKEND_SPECIFIC item as when nothing gives it a datatype
# for the backend (the SNPE UDO tools read a missing data_type as FLOAT_32; the QNN generator
# registers the op's generic, float implementation)
VENDOR_DATATYPE = "FLOAT_32"
VENDOR_LAYOUT = "UNDEFINED"

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
    # the op package it belongs to when a set holds several ("": the set's own, `name`)
    package: str = ""
    origin: Origin = field(default=NO_ORIGIN, compare=False, repr=False)

    def param(self, name: str) -> ParamDef | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class PackageId:
    """Who a package is: what its library registers (name) and says of itself."""

    name: str
    domain: str
    version: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "domain": self.domain, "version": self.version}


@dataclass(frozen=True)
class OpPackageDef:
    """An op package: its identity and ops. `backend` is set once resolved for one backend.

    The ops of several packages (a SNPE JSON config with UdoPackage_0 and UdoPackage_1, or
    configs naming different packages) travel as one set: the first package's identity, every
    package in `members` (empty when there is one), each op's `package` naming its own when it
    is not the first. `split_packages` gives them back one by one, as the generators build them.
    """

    name: str
    domain: str
    version: str
    ops: tuple[OpDef, ...]
    backend: str | None = None
    # "xml" or "json": only changes the wording of hints, never equality or the JSON form
    source_format: str = field(default="", compare=False)
    members: tuple[PackageId, ...] = ()

    def op(self, name: str) -> OpDef | None:
        return next((o for o in self.ops if o.name == name), None)

    def package_of(self, op: OpDef) -> PackageId:
        """The package `op` belongs to."""
        own = PackageId(self.name, self.domain, self.version)
        return next((m for m in self.members if m.name == op.package), own) if op.package \
            else own

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "domain": self.domain,
            "version": self.version,
            "backend": self.backend,
            "ops": [_op_json(op) for op in self.ops],
        }
        if self.members:  # only a set of several packages has them: one package's bytes stay
            doc["members"] = [m.to_json() for m in self.members]
        return doc

    @staticmethod
    def from_json(data: dict[str, Any]) -> OpPackageDef:
        return OpPackageDef(
            data["name"], data["domain"], data["version"],
            tuple(_op_from_json(op) for op in data["ops"]), data.get("backend"),
            members=tuple(PackageId(m["name"], m["domain"], m["version"])
                          for m in data.get("members", ())),
        )

    def canonical_bytes(self) -> bytes:
        return canonical_json({"schema": SCHEMA, "version": SCHEMA_VERSION,
                               "value": self.to_json()})

    def digest(self) -> str:
        return typed_digest(SCHEMA, SCHEMA_VERSION, self.to_json())


# -- per-backend resolution ---------------------------------------------------------------------


def resolve_backend(package: OpPackageDef, backend: str,
                    diag: Diagnostics | None = None) -> OpPackageDef:
    """The package as `backend` builds it, or a UserError naming every op and tensor it cannot
    build. A BACKEND_SPECIFIC item nothing types for `backend` takes the vendor's typing
    (`VENDOR_DATATYPE`), with one warning per op in `diag`, as the vendor's generators do."""
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
    warnings = diag if diag is not None else Diagnostics()
    resolved = tuple(_resolve_op(op, backend, package.source_format, problems, warnings)
                     for op in ops)
    raise_if_any(problems)
    return replace(_regroup(package, resolved), backend=backend)


def split_packages(package: OpPackageDef) -> tuple[OpPackageDef, ...]:
    """The packages of a set, each on its own with its ops, in the order of `members`; a
    package with no op (none for the backend it was resolved for) is not among them."""
    if not package.members:
        return (package,)
    groups = [tuple(op for op in package.ops if package.package_of(op).name == m.name)
              for m in package.members]
    return tuple(_regroup(package, ops) for ops in groups if ops)


def _regroup(package: OpPackageDef, ops: tuple[OpDef, ...]) -> OpPackageDef:
    """The set holding only `ops` (of `package`): the packages with none of them left out, the
    first one left its identity, one package alone no set."""
    if not package.members:
        return replace(package, ops=ops)
    owners = [package.package_of(op).name for op in ops]
    ids = [m for m in package.members if m.name in owners]
    own = ids[0]
    ops = tuple(replace(op, package="" if owner == own.name else owner)
                for op, owner in zip(ops, owners, strict=True))
    return replace(package, name=own.name, domain=own.domain, version=own.version, ops=ops,
                   members=tuple(ids) if len(ids) > 1 else ())


def _resolve_op(op: OpDef, backend: str, fmt: str, problems: list[Problem],
                diag: Diagnostics) -> OpDef:
    typed: dict[str, list[str]] = {"datatype": [], "layout": []}  # given the vendor's typing
    done = [_resolve_item(item, backend, typed)
            for item in (*op.inputs, *op.outputs, *op.params)]
    if typed["datatype"] or typed["layout"]:
        diag.warn(op.origin.problem(_vendor_typing(op.name, backend, typed), hint=_resolve_hint(
            _format(op.origin, fmt), backend, op.name, "them", "Datatype")))
    n_in, n_out = len(op.inputs), len(op.outputs)
    if backend in ("DSP", "HTP"):
        for kind, tensors in (("input", op.inputs), ("output", op.outputs)):
            for t in tensors:
                if t.repeated:
                    problems.append(t.origin.problem(
                        f"op {op.name}, {kind} '{t.name}': Repeated {kind}s are not supported "
                        f"on {backend}",
                        hint="set Repeated to false, or do not build this op for DSP or HTP",
                    ))
    return replace(op, inputs=tuple(done[:n_in]), outputs=tuple(done[n_in:n_in + n_out]),
                   params=tuple(done[n_in + n_out:]), backends=(backend,))


def _vendor_typing(op: str, backend: str, typed: dict[str, list[str]]) -> str:
    given = {"datatype": VENDOR_DATATYPE, "layout": VENDOR_LAYOUT}
    said = [f"{', '.join(names)} {given[what]}" for what, names in typed.items() if names]
    what = " or ".join(k for k, v in typed.items() if v)
    return (f"op {op}: BACKEND_SPECIFIC with no {what} for backend {backend}; taken as the "
            f"vendor's generators take it: {'; '.join(said)}")


def _format(origin: Origin, fmt: str) -> str:
    suffix = origin.file.rsplit(".", 1)[-1].lower() if origin.file else ""
    return suffix if suffix in ("xml", "json") else fmt


def _resolve_item(item: Any, backend: str, typed: dict[str, list[str]]) -> Any:
    override = next((o for o in item.overrides if o.backend == backend), None)
    datatypes = override.datatypes if override and override.datatypes else item.datatypes
    layout = override.layout if override and override.layout else item.layout
    concrete = tuple(d for d in datatypes if d != BACKEND_SPECIFIC)
    if not concrete:
        typed["datatype"].append(f"'{item.name}'")
    if layout == BACKEND_SPECIFIC:
        typed["layout"].append(f"'{item.name}'")
    return replace(item, datatypes=concrete or (VENDOR_DATATYPE,),
                   layout=VENDOR_LAYOUT if layout == BACKEND_SPECIFIC else layout, overrides=())


def _resolve_hint(fmt: str, backend: str, op: str, name: str, what: str) -> str:
    """How to type it yourself, in the terms of the config's format."""
    if fmt == "json":
        core = "DSP" if backend == "HTP" else backend
        return f"to choose, give {name} a data_type, or a per_core_data_types entry for {core}"
    return (f'to choose, give {name} a {what} in a SupplementalOpDef for {op} under '
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
        **({"package": op.package} if op.package else {}),
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
        package=data.get("package", ""),
    )
