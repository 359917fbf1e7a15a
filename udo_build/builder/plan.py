"""The build graph: a recipe expanded into actions, each with its parameters and named inputs.

    opdef                    op configs -> normalized definitions (generic and per backend)
    package:<BACKEND>        definitions of one backend -> op package source tree
    convert                  ONNX model (+ definitions) -> float bundle
    equalize                 float bundle -> equalized float bundle (quantize.algorithms: cle)
    quantize                 float bundle + calibration list and files (+ kernels) -> int8 bundle
    adaround, bias-correct   int8 bundle + calibration list and files (+ kernels) -> int8 bundle
                             (quantize.algorithms: adaround, bias_correction; in that order)
    quantize:reference, quantize:alternate, mixed-sensitivity:<g>, mixed-search
                             quantize.target: the widths the final quantize takes (input
                             `widths`; see kinds/mixed_precision.py)
    outputs:<precision>      bundle + the targets' output requests -> each as tensor names
    prepare:<target id>      bundle + SoC arch/VTCM, level, dims, precision + tensor names
                             -> record
    combine:<record id>      the records of the graphs of one weight-shared record
                             (prepare.matrix.graphs) -> one multi-graph record
    assemble                 bundle + every record -> deployable bundle
    run:<name>               deployable bundle + inputs (+ kernels) -> outputs, metrics
    runtimes                 the recipe's runtime choices (only when it states any) -> the
                             choices prepare, assemble and run read (their input `runtimes`)
    parts:<precision>[:<i>]  bundle + tensor names + prepare.max_record_bytes (only when the
                             recipe sets it) -> the cuts into parts its prepares read
    check:<name>             the run's metrics + its check bounds -> the verdict
    native-check             float bundle + calibration list (+ kernels) + the C++ (the
                             cpu_library, or the CPU package and native_check.sources) -> the
                             comparison of each custom op's C++ with its numpy kernel

An input is a source file of the project or an output of another action. Parameters are plain
JSON, each kind's the `to_params()` of one typed value that the kind reads back with
`from_params` (OpdefParams, PackageParams, QuantizeSettings, OutputRequests, CompileTarget,
RunSettings, and RunCheck with the run's name for a check); only
those an action kind lists enter its key (a SoC's name is a parameter for messages, its arch and
VTCM are the ones that count; a run's checks are its check's).

`fan_out` tells the parts of a plan N CI runners split through a shared remote cache
(`--shard K/N`, see shards.py).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import UserError
from ..opdef.params import OpdefParams
from ..package.params import PackageParams
from ..quant.settings import QuantizeSettings
from ..recipe import Outputs, Recipe, RecordTarget
from ..recipe.model import NativeCheckSpec, OutputRequests, RunSpec
from ..source import format_path

if TYPE_CHECKING:
    from ..runtime.decode import DecodeSettings

BUNDLE_EXTENSION = ".udb"  # the model bundle (see udo_build.ir.bundle)
SENSITIVITY_GROUPS = 8  # mixed precision: the per-unit sensitivities in this many actions


class Source(NamedTuple):
    """A file of the project, keyed by its digest of kind `digest` (see
    udo_build.store.filecache): "content" (its bytes) or "python" (a module's normalized code:
    comments and docstrings do not count)."""

    path: Path
    digest: str = "content"


class Dep(NamedTuple):
    """An output of another action."""

    action: str
    output: str


# Source and Dep are NamedTuples (cheaper to define than frozen dataclasses, with the same equality
# and hash): a Source never equals a Dep, its path is a Path where a Dep's action is a str
Input = Source | Dep


@dataclass
class PlannedAction:
    """One action of a plan: its id, kind, parameters, inputs, label and what it publishes."""

    id: str
    kind: str
    params: dict[str, Any]
    inputs: dict[str, Input]
    label: str
    publish: dict[str, str] | None = None  # relative path -> output (None: as the action says)

    def published(self, result: Any) -> dict[str, str]:
        return dict(self.publish) if self.publish is not None else dict(result.publish)

    @property
    def deps(self) -> list[str]:
        return sorted({i.action for i in self.inputs.values() if isinstance(i, Dep)})


class Plan:
    """A recipe's actions, in dependency order."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe
        self.actions: dict[str, PlannedAction] = {}  # in dependency order

    def add(self, action: PlannedAction) -> None:
        missing = [d for d in action.deps if d not in self.actions]
        if missing or action.id in self.actions:
            raise ValueError(f"bad plan at {action.id}: {missing or 'duplicate id'}")
        self.actions[action.id] = action

    def select(self, patterns: list[str]) -> Plan:
        """The actions matching any pattern (fnmatch on ids), with everything they need."""
        chosen: set[str] = set()
        for pattern in patterns:
            hits = [a for a in self.actions if fnmatch.fnmatchcase(a, pattern)]
            if not hits:
                raise UserError(f"no action matches '{pattern}'",
                                hint="actions of this recipe: " + ", ".join(self.actions))
            chosen.update(hits)
        return self.closure(chosen)

    def gathering(self) -> Plan:
        """The work that needs several fan-out actions (the assemble step, a run of the
        deployable bundle), with everything it needs: the last shard builds it once the other
        shards' work is in the remote (see `fan_out`)."""
        return self.closure(set(fan_out(self).gathering))

    def closure(self, chosen: set[str]) -> Plan:
        """The actions of `chosen` and everything they need, in dependency order."""
        chosen = set(chosen)
        stack = list(chosen)
        while stack:
            for dep in self.actions[stack.pop()].deps:
                if dep not in chosen:
                    chosen.add(dep)
                    stack.append(dep)
        sub = Plan(self.recipe)
        for aid, action in self.actions.items():
            if aid in chosen:
                sub.actions[aid] = action
        return sub


