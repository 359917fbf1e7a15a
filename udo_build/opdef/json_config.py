"""The SNPE JSON UDO config loader: `UdoPackage_<i>` objects -> generic `OpPackageDef`s.

The file is read strictly (duplicate keys refused, size limited), checked against
`udo-config.schema.json`, then turned into the model. Unknown fields are warnings (real configs
carry extra keys); every other mistake is a `UserError` problem with file, line, field path and a
hint, all of them collected before raising.

SNPE cores map to backends: CPU -> CPU, GPU -> GPU, DSP -> DSP and HTP (SNPE runs DSP UDOs on the
HTP from v68 on); other core names are warnings (`rules.op_backends`). `per_core_data_types`
become per-backend overrides; `model.resolve_backend` resolves them.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from .. import source
from ..errors import Diagnostics, Problem, capped, raise_if_any
from ..schema_problems import JSON_WORDS, schema_problems
from . import rules
from .checks import IDENTIFIER, DefaultError, check_op
from .model import BackendOverride, Default, OpDef, OpPackageDef, Origin, ParamDef, TensorDef
from .vocab import BACKEND_SPECIFIC, DSP_ARCHS
from .vocab import normalize_datatype as _normalize

SCHEMA_FILE = "udo-config.schema.json"
SNPE_CORES: tuple[str, ...] = ("CPU", "GPU", "DSP")
CORE_BACKENDS: dict[str, tuple[str, ...]] = {"CPU": ("CPU",), "GPU": ("GPU",),
                                             "DSP": ("DSP", "HTP")}
PACKAGE_KEY = re.compile(r"^UdoPackage_[0-9]+$")
DEFAULT_VERSION = "1.0.0"
MAX_PROBLEMS = 100

FieldPath = source.FieldPath


def load_json_config(path: str | Path, diag: Diagnostics) -> tuple[OpPackageDef, ...]:
    """Every package of a SNPE UDO config, in order of i; warnings go to `diag`."""
    file = str(path)
    data, positions = source.load_json(
        source.read_limited(path, source.MAX_JSON_BYTES, "op config"), file)
    errors, warnings = _schema_problems(data, positions)
    diag.extend(capped(warnings, "warning"))
    keys = _package_keys(data)
    if not errors and not keys:
        errors.append(positions.error(
            (), "no UdoPackage_<i> key: this is not a SNPE UDO config",
            'put the ops under "UdoPackage_0": {"UDO_PACKAGE_NAME": ..., "Operators": [...]}',
        ).problem)
    raise_if_any(errors)
    ctx = _Context(file, positions, diag)
    packages = tuple(_package(ctx, data[key], (key,)) for key in keys)
    raise_if_any(ctx.problems)
    return packages


@functools.cache
def _validator() -> Draft202012Validator:
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text("utf-8")
    return Draft202012Validator(json.loads(text))


def _package_keys(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return []
    keys = [k for k in data if PACKAGE_KEY.search(k)]
    return sorted(keys, key=lambda k: (int(k[len("UdoPackage_"):]), k))


# -- schema errors -> problems ------------------------------------------------------------------

_HINTS = {
    "required:type": 'add "type": "<OpName>", the op type the model uses',
    "required:UDO_PACKAGE_NAME": 'add "UDO_PACKAGE_NAME": "<PackageName>"',
    "required:Operators": 'add "Operators": [...], the ops of the package',
    "required:name": 'add "name": "<name>"',
    "minItems:Operators": "a package needs at least one op",
    "minItems:core_types": "list the cores the op runs on: CPU, GPU, DSP (or drop core_types "
                           "for all)",
    "minLength:name": "give a name",
    "additionalProperties:": "packages are keys UdoPackage_0, UdoPackage_1, ...",
}


def _schema_problems(data: Any, positions: source.Positions) -> tuple[list[Problem],
                                                                       list[Problem]]:
    return schema_problems(_validator().iter_errors(data), positions, unknown_is_warning=True,
                           words=JSON_WORDS, hints=_HINTS)


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the model ----------------------------------------------------------------------------------


@dataclass
class _Context:
    file: str
    positions: source.Positions
    diag: Diagnostics
    problems: list[Problem] = field(default_factory=list)

    def origin(self, path: FieldPath) -> Origin:
        return Origin(self.file, self.positions.of(path)[0], source.format_path(path))

    def error(self, path: FieldPath, message: str, hint: str, *, key: bool = False) -> None:
        self.problems.append(self.positions.error(path, message, hint, key=key).problem)

    def warn(self, path: FieldPath, message: str, hint: str, *, key: bool = False) -> None:
        self.diag.warn(self.positions.error(path, message, hint, key=key).problem)


def _package(ctx: _Context, raw: dict[str, Any], path: FieldPath) -> OpPackageDef:
    name = raw["UDO_PACKAGE_NAME"]
    if not IDENTIFIER.match(name):
        ctx.error((*path, "UDO_PACKAGE_NAME"),
                  f"package name '{_clip(name)}' is not a valid identifier",
                  "use letters, digits and _, not starting with a digit "
                  "(package sources are named after it)")
    paths = [(*path, "Operators", i) for i in range(len(raw["Operators"]))]
    ops = [_op(ctx, op, where) for op, where in zip(raw["Operators"], paths, strict=True)]
    first: dict[str, FieldPath] = {}
    for op, where in zip(ops, paths, strict=True):
        if op.name in first:
            ctx.error((*where, "type"),
                      f"op type '{_clip(op.name)}' is given twice "
                      f"(first at {source.format_path(first[op.name])})",
                      "each op of a package needs its own type")
        first.setdefault(op.name, where)
    version = raw.get("UDO_PACKAGE_VERSION", raw.get("version", DEFAULT_VERSION))
    return OpPackageDef(name, raw.get("domain", ""), version, tuple(ops), source_format="json")


def _op(ctx: _Context, raw: dict[str, Any], path: FieldPath) -> OpDef:
    name = raw["type"]
    given = list(dict.fromkeys(raw.get("core_types", ())))
    cores = _unique(given, SNPE_CORES) if given else SNPE_CORES
    named = [b for core in given for b in CORE_BACKENDS.get(core, (core,))]
    warn = functools.partial(ctx.warn, (*path, "core_types"), key=False)
    item = functools.partial(_Item, ctx, name, cores)
    op = OpDef(
        name=name,
        inputs=tuple(item("input", t, (*path, "inputs", i)).tensor()
                     for i, t in enumerate(raw.get("inputs", []))),
        outputs=tuple(item("output", t, (*path, "outputs", i)).tensor()
                      for i, t in enumerate(raw.get("outputs", []))),
        params=(*(item("parameter", p, (*path, "scalar_params", i)).param("SCALAR")
                  for i, p in enumerate(raw.get("scalar_params", []))),
                *(item("parameter", p, (*path, "tensor_params", i)).param("ND")
                  for i, p in enumerate(raw.get("tensor_params", [])))),
        backends=rules.op_backends(named, name, warn),
        dsp_arch_types=_unique(raw.get("dsp_arch_types", []), DSP_ARCHS),
        origin=ctx.origin(path),
    )
    ctx.problems.extend(check_op(op))
    return op


def _unique(values: Iterable[str], order: tuple[str, ...]) -> tuple[str, ...]:
    """`values` without repeats, in the order of `order`."""
    given = set(values)
    return tuple(v for v in order if v in given)


@dataclass
class _Item:
    """One input, output or parameter of an op, as the JSON gives it."""

    ctx: _Context
    op: str
    cores: tuple[str, ...]
    kind: str
    raw: Mapping[str, Any]
    path: FieldPath

    def tensor(self) -> TensorDef:
        datatypes, overrides = self._datatypes()
        return TensorDef(
            name=self.raw["name"], datatypes=datatypes, rank="ND",
            layout=self.raw.get("tensor_layout", "UNDEFINED"), mandatory=True,
            static=self.raw.get("static", False),
            default=self._default(datatypes, overrides, "ND"), overrides=overrides,
            origin=self.ctx.origin(self.path),
        )

    def param(self, rank: str) -> ParamDef:
        datatypes, overrides = self._datatypes()
        return ParamDef(
            name=self.raw["name"], datatypes=datatypes, rank=rank,
            layout=self.raw.get("tensor_layout", "UNDEFINED"),
            mandatory="default_value" not in self.raw,
            default=self._default(datatypes, overrides, rank), overrides=overrides,
            origin=self.ctx.origin(self.path),
        )

    def _datatypes(self) -> tuple[tuple[str, ...], tuple[BackendOverride, ...]]:
        generic = (_datatype(self.raw["data_type"]) if "data_type" in self.raw
                   else BACKEND_SPECIFIC,)
        per_core = self.raw.get("per_core_data_types", {})
        overrides: list[BackendOverride] = []
        for core in (c for c in per_core if c not in SNPE_CORES):
            rules.unknown_backend(core, f"op {self.op}, {self.kind} '{self.raw['name']}'",
                                  functools.partial(self.ctx.warn,
                                                    (*self.path, "per_core_data_types", core)))
        for core in (c for c in SNPE_CORES if c in per_core):
            if core not in self.cores:
                self.ctx.warn(
                    (*self.path, "per_core_data_types", core),
                    f"op {self.op}, {self.kind} '{self.raw['name']}': per_core_data_types names "
                    f"{core}, which is not in the op's core_types; ignored",
                    f"add {core} to core_types, or drop this entry", key=True)
                continue
            dtype = _datatype(per_core[core])
            overrides += [BackendOverride(b, (dtype,)) for b in CORE_BACKENDS[core]]
        return generic, tuple(overrides)

    def _default(self, datatypes: tuple[str, ...], overrides: tuple[BackendOverride, ...],
                 rank: str) -> Default | None:
        """The default, checked against data_type, else against the per_core_data_types."""
        if "default_value" not in self.raw:
            return None
        where = (*self.path, "default_value")
        label = f"op {self.op}, {self.kind} '{self.raw['name']}'"
        if self.kind == "output":
            self.ctx.error(where, f"{label}: outputs cannot have a default",
                           "remove the default_value")
            return None
        concrete = [d for d in datatypes if d != BACKEND_SPECIFIC] or list(dict.fromkeys(
            d for o in overrides for d in o.datatypes))
        try:
            return rules.read_default(
                self.raw["default_value"], concrete, rank, mandatory=False,
                quantized="quantization_mode" in self.raw,
                warn=lambda message, hint: self.ctx.warn(where, f"{label}: {message}", hint))
        except DefaultError as exc:
            what = f"type {' or '.join(concrete)}" if concrete else "the datatype"
            self.ctx.error(where, f"{label}: {exc}",
                           f"give a default_value that fits {what} and rank {rank}")
            return None


def _datatype(text: str) -> str:
    value = _normalize(text)
    if value is None:  # pragma: no cover - the schema allows only known spellings
        raise AssertionError(f"schema let an unknown datatype through: {text!r}")
    return value
