"""Loading a recipe: safe YAML with positions, the JSON Schema, then the checks that need context
(known SoCs, files that exist inside the project, sections that need each other).

Every problem found is reported at once, each with file, line, column and field path.
"""

from __future__ import annotations

import contextlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, Problem, UserError, raise_if_any
from ..soc.table import Soc, builtin_socs, soc_table
from ..source import (
    MAX_YAML_BYTES,
    FieldPath,
    Positions,
    decode_text,
    find_root,
    load_yaml,
    read_limited,
    tensor_problem,
)
from .matrix import expand, graph_problems
from .model import (
    DEFAULT_BACKENDS,
    DEFAULT_LEVEL,
    Dims,
    ModelSpec,
    NativeCheckSpec,
    OpSource,
    Outputs,
    PackageSpec,
    QuantizeSpec,
    Recipe,
    RunCheck,
    RunSpec,
    TargetSpec,
    parse_bytes,
)

if TYPE_CHECKING:
    from ..runtime.decode import DecodeSettings
    from ..runtime.generate import GenerateSettings

RECIPE_VERSIONS = (1,)
SCHEMA_PATH = Path(__file__).with_name("recipe-1.schema.json")


def load_recipe(path: str | Path, diag: Diagnostics | None = None, *,
                checked: Path | None = None) -> Recipe:
    """Load and check a recipe; raise one UserError listing every problem found.

    `checked` is a folder remembering recipes that passed the JSON Schema, by the digest of their
    bytes, the schema and udo-build's version: an unchanged recipe is then read from there (no
    YAML parsing, neither yaml nor jsonschema imported; see _recall for when it is not).
    The checks that depend on other files (SoCs, paths, sections) run every time.
    """
    diag = diag if diag is not None else Diagnostics()
    path = Path(path)
    file = str(path)
    raw = read_limited(path, MAX_YAML_BYTES, "recipe")
    memo = checked / f"{_schema_digest(raw)}.json" if checked is not None else None
    found = _recall(memo, file) if memo is not None else None
    if found is None:
        data, positions = load_yaml(decode_text(raw, file), file)
        _check_version(data, positions)
        _check_schema(data, positions)
    else:
        data, positions = found
    recipe = _Builder(path, data, positions, diag).build()
    if memo is not None and found is None:
        _remember(memo, data, positions)
    return recipe


MEMO_FORMAT = b"summed"  # the memo's layout (see _remember): a new one files under new names


def _schema_digest(raw: bytes, schema_path: Path = SCHEMA_PATH) -> str:
    """The name of a file's memo: its bytes, the schema's, udo-build's version and the memo's
    format (two versions of udo-build on one store keep a memo each, not one they rewrite)."""
    from .. import __version__
    from ..canonical import sha256_hex

    schema = schema_path.read_bytes()
    return sha256_hex(sha256_hex(schema).encode() + __version__.encode() + b"\0" + MEMO_FORMAT
                      + b"\0" + raw)