# -- shards: N CI runners split a plan through a shared remote cache --------------------------

FAN_OUT_KINDS = ("prepare", "run")  # the expensive, many-per-recipe work shards split


@dataclass(frozen=True)
class Shard:
    """The `index`-th (from 1) of `count` shards of a plan (`--shard K/N`)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise UserError(f"shard '{self}': K must be from 1 to N",
                            hint="--shard K/N builds the K-th of N shards, e.g. --shard 1/3")

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, slash, count = text.partition("/")
        if not (slash and index.strip().isdigit() and count.strip().isdigit()):
            raise UserError(f"shard '{text}' is not K/N (two whole numbers)",
                            hint="--shard K/N builds the K-th of N shards, e.g. --shard 1/3")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class FanOut(NamedTuple):
    """A plan's actions by what they need of its fan-out (the prepares and runs):
    `upstream` needs none (opdef, packages, convert, quantize, outputs); `units` are the
    fan-out actions that need no other, each with what needs it alone (a check with its run),
    by the fan-out action's id; `gathering` needs several (assemble, a run of the deployable
    bundle, its check). Shards split the units by their leaders' keys (see shards.py). Read
    by field only: a named tuple, cheap to define for the builds that make no shards."""

    upstream: tuple[str, ...]
    units: dict[str, tuple[str, ...]]
    gathering: tuple[str, ...]


def fan_out(plan: Plan) -> FanOut:
    spans: dict[str, frozenset[str]] = {}  # action -> the fan-out actions it needs
    upstream: list[str] = []
    units: dict[str, list[str]] = {}
    gathering: list[str] = []
    for aid, action in plan.actions.items():  # in dependency order
        span = frozenset().union(*(spans[d] for d in action.deps))
        if action.kind in FAN_OUT_KINDS:
            span |= {aid}
        spans[aid] = span
        if not span:
            upstream.append(aid)
        elif len(span) > 1:
            gathering.append(aid)
        else:
            units.setdefault(next(iter(span)), []).append(aid)
    return FanOut(tuple(upstream), {k: tuple(v) for k, v in units.items()}, tuple(gathering))


def plan_recipe(recipe: Recipe) -> Plan:
    plan = Plan(recipe)
    kernels = _kernels(recipe)
    if recipe.package is not None:
        _plan_package(plan, recipe)
    if recipe.model is not None:
        inputs: dict[str, Input] = {"model": Source(recipe.model.onnx)}
        if recipe.package is not None:
            inputs["opdef"] = Dep("opdef", "semantics")  # descriptions do not count
        params = _external_data(recipe.model.onnx, inputs)
        stem = recipe.model.onnx.stem
        plan.add(PlannedAction("convert", "convert", params, inputs,
                               f"convert {recipe.model.onnx.name}",
                               {f"model/{stem}{BUNDLE_EXTENSION}": "bundle"}))
    if recipe.quantize is not None:
        _plan_quantize(plan, recipe, kernels)
    _plan_native_check(plan, recipe)
    resolved = _plan_outputs(plan, recipe)
    chosen = _plan_runtimes(plan, recipe)
    cuts = _plan_parts(plan, recipe, resolved, chosen)
    for target in recipe.targets:
        tensors = resolved[target.precision, target.outputs]
        plan.add(_prepare(target, {**kernels, **chosen, **cuts.get(tensors, {})}, tensors,
                          _bundle(recipe, target.precision)))
    if recipe.targets:  # records by position: a SoC's name enters no key
        records = _plan_records(plan, recipe)
        stem = recipe.model.onnx.stem if recipe.model else "model"
        plan.add(PlannedAction("assemble", "assemble", {},
                               {"bundle": _bundle(recipe, "int8"), **records, **chosen},
                               f"assemble the deployable bundle ({len(records)} records)",
                               {f"model/{stem}_deploy{BUNDLE_EXTENSION}": "bundle"}))
    for run in recipe.runs:
        _plan_run(plan, recipe, run, {**kernels, **chosen})
    return plan


def _plan_records(plan: Plan, recipe: Recipe) -> dict[str, Input]:
    """The assemble step's inputs `record[i]`: a target's prepare, or the `combine` of the
    graphs of its weight-shared record (prepare.matrix.graphs: RecordTarget.graph), each once,
    in the order the targets first name them. Each graph is its own prepare, keyed as any:
    changing one graph's dimensions re-runs its prepare and the combine only, and SoCs of equal
    arch and VTCM key both alike. The combine's inputs and `graphs` are in the order of the
    graphs' names: the recipe's order of them enters no key."""
    groups: dict[str, dict[str, str]] = {}  # record id -> graph name -> its prepare
    for target in recipe.targets:
        if target.graph:
            groups.setdefault(target.record_id, {})[target.graph] = f"prepare:{target.id}"
    records: dict[str, Input] = {}
    for target in recipe.targets:
        aid = f"combine:{target.record_id}" if target.graph else f"prepare:{target.id}"
        if target.graph and aid not in plan.actions:
            graphs = sorted(groups[target.record_id].items())
            plan.add(PlannedAction(
                aid, "combine", {"graphs": [name for name, _ in graphs]},
                {f"graph[{i}]": Dep(prepare, "record") for i, (_, prepare) in enumerate(graphs)},
                f"combine {len(graphs)} graphs ({', '.join(n for n, _ in graphs)}) for "
                f"{target.soc.name}"))
        if Dep(aid, "record") not in records.values():
            records[f"record[{len(records)}]"] = Dep(aid, "record")
    return records


def _plan_runtimes(plan: Plan, recipe: Recipe) -> dict[str, Input]:
    """The `runtimes` action when the recipe says which runtimes an op may use, as the input
    the steps that partition read; nothing otherwise (their keys stay as they were)."""
    choices: list[dict[str, Any]] = []
    if recipe.package is not None:
        choices += [{"config": i, "runtimes": list(op.runtimes),
                     "field": f"package.ops[{i}].runtimes"}
                    for i, op in enumerate(recipe.package.ops) if op.runtimes is not None]
    if recipe.model is not None:
        choices += [{"match": name, "runtimes": list(allowed),
                     "field": f"model.runtimes.{name}"} for name, allowed in recipe.model.runtimes]
    if not choices:
        return {}
    inputs: dict[str, Input] = {}
    if any("config" in c for c in choices):
        inputs["origins"] = Dep("opdef", "origins")
    plan.add(PlannedAction("runtimes", "runtimes", {"choices": choices}, inputs,
                           f"runtime choices ({len(choices)})"))
    return {"runtimes": Dep("runtimes", "choices")}


def _plan_parts(plan: Plan, recipe: Recipe, resolved: dict[tuple[str, Outputs], Dep],
                chosen: dict[str, Input]) -> dict[Dep, dict[str, Input]]:
    """One `parts` action per bundle and output set the targets prepare, when the recipe sets
    prepare.max_record_bytes: each output set's Dep -> the input `parts` of its prepares."""
    if recipe.max_record_bytes is None:
        return {}
    found: dict[Dep, dict[str, Input]] = {}
    for (precision, _), tensors in resolved.items():
        if tensors in found:
            continue
        aid = f"parts:{precision}" + ("" if tensors.output == "tensors[0]"
                                      else f":{tensors.output[8:-1]}")
        params = {"max_record_bytes": recipe.max_record_bytes, "precision": precision,
                  "at": list(_place(recipe, ("prepare", "max_record_bytes")))}
        plan.add(PlannedAction(aid, "parts", params,
                               {"bundle": _bundle(recipe, precision), "outputs": tensors,
                                **chosen},
                               f"cut the {precision} model into parts"))
        found[tensors] = {"parts": Dep(aid, "cuts")}
    return found


def _kernels(recipe: Recipe) -> dict[str, Input]:
    """The numpy kernels files, keyed by what they define: nothing of a kernels file's text
    beyond its code reaches an artifact (udo_build.kernels.load names its module after the op
    package, and messages' line numbers are not in artifacts)."""
    if recipe.package is None:
        return {}
    paths = list(dict.fromkeys(op.kernels for op in recipe.package.ops if op.kernels))
    kernels: dict[str, Input] = {f"kernels[{i}]": Source(p, digest="python")
                                 for i, p in enumerate(paths)}
    if recipe.package.cpu_library is not None:  # native op bodies, keyed by the library's bytes
        kernels[f"kernels[{len(paths)}]"] = Source(recipe.package.cpu_library)
    return kernels


def _plan_package(plan: Plan, recipe: Recipe) -> None:
    spec = recipe.package
    assert spec is not None
    configs: dict[str, Input] = {f"config[{i}]": Source(op.config)
                                 for i, op in enumerate(spec.ops)}
    plan.add(PlannedAction(
        "opdef", "opdef",
        OpdefParams(spec.name, spec.domain, spec.version, spec.backends).to_params(),
        configs, f"op definitions ({len(configs)} config{'s' * (len(configs) != 1)})",
    ))
    htp_archs = sorted({t.soc.arch for t in recipe.targets}, key=lambda a: int(a[1:]))
    with_kernels = tuple(op.kernels is not None for op in spec.ops)
    names = tuple(op.config.name for op in spec.ops)  # the packages copy the configs by these
    for backend in spec.backends:
        archs = {"DSP": spec.dsp_arch, "HTP": tuple(htp_archs)}.get(backend, ())
        plan.add(PlannedAction(
            f"package:{backend}", "package",
            PackageParams(backend, archs, with_kernels, names).to_params(),
            {"opdef": Dep("opdef", backend), "origins": Dep("opdef", "origins"), **configs},
            f"{backend} op package",
        ))