def _recall(memo: Path, file: str) -> tuple[Any, Positions] | None:
    """The (data, positions) a memo holds, when its body is whole (its first line is the
    sha256 of the rest) and is the memo of these very bytes (it names the digest its file is
    named by). A memo garbled, truncated, edited or copied from another file's is a miss: the
    file is parsed and checked again, never taken unchecked. (A writer of the store who forges
    the sum as well is trusted as its action-cache entries are: the store is the build's.)"""
    from ..canonical import sha256_hex

    try:
        head, _, body = memo.read_bytes().partition(b"\n")
        if head.decode("ascii") != sha256_hex(body):
            return None
        doc = json.loads(body)
        if doc["digest"] != memo.stem:
            return None
        found = doc["data"], Positions.from_json(file, doc["positions"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    with contextlib.suppress(OSError):  # a read-only store: the memo serves, unmarked
        os.utime(memo)  # last use, for gc
    return found


def _remember(memo: Path, data: Any, positions: Positions) -> None:
    """Keep a checked file's data in `memo`: the sha256 of its body, a newline, the body (the
    digest the memo is filed under, the data, the positions)."""
    from ..atomic import write_atomic
    from ..canonical import sha256_hex

    try:
        body = json.dumps({"digest": memo.stem, "data": data,
                           "positions": positions.to_json()}, allow_nan=False).encode()
    except (TypeError, ValueError):  # a value JSON cannot hold: just parse it next time
        return
    with contextlib.suppress(OSError):  # a memo only: a full or read-only store goes without
        write_atomic(memo, sha256_hex(body).encode() + b"\n" + body, readonly=False,
                     durable=False)


def _check_version(data: Any, positions: Positions) -> None:
    if data is None:
        raise UserError("the recipe is empty", file=positions.file,
                        hint="start with 'recipe: 1' and 'name: ...'")
    if not isinstance(data, dict):
        raise positions.error((), "a recipe is a mapping of sections (recipe:, name:, ...)")
    if "recipe" not in data and "workspace" in data:
        raise positions.error(("workspace",), "this is a workspace file, not a recipe",
                              "udo-build build, explain and graph take it; name one of its "
                              "recipes here")
    if "recipe" not in data:
        raise positions.error((), "missing required field 'recipe'",
                              "start the recipe with 'recipe: 1' (the format version)")
    version = data["recipe"]
    if version not in RECIPE_VERSIONS or isinstance(version, bool):
        raise positions.error(
            ("recipe",), f"unsupported recipe format version {version!r}",
            f"this udo-build reads recipe: {', '.join(map(str, RECIPE_VERSIONS))}",
        )


@lru_cache(maxsize=1)
def _schema() -> Any:
    return json.loads(SCHEMA_PATH.read_text("utf-8"))


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(_schema())


def _check_schema(data: dict[str, Any], positions: Positions) -> None:
    """Every problem the JSON Schema finds; a recipe that certainly passes it (nearly every
    one: see quick_schema) is not handed to jsonschema, which is then not even imported."""
    from .quick_schema import passes

    if passes(_schema(), data):
        return
    from ..schema_problems import schema_problems  # only for a recipe with problems

    problems, _ = schema_problems(_validator().iter_errors(data), positions)
    raise_if_any(problems)


class _Builder:
    """Builds a Recipe from checked data, collecting every problem found."""

    def __init__(self, path: Path, data: dict[str, Any], positions: Positions,
                 diag: Diagnostics) -> None:
        self.path, self.data, self.positions, self.diag = path, data, positions, diag
        self.folder = self.path.absolute().parent
        self.root = find_root(self.folder.resolve())
        self.problems: list[Problem] = []
        self.named: list[Path] = []  # every path it names (Recipe.named)
        self.socs = self._socs()

    # -- reporting ----------------------------------------------------------------------------

    def error(self, path: FieldPath, message: str, hint: str | None = None,
              *, key: bool = False) -> None:
        self.problems.append(self.positions.error(path, message, hint, key=key).problem)

    def warn(self, path: FieldPath, message: str, hint: str | None = None) -> None:
        self.diag.warn(self.positions.error(path, message, hint).problem)

    # -- building -----------------------------------------------------------------------------

    def build(self) -> Recipe:
        d = self.data
        needs_model = [s for s in ("quantize", "prepare", "run") if s in d]
        if needs_model and "model" not in d:
            for section in needs_model:
                self.error((section,), "needs a model: section",
                           "add model: {onnx: path/to/model.onnx}", key=True)
        quantize = self._quantize()
        default_precision = "int8" if quantize else "fp16"
        targets = self._targets(default_precision)
        recipe = Recipe(
            path=self.path, root=self.root, name=d["name"],
            package=self._package(targets), model=self._model(), quantize=quantize,
            targets=tuple(targets), runs=self._runs(default_precision),
            max_record_bytes=self._max_record_bytes(), socs=self.socs, positions=self.positions,
            named=tuple(dict.fromkeys(self.named)),
        )
        self._check_precisions(recipe)
        self._check_dims()
        raise_if_any(_unique(self.problems))
        self._check_served(recipe)
        return recipe

    def _socs(self) -> dict[str, Soc]:
        declared: dict[str, dict[str, Any]] = {}
        builtin = builtin_socs()
        for name, row in (self.data.get("socs") or {}).items():
            key = name.lower()
            if key not in builtin and "arch" not in row:
                self.error(("socs", name), f"SoC {name} is not in the built-in table: "
                           "give its arch", "for example: {arch: v73, vtcm_mb: 8}")
                continue
            declared[key] = row
        return soc_table(declared)

    def soc(self, path: FieldPath, name: str | None) -> Soc | None:
        if name is None:
            self.error(path, "this include entry names no soc, and the matrix has no soc list",
                       "add soc: to the entry")
            return None
        soc = self.socs.get(name.lower())
        if soc is None:
            self.error(path, f"'{name}' is not a known SoC",
                       f"known: {', '.join(builtin_socs())} (or declare it under socs:)")
        elif soc.vtcm_mb is None:
            self.error(path, f"SoC {name} has no public VTCM size; udo-build does not guess it",
                       f"state it under socs: ({name.lower()}: {{vtcm_mb: N}})")
            return None
        return soc

    def file(self, path: FieldPath, *, folder: bool = False) -> Path:
        raw = _get(self.data, path)
        given = Path(raw)
        if given.is_absolute():
            self.error(path, f"'{raw}' is an absolute path",
                       "write it relative to the recipe's folder")
            return given
        resolved = (self.folder / given).resolve()
        self.named.append(resolved)
        if not resolved.is_relative_to(self.root):
            self.error(path, f"'{raw}' leads outside the project folder {self.root}",
                       "paths stay inside the recipe's project (the nearest folder above the "
                       "recipe holding .git, pyproject.toml or .udo-build-root)")
        elif not resolved.exists():
            self.error(path, f"file not found: '{raw}' (looked for {resolved})")
        elif folder and not resolved.is_dir():
            self.error(path, f"'{raw}' is not a folder")
        elif not folder and not resolved.is_file():
            self.error(path, f"'{raw}' is not a file")
        return resolved

    def _package(self, targets: list[Any]) -> PackageSpec | None:
        p = self.data.get("package")
        if p is None:
            return None
        base: FieldPath = ("package", "ops")
        ops = tuple(
            OpSource(self.file((*base, i, "config")),
                     self.file((*base, i, "kernels")) if "kernels" in op else None,
                     tuple(op["runtimes"]) if "runtimes" in op else None)
            for i, op in enumerate(p["ops"])
        )
        backends = tuple(p.get("backends", DEFAULT_BACKENDS))
        dsp_arch = tuple(p.get("dsp_arch", ()))
        if "DSP" in backends and not dsp_arch:
            dsp_arch = tuple(sorted({t.soc.arch for t in targets}, key=lambda a: int(a[1:])))
            if not dsp_arch:
                self.error(("package", "backends"), "the DSP backend needs DSP architectures",
                           "list them under package.dsp_arch (v65, v66, v68, ...), or add SoCs "
                           "to prepare.matrix.soc")
        cpu_library = self.file(("package", "cpu_library")) if "cpu_library" in p else None
        return PackageSpec(p.get("name"), p.get("domain"), p.get("version"), ops, backends,
                           dsp_arch, cpu_library, self._native_check(p, backends))

    def _native_check(self, p: dict[str, Any], backends: tuple[str, ...]
                      ) -> NativeCheckSpec | None:
        """`package.native_check`: what C++ to compare (the sources it compiles, or the
        cpu_library), over which inputs (the calibration list, else the first run's)."""
        n = p.get("native_check")
        at: FieldPath = ("package", "native_check")
        if n is None:
            return None
        sources = self.file((*at, "sources"), folder=True) if "sources" in n else None
        if sources is not None and "CPU" not in backends:
            self.error((*at, "sources"), "compiling the C++ needs the CPU op package",
                       "add CPU to package.backends")
        if sources is not None and "cpu_library" in p:
            self.error((*at, "sources"), "give the C++ either as sources or as cpu_library, "
                       "not both", "sources: the build compiles them; cpu_library: you did")
        if sources is None and "cpu_library" not in p:
            self.error(at, "there is no C++ to check", "give native_check.sources (a folder of "
                       "op bodies, ops/<Op>.cpp) or package.cpu_library")
        if "model" not in self.data:
            self.error(at, "the check runs the model's custom ops: it needs a model: section",
                       key=True)
        elif "quantize" not in self.data and not self.data.get("run"):
            self.error(at, "the check runs the ops on the calibration inputs: it needs a "
                       "quantize: section (or a run: entry, whose input list it then takes)",
                       key=True)
        return NativeCheckSpec(sources, float(n.get("atol", 1e-5)), float(n.get("rtol", 1e-4)))

    def _model(self) -> ModelSpec | None:
        m = self.data.get("model")
        if m is None:
            return None
        runtimes = tuple(sorted((k, tuple(v)) for k, v in (m.get("runtimes") or {}).items()))
        return ModelSpec(self.file(("model", "onnx")), runtimes)

    def _quantize(self) -> QuantizeSpec | None:
        q = self.data.get("quantize")
        if q is None:
            return None
        plain = {k: v for k, v in q.items()
                 if k not in ("input_list", "override_encodings", "algorithms", "adaround",
                              "target", "sequences", "cache")}
        override = (self.file(("quantize", "override_encodings"))
                    if "override_encodings" in q else None)
        algorithms = tuple(q.get("algorithms") or ())
        if "adaround" in q and "adaround" not in algorithms:
            self.error(("quantize", "adaround"), "AdaRound settings, but quantize.algorithms "
                       "does not list adaround", "add adaround to quantize.algorithms, or "
                       "remove quantize.adaround")
        self._check_blocks(q, algorithms)
        listing, sequences = self._calibration(q)
        return QuantizeSpec(listing, sequences=sequences,
                            cache=tuple(sorted((q.get("cache") or {}).items())),
                            override_encodings=override, algorithms=algorithms,
                            adaround=tuple(sorted((q.get("adaround") or {}).items())),
                            target=self._target(q), **plain)

    def _calibration(self, q: dict[str, Any]) -> tuple[Path | None, Path | None]:
        """(input_list, sequences): exactly one of the two calibrates; `cache` names an LLM's
        cache only for sequences."""
        if "cache" in q and "sequences" not in q:
            self.error(("quantize", "cache"), "quantize.cache names the cache of token "
                       "sequences, but there are none", "remove quantize.cache, or calibrate "
                       "over quantize.sequences", key=True)
        both = {"input_list", "sequences"} & set(q)
        if len(both) != 1:
            self.error(("quantize",) if not both else ("quantize", "sequences"),
                       "missing required field 'input_list'" if not both else
                       "quantize has both input_list and sequences",
                       "calibrate over an input list (input_list) or, for an LLM with a KV "
                       "cache, over token id sequences (sequences): one of the two",
                       key=bool(both))
            return None, None
        if "input_list" in q:
            return self.file(("quantize", "input_list")), None
        return None, self.file(("quantize", "sequences"))

    def _target(self, q: dict[str, Any]) -> TargetSpec | None:
        """quantize.target (mixed precision): the widths it chooses from must hold the
        quantize settings' own, and it needs calibration."""
        t = q.get("target")
        if t is None:
            return None
        pair = tuple(t.get("weight_widths", (4, 8)))
        if q.get("weights_bitwidth", 8) not in pair:
            self.error(("quantize", "weights_bitwidth"), f"quantize.target chooses weights of "
                       f"{pair[0]} or {pair[1]} bits, not {q['weights_bitwidth']}",
                       "set weights_bitwidth to one of quantize.target.weight_widths, or "
                       "choose the pair that holds it")
        if q.get("float_fallback"):
            self.error(("quantize", "float_fallback"), "quantize.target needs calibration, "
                       "which float_fallback skips", "remove one of the two")
        if q.get("weights_block_size"):
            self.error(("quantize", "target"), "quantize.target chooses per-tensor widths; "
                       "block weights (weights_block_size) are not supported with it",
                       "remove one of the two")
        held_out = (self.file(("quantize", "target", "input_list"))
                    if "input_list" in t else None)
        return TargetSpec(float(t["min_sqnr_db"]), held_out, int(t.get("inputs", 8)),
                          (int(pair[0]), int(pair[1])))

    def _check_blocks(self, q: dict[str, Any], algorithms: tuple[str, ...]) -> None:
        """Block weights (weights_block_size, lpbq: udo_build.quant.blocks) and what they
        need."""
        if q.get("lpbq") and not q.get("weights_block_size"):
            self.error(("quantize", "lpbq"), "LPBQ quantizes weights per block, but "
                       "quantize.weights_block_size is not given", "add weights_block_size "
                       "(e.g. 64)")
        tuned = sorted({"adaround", "bias_correction"} & set(algorithms))
        if q.get("weights_block_size") and tuned:
            self.error(("quantize", "algorithms"), f"{', '.join(tuned)} tune per-channel "
                       "weights; block weights (weights_block_size) are not supported by them",
                       "leave them out, or quantize per channel")
        if q.get("weights_block_size") and q.get("weights_bitwidth", 8) not in (4, 8):
            self.error(("quantize", "weights_block_size"), "block weights are 4 or 8 bit",
                       "set weights_bitwidth to 4 or 8")

    def _targets(self, default_precision: str) -> list[Any]:
        prepare = self.data.get("prepare")
        if prepare is None:
            return []
        targets, warnings = expand(prepare["matrix"], self.soc, default_precision)
        for path, message in warnings:
            self.warn(path, message)
        for path, message, hint in graph_problems(prepare["matrix"]):
            self.error(path, message, hint)
        if not targets and not self.problems:
            self.error(("prepare", "matrix"), "the matrix yields no target",
                       "list SoCs under soc:, or check the exclude entries")
        return targets

    def _max_record_bytes(self) -> int | None:
        """prepare.max_record_bytes, in bytes (None: the model is not cut into parts)."""
        value = (self.data.get("prepare") or {}).get("max_record_bytes")
        if value is None:
            return None
        try:
            return parse_bytes(value)
        except ValueError as exc:
            self.error(("prepare", "max_record_bytes"), str(exc),
                       "a whole number of bytes, or a number and a unit: 2GiB, 500MB, 64KiB")
            return None

    def _runs(self, default_precision: str) -> tuple[RunSpec, ...]:
        runs = []
        seen: dict[str, int] = {}
        for i, r in enumerate(self.data.get("run") or []):
            path: FieldPath = ("run", i)
            if r["name"] in seen:
                self.error((*path, "name"), f"run name '{r['name']}' is used twice",
                           f"the first is run[{seen[r['name']]}]")
            seen.setdefault(r["name"], i)
            soc = self.soc((*path, "soc"), r["soc"])
            runs.append(RunSpec(
                name=r["name"], soc=soc or Soc(r["soc"], "v0", None),
                input_list=self._run_list(path, r),
                input_dimensions=Dims.of(r.get("input_dimensions")),
                outputs=Outputs.of(r.get("outputs")),
                optimization_level=r.get("optimization_level", DEFAULT_LEVEL),
                precision=r.get("precision", default_precision),
                mode=r.get("mode", "permissive"),
                check=RunCheck(**r.get("check", {})),
                decode=_decode(r.get("decode")),
                generate=_generate(r.get("generate")),
                prompt=(self.file((*path, "generate", "prompt")) if "generate" in r else None),
            ))
        return tuple(runs)

    def _run_list(self, path: FieldPath, run: dict[str, Any]) -> Path | None:
        """The run's input list: its own, or a decode run's `decode.input_list`; None for a
        generate run (it reads `generate.prompt`)."""
        if "max_drift_db" in (run.get("check") or {}) and not {"decode", "generate"} & set(run):
            self.error((*path, "check", "max_drift_db"), "max_drift_db bounds the drift of a "
                       "decode run's SQNR: this run does not decode",
                       "add a decode: section, or remove max_drift_db")
        if "generate" in run:
            for other in ("input_list", "decode", "input_dimensions"):
                if other in run:
                    self.error((*path, other), f"a generate run has no {other}: it feeds the "
                               "prompt and derives each graph's dimensions from the model",
                               f"remove {other}, or the generate: section", key=True)
            return None
        if "decode" in run:
            if "input_list" in run:
                self.error((*path, "input_list"), "a decode run reads decode.input_list (its "
                           "first line is the first step's inputs)",
                           "move the input list under decode:", key=True)
            return self.file((*path, "decode", "input_list"))
        if "input_list" not in run:
            self.error(path, "missing required field 'input_list'",
                       "name the input list the run infers over (or a decode: section)")
            return self.folder
        return self.file((*path, "input_list"))

    def _check_precisions(self, recipe: Recipe) -> None:
        if recipe.quantize is not None:
            return
        hint = "add a quantize: section with calibration data, or use precision fp16"
        for path, value in _precision_fields(self.data):
            if value == "int8":
                self.error(path, "int8 needs a quantized model", hint)


    def _check_served(self, recipe: Recipe) -> None:
        from .serve import unserved

        for i, reasons in unserved(recipe):
            run = recipe.runs[i]
            shown = "; ".join(reasons[:3]) + (f"; +{len(reasons) - 3} more"
                                              if len(reasons) > 3 else "")
            self.warn(("run", i), f"run {run.name} can never be served by the prepared matrix: "
                      "it will prepare online, at every start-up",
                      f"every target is rejected ({shown}); prepare a target for "
                      f"{run.soc.name} at O{run.optimization_level} {run.precision} with its "
                      "input dimensions and outputs")

    def _check_dims(self) -> None:
        for path, dims in _dims_fields(self.data):
            problem = tensor_problem(dims)
            if problem is not None:
                self.error(path, f"these input dimensions imply absurd memory: {problem}",
                           "check the dimensions (batch x channels x height x width)")


def _dims_fields(data: dict[str, Any]) -> list[tuple[FieldPath, list[int]]]:
    """Every input's dimension list in the recipe, with its field path."""
    matrix = (data.get("prepare") or {}).get("matrix") or {}
    found: list[tuple[FieldPath, Any]] = [
        (("prepare", "matrix", "input_dimensions", i), v)
        for i, v in enumerate(matrix.get("input_dimensions") or [])]
    found += [(("prepare", "matrix", "graphs", i, "input_dimensions"), g.get("input_dimensions"))
              for i, g in enumerate(matrix.get("graphs") or []) if isinstance(g, dict)]
    for section in ("include", "exclude"):
        found += [(("prepare", "matrix", section, i, "input_dimensions"), e["input_dimensions"])
                  for i, e in enumerate(matrix.get(section) or []) if "input_dimensions" in e]
    found += [(("run", i, "input_dimensions"), r["input_dimensions"])
              for i, r in enumerate(data.get("run") or []) if "input_dimensions" in r]
    return [((*path, name), dims) for path, mapping in found if isinstance(mapping, dict)
            for name, dims in mapping.items() if isinstance(dims, list)]


def _decode(section: dict[str, Any] | None) -> DecodeSettings | None:
    """A run's decode settings (their names are checked against the model at the run)."""
    if section is None:
        return None
    from ..runtime.decode import DecodeSettings  # only a recipe that decodes needs it

    return DecodeSettings(section["steps"], tuple(section["feed"].items()),
                          section.get("position"), section.get("mask"),
                          tuple((section.get("next_input") or {}).items()))


def _generate(section: dict[str, Any] | None) -> GenerateSettings | None:
    """A run's generate settings (its cache names are checked against the model at the run)."""
    if section is None:
        return None
    from ..runtime.generate import GenerateSettings  # only a recipe that generates needs it

    return GenerateSettings.from_params(section)


def _precision_fields(data: dict[str, Any]) -> list[tuple[FieldPath, Any]]:
    matrix = (data.get("prepare") or {}).get("matrix") or {}
    out: list[tuple[FieldPath, Any]] = [
        (("prepare", "matrix", "precision", i), v)
        for i, v in enumerate(matrix.get("precision", []))
    ]
    for section in ("include", "exclude"):
        for i, entry in enumerate(matrix.get(section) or []):
            if "precision" in entry:
                out.append((("prepare", "matrix", section, i, "precision"), entry["precision"]))
    for i, run in enumerate(data.get("run") or []):
        if "precision" in run:
            out.append((("run", i, "precision"), run["precision"]))
    return out


def _get(data: Any, path: FieldPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