def _plan_quantize(plan: Plan, recipe: Recipe, kernels: dict[str, Input]) -> None:
    """quantize, and the algorithms the recipe lists, in the order the data flow asks for:
    equalize (CLE: float -> float) before, adaround (needs the encodings) and then bias-correct
    (after the weights' rounding is final) after; the last one's outputs are published."""
    q = recipe.quantize
    assert q is not None
    calibration, over = _calibration(plan, recipe, kernels)
    source: Input = Dep("convert", "bundle")
    if "cle" in q.algorithms:
        plan.add(PlannedAction("equalize", "equalize", {}, {"bundle": source},
                               "equalize the float model (CLE)"))
        source = Dep("equalize", "bundle")
    inputs: dict[str, Input] = {"bundle": source, **calibration}
    if q.override_encodings is not None:
        inputs["override_encodings"] = Source(q.override_encodings)
    inputs.update(kernels)
    settings = QuantizeSettings(q.act_bitwidth, q.weights_bitwidth, q.bias_bitwidth,
                                q.per_channel, q.quantizer, q.float_fallback, q.report_inputs,
                                q.weights_block_size, q.lpbq)
    stem = f"{recipe.model.onnx.stem}_quantized" if recipe.model else "model_quantized"
    publish = {f"model/{stem}{BUNDLE_EXTENSION}": "bundle",
               f"model/{stem}.encodings.json": "encodings"}
    if q.report_inputs > 0:
        publish["quant/layers.json"] = "layers"
    steps = _weight_steps(recipe)
    if q.target is not None:  # mixed precision: the final quantize takes the chosen widths
        _plan_target(plan, recipe, settings, inputs, kernels, calibration)
        inputs = {**inputs, "widths": Dep("mixed-search", "widths")}
    plan.add(PlannedAction("quantize", "quantize", settings.to_params(), inputs,
                           f"quantize with {q.quantizer} over {over}",
                           {} if steps else publish))
    previous = "quantize"
    for i, (aid, params, label) in enumerate(steps):
        step_inputs: dict[str, Input] = {"bundle": Dep(previous, "bundle"), **calibration,
                                         **kernels}
        if q.report_inputs > 0:
            step_inputs["layers"] = Dep(previous, "layers")
        if aid == "bias-correct" and previous != "quantize":  # the weights before AdaRound
            step_inputs["reference"] = Dep("quantize", "bundle")
        plan.add(PlannedAction(aid, aid, {**params, "report_inputs": q.report_inputs},
                               step_inputs, f"{label} over {over}",
                               publish if i == len(steps) - 1 else {}))
        previous = aid


def _calibration(plan: Plan, recipe: Recipe, kernels: dict[str, Input]
                 ) -> tuple[dict[str, Input], str]:
    """(the calibration inputs of quantize and the steps after it, what they are in words):
    the recipe's input list and its files, or the feeds `sequence-feeds` makes of the token
    sequences (kinds/sequences.py), planned here."""
    q = recipe.quantize
    assert q is not None
    if q.input_list is not None:
        count, files = _input_files(q.input_list, recipe.root)
        return {"input_list": Source(q.input_list), **files}, f"{count} inputs"
    assert q.sequences is not None  # recipe/load.py: one of the two
    return plan_sequence_feeds(plan, Dep("convert", "bundle"), q.sequences, dict(q.cache),
                               kernels)


def plan_sequence_feeds(plan: Plan, bundle: Dep, sequences: Path, cache: dict[str, Any],
                        kernels: dict[str, Input]) -> tuple[dict[str, Input], str]:
    """Plan the `sequence-feeds` action that makes calibration inputs of the float bundle
    `bundle` and the token sequences (a recipe's, and `udo-build quantize --sequences`: one
    action, one key); (the calibration inputs it gives, what they are in words)."""
    count = sequence_count(sequences)
    plan.add(PlannedAction("sequence-feeds", "sequence-feeds", {"cache": cache},
                           {"bundle": bundle, "sequences": Source(sequences), **kernels},
                           f"calibration inputs from {count} token sequence"
                           f"{'s' * (count != 1)}"))
    return {"feeds": Dep("sequence-feeds", "feeds")}, f"{count} token sequences"


def sequence_count(path: Path) -> int:
    """The sequences a sequences file holds (its lines with a token id; the action reads and
    checks them against the model)."""
    from ..model.input_list import MAX_LIST_BYTES
    from ..source import read_limited

    text = read_limited(path, MAX_LIST_BYTES, "sequences file").decode("utf-8", "replace")
    return sum(1 for line in text.splitlines() if line.split("#", 1)[0].strip(" \t,"))


def _plan_target(plan: Plan, recipe: Recipe, settings: QuantizeSettings,
                 inputs: dict[str, Input], kernels: dict[str, Input],
                 calibration: dict[str, Input]) -> None:
    """quantize.target: the reference and alternate models (the recipe's widths, the other
    ones: activations 8 <-> 16, weights the other of target.weight_widths), the
    sensitivities in SENSITIVITY_GROUPS actions, the search (kinds/mixed_precision.py).
    Held-out inputs: target.input_list, else the first run's, else the calibration list."""
    from dataclasses import replace

    from ..quant.algorithm_settings import TargetSettings

    q = recipe.quantize
    assert q is not None and q.target is not None
    target = q.target
    models = {"reference": replace(settings, report_inputs=0),
              "alternate": replace(settings, act_bitwidth=24 - settings.act_bitwidth,
                                   weights_bitwidth=sum(target.weight_widths)
                                   - settings.weights_bitwidth, report_inputs=0)}
    for name, chosen in models.items():
        plan.add(PlannedAction(f"quantize:{name}", "quantize", chosen.to_params(), inputs,
                               f"quantize at the {name} widths (act {chosen.act_bitwidth}, "
                               f"weights {chosen.weights_bitwidth})"))
    listing = target.input_list or (recipe.runs[0].input_list if recipe.runs else None)
    held: dict[str, Input] = {"reference": Dep("quantize:reference", "bundle"),
                              "alternate": Dep("quantize:alternate", "bundle"), **kernels}
    if listing is None:  # the calibration inputs (a list, or the feeds of token sequences)
        held.update(calibration)
    else:
        _, files = _input_files(listing, recipe.root)
        held.update({"input_list": Source(listing), **files})
    for g in range(SENSITIVITY_GROUPS):
        plan.add(PlannedAction(f"mixed-sensitivity:{g}", "mixed-sensitivity",
                               {"group": g, "groups": SENSITIVITY_GROUPS,
                                "inputs": target.inputs}, held,
                               f"width sensitivities, group {g + 1} of {SENSITIVITY_GROUPS}"))
    sensitivities = {f"sensitivity[{g}]": Dep(f"mixed-sensitivity:{g}", "sensitivity")
                     for g in range(SENSITIVITY_GROUPS)}
    params = {**TargetSettings(target.min_sqnr_db, target.inputs).to_params(),
              "at": list(_place(recipe, ("quantize", "target", "min_sqnr_db")))}
    plan.add(PlannedAction("mixed-search", "mixed-search", params, {**held, **sensitivities},
                           f"mixed precision search for {target.min_sqnr_db:g} dB",
                           {"quant/mixed.json": "mixed"}))


def _weight_steps(recipe: Recipe) -> list[tuple[str, dict[str, Any], str]]:
    """(action id = kind, parameters, label) of the algorithms that follow quantize."""
    q = recipe.quantize
    assert q is not None
    steps = []
    if "adaround" in q.algorithms:
        from ..quant.algorithm_settings import AdaroundSettings

        settings = AdaroundSettings(**dict(q.adaround))
        steps.append(("adaround", settings.to_params(),
                      f"AdaRound ({settings.iterations} iterations)"))
    if "bias_correction" in q.algorithms:
        steps.append(("bias-correct", {}, "bias correction"))
    return steps


def _quantized(recipe: Recipe) -> str:
    """The action whose bundle is the recipe's quantized model."""
    steps = _weight_steps(recipe) if recipe.quantize is not None else []
    return steps[-1][0] if steps else "quantize"


def _plan_native_check(plan: Plan, recipe: Recipe) -> None:
    """The C++ op bodies against the numpy kernels (kinds/native_check.py), wherever the
    package has C++ (a cpu_library, or native_check.sources) and the model has inputs to run
    them on: the calibration list, else the first input list of a run (a generate run reads
    a prompt instead)."""
    spec = recipe.package
    if spec is None or recipe.model is None:
        return
    check = spec.native_check or (NativeCheckSpec() if spec.cpu_library else None)
    listing = ((recipe.quantize.input_list if recipe.quantize is not None else None)
               or next((r.input_list for r in recipe.runs if r.input_list), None))
    if check is None or listing is None:
        return
    _, files = _input_files(listing, recipe.root)
    inputs: dict[str, Input] = {"bundle": Dep("convert", "bundle"),
                                "input_list": Source(listing), **files}
    paths = list(dict.fromkeys(op.kernels for op in spec.ops if op.kernels))
    inputs.update({f"kernels[{i}]": Source(p, digest="python") for i, p in enumerate(paths)})
    names: list[str] = []
    if check.sources is not None:
        found = sorted(p for p in check.sources.rglob("*")
                       if p.is_file() and not p.name.startswith("."))
        names = [p.relative_to(check.sources).as_posix() for p in found]
        inputs["package"] = Dep("package:CPU", "package")
        inputs.update({f"sources[{i}]": Source(p) for i, p in enumerate(found)})
    elif spec.cpu_library is not None:
        inputs["library"] = Source(spec.cpu_library)
    params = {"atol": check.atol, "rtol": check.rtol, "sources": names,
              "field": "package.native_check.sources"}
    plan.add(PlannedAction("native-check", "native-check", params, inputs,
                           "C++ op bodies against the numpy kernels",
                           {"native/check.json": "comparison"}))


def _external_data(model: Path, inputs: dict[str, Input]) -> dict[str, Any]:
    """The external data files the model names, as keyed sources (`external_data[i]`) and the
    convert parameter saying where each goes beside the model (their names are the model's:
    its digest keys them)."""
    from ..model.external_files import referenced_files

    files = referenced_files(model)
    for i, (_, path) in enumerate(files):
        inputs[f"external_data[{i}]"] = Source(path)
    return {"external_data": [location for location, _ in files]} if files else {}


def _input_files(path: Path, root: Path) -> tuple[int, dict[str, Input]]:
    """(the number of inferences of an input list, the files it names as inputs)."""
    from ..model.input_list import parse_input_list

    listing = parse_input_list(path, root)
    return len(listing.inferences), {f"input_list.files[{i}]": Source(p)
                                     for i, p in enumerate(listing.files())}


def _bundle(recipe: Recipe, precision: str) -> Dep:
    if precision == "int8" and recipe.quantize is not None:
        return Dep(_quantized(recipe), "bundle")
    return Dep("convert", "bundle")


def _plan_outputs(plan: Plan, recipe: Recipe) -> dict[tuple[str, Outputs], Dep]:
    """One `outputs` action per bundle the targets prepare from, resolving their distinct
    output requests to tensor names: (precision, request) -> its resolved names."""
    requests: dict[str, dict[Outputs, RecordTarget]] = {}
    for target in recipe.targets:  # the first target writing a request says where it is
        requests.setdefault(target.precision, {}).setdefault(target.outputs, target)
    found: dict[tuple[str, Outputs], Dep] = {}
    for precision, firsts in requests.items():
        aid = f"outputs:{precision}"
        places = tuple(_place(recipe, t.outputs_at) for t in firsts.values())
        params = OutputRequests(tuple(firsts), places).to_params()
        plan.add(PlannedAction(aid, "outputs", params, {"bundle": _bundle(recipe, precision)},
                               f"resolve {len(firsts)} output request"
                               f"{'s' * (len(firsts) != 1)} on the {precision} bundle"))
        found.update({(precision, r): Dep(aid, f"tensors[{i}]") for i, r in enumerate(firsts)})
    return found


def _place(recipe: Recipe, path: tuple[str | int, ...]) -> tuple[str | None, int | None,
                                                                 int | None, str]:
    """(file, line, column, field path) of a recipe field, for messages."""
    if recipe.positions is None:
        return (str(recipe.path), None, None, format_path(path))
    line, column = recipe.positions.of(path)
    return (recipe.positions.file, line, column, format_path(path))


def _decode_places(recipe: Recipe, i: int, decode: DecodeSettings) -> dict[str, list[Any]]:
    """Where each field of run i's decode section is, by its path under `decode` joined with
    dots ("": the section itself), for messages only."""
    subs: list[tuple[str, ...]] = [(), ("steps",), ("input_list",),
                                   *((f, o) for f, o, _ in decode.fed),
                                   *((f,) for f in ("position", "mask") if getattr(decode, f))]
    base = ("run", i, "decode")
    return {".".join(sub): list(_place(recipe, (*base, *sub))) for sub in subs}


def _prepare(target: RecordTarget, kernels: dict[str, Input], outputs: Dep,
             bundle: Dep) -> PlannedAction:
    """A cache record; the kernels count (their module may add optimization rules, and shapes
    of custom ops at other input dimensions come from running them). Its outputs enter as the
    resolved tensor names (`outputs`); the request stays in the params for messages."""
    params = {"soc": target.soc.name, **target.compile_target().to_params()}
    inputs: dict[str, Input] = {"bundle": bundle, "outputs": outputs,
                                **kernels}
    return PlannedAction(f"prepare:{target.id}", "prepare", params, inputs,
                         f"prepare {target.id}")


def _plan_run(plan: Plan, recipe: Recipe, run: RunSpec, kernels: dict[str, Input]) -> None:
    """The run (inference and metrics), then its checks as their own step when it states any
    (over the run's stored metrics: a threshold enters only the check's key)."""
    inputs: dict[str, Input] = {"float_bundle": Dep("convert", "bundle")}
    if run.prompt is not None:  # a generate run reads token ids, not an input list
        inputs["prompt"] = Source(run.prompt)
    else:
        assert run.input_list is not None  # every other run has one (recipe/load.py)
        _, files = _input_files(run.input_list, recipe.root)
        inputs.update({"input_list": Source(run.input_list), **files})
    if recipe.targets:
        inputs["deployable"] = Dep("assemble", "bundle")
    elif run.precision == "int8" and recipe.quantize is not None:
        inputs["bundle"] = Dep(_quantized(recipe), "bundle")
    inputs.update(kernels)
    settings = run.settings()
    params = settings.to_params()
    if run.decode is not None:  # where each decode field is, for the run's errors
        params["decode_at"] = _decode_places(recipe, recipe.runs.index(run), run.decode)
    if run.generate is not None:  # where its section is, for the run's errors
        params["generate_at"] = list(_place(recipe, ("run", recipe.runs.index(run),
                                                     "generate")))
    plan.add(PlannedAction(f"run:{run.name}", "run", params, inputs,
                           f"run {run.name} on {run.soc.name}",
                           {f"runs/{run.name}": "results"}))
    if settings.check.to_params():
        plan.add(PlannedAction(f"check:{run.name}", "check",
                               {"run": run.name, **settings.check.to_params()},
                               {"metrics": Dep(f"run:{run.name}", "metrics")},
                               f"check {run.name}", {f"runs/{run.name}/check.json": "verdict"}))
