"""Checking a loaded recipe against its model, without building anything.

`load_recipe` checks what the recipe says on its own (schema, SoCs, files, sections); these
checks open the model too, so that what a build would only find late is found by `validate`:

- every `input_dimensions` entry names an input of the model, with the input's rank, every
  input without fixed dimensions in the model is given some, and the model's shapes infer at
  them (the prepare's own shape inference, udo_build.compiler.shapes);
- every output layer and tensor the matrix or a run names exists in the model (named the way
  the compiler resolves them: udo_build.compiler.lower.resolve_outputs);
- every decode run's fields name outputs and inputs of the model that chain (an output feeds
  an input of its shape, or one longer along one axis), and outputs the run requests
  (udo_build.runtime.decode.DecodeSettings.problems);
- every generate run's cache names are inputs and outputs of the model that follow the cache
  convention (udo_build.runtime.generate.CacheLayout);
- every run is served by a record of the prepare matrix, chosen by the runtime's own selection
  (udo_build.runtime.records.choose_record over rows shaped as the assemble step writes them,
  outputs resolved to tensor names), unless its mode asks for none.

Each problem carries the recipe's file, line and field path. `check_against_model` returns them
all (an empty list: the recipe fits its model).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Problem, UserError
from ..source import FieldPath, Positions
from .model import Dims, Outputs, Recipe, RecordTarget, RunSpec

if TYPE_CHECKING:
    from ..ir import Model
    from ..opdef.model import OpPackageDef

MATRIX: FieldPath = ("prepare", "matrix")


def check_against_model(recipe: Recipe, opdefs: OpPackageDef | None) -> list[Problem]:
    """Every way the recipe disagrees with its model (see the module docstring)."""
    from ..model.onnx_import import import_onnx, load_onnx

    if recipe.model is None or recipe.positions is None:
        return []
    file = str(recipe.model.onnx)
    try:
        model = import_onnx(load_onnx(file), file=file, opdefs=opdefs)
    except UserError as exc:
        return exc.problems
    data = _recipe_data(recipe)
    check = _Checker(model, recipe.positions, [])
    for path, value in _fields(data, "input_dimensions"):
        if check.dims(path, value):
            check.runs_at(path, value)
    for path, value in _fields(data, "outputs"):
        check.outputs(path, value)
    check.native_dims(data)
    check.runs_served(recipe)
    check.decodes(recipe)
    check.generates(recipe, data)
    return list(dict.fromkeys(check.problems))


def _recipe_data(recipe: Recipe) -> dict[str, Any]:
    """The recipe's plain data (the loaded values carry no field paths)."""
    from ..source import MAX_YAML_BYTES, decode_text, load_yaml, read_limited

    file = str(recipe.path)
    data, _ = load_yaml(decode_text(read_limited(recipe.path, MAX_YAML_BYTES, "recipe"), file),
                        file)
    return data


def _fields(data: dict[str, Any], axis: str) -> Iterator[tuple[FieldPath, Any]]:
    """Every value of `axis` in the matrix (its list, include and exclude) and in the runs."""
    matrix = (data.get("prepare") or {}).get("matrix") or {}
    for i, value in enumerate(matrix.get(axis) or []):
        yield (*MATRIX, axis, i), value
    for i, graph in enumerate(matrix.get("graphs") or []):  # a weight-shared record's graphs
        if axis in graph:
            yield (*MATRIX, "graphs", i, axis), graph[axis]
    for section in ("include", "exclude"):
        for i, entry in enumerate(matrix.get(section) or []):
            if axis in entry:
                yield (*MATRIX, section, i, axis), entry[axis]
    for i, run in enumerate(data.get("run") or []):
        if axis in run:
            yield ("run", i, axis), run[axis]


@dataclass
class _Checker:
    model: Model
    positions: Positions
    problems: list[Problem]

    def error(self, path: FieldPath, message: str, hint: str | None = None,
              *, key: bool = False) -> None:
        self.problems.append(self.positions.error(path, message, hint, key=key).problem)

    @property
    def inputs(self) -> dict[str, Any]:
        return {t.name: t for t in self.model.graph.inputs if t.name not in self.model.weights}

    def _inputs_hint(self) -> str:
        return "the model's inputs: " + ", ".join(
            f"{n} ({_shape_text(t.shape)})" for n, t in self.inputs.items())

    def dims(self, path: FieldPath, mapping: Any) -> bool:
        """Whether every input `mapping` names is the model's, at its rank."""
        inputs = self.inputs
        before = len(self.problems)
        for name, dims in (mapping or {}).items():
            info = inputs.get(name)
            if info is None:
                self.error((*path, name), f"'{name}' is not an input of the model",
                           self._inputs_hint(), key=True)
            elif info.shape is not None and len(info.shape) != len(dims):
                self.error((*path, name), f"input '{name}' has rank {len(info.shape)} "
                           f"({_shape_text(info.shape)}), these dimensions have {len(dims)}",
                           f"give {len(info.shape)} dimensions, as {_shape_text(info.shape)}")
        return len(self.problems) == before

    def runs_at(self, path: FieldPath, mapping: Any) -> None:
        """The model's shapes infer at these dimensions (udo_build.compiler.shapes, the
        prepare's own inference: custom ops as shape-preserving where they were at the
        model's own dimensions)."""
        from ..compiler.shapes import infer
        from ..runtime.records import native_dims

        dims = {**native_dims(self.model), **(mapping or {})}
        if not mapping or set(dims) != set(self.inputs):
            return  # the model's own, or an input without dimensions (reported apart)
        try:
            infer(self.model, dims)
        except UserError as exc:
            self.error(path, exc.problem.message, exc.problem.hint)

    def native_dims(self, data: dict[str, Any]) -> None:
        """Entries that keep the model's own dimensions need an input without symbolic ones."""
        loose = [n for n, t in self.inputs.items() if t.static_shape is None]
        if not loose:
            return
        matrix = (data.get("prepare") or {}).get("matrix")
        entries: list[tuple[FieldPath, Any]] = []
        if matrix is not None and "graphs" in matrix:
            entries += [((*MATRIX, "graphs", i, "input_dimensions"), g.get("input_dimensions"))
                        for i, g in enumerate(matrix["graphs"])]
        elif matrix is not None:
            entries += [((*MATRIX, "input_dimensions", i), v)
                        for i, v in enumerate(matrix.get("input_dimensions") or [{}])]
        entries += [(("run", i), r.get("input_dimensions") or {})
                    for i, r in enumerate(data.get("run") or [])]
        for path, mapping in entries:
            missing = [n for n in loose if n not in (mapping or {})]
            if missing:
                self.error(path, "the model's input " + ", ".join(
                    f"'{n}' ({_shape_text(self.inputs[n].shape)})" for n in missing)
                    + " has no fixed dimensions", "give them under input_dimensions")

    def outputs(self, path: FieldPath, value: Any) -> None:
        from ..compiler.lower import resolve_outputs

        if not isinstance(value, dict):
            return
        for kind in ("layers", "tensors"):
            for j, name in enumerate(value.get(kind) or []):
                try:
                    resolve_outputs(self.model, {kind: [name]})
                except UserError as exc:
                    self.error((*path, kind, j), exc.problem.message, exc.problem.hint)

    def resolved(self, outputs: Outputs) -> Any:
        """The tensor names `outputs` asks for (None when a name is not the model's)."""
        from ..compiler.lower import resolve_outputs

        try:
            return {"tensors": resolve_outputs(self.model, outputs.to_json())}
        except UserError:
            return None

    def runs_served(self, recipe: Recipe) -> None:
        from ..runtime.records import choose_record, native_dims

        rows = [row for t in recipe.targets if (row := self._row(t)) is not None]
        native = native_dims(self.model)
        for i, run in enumerate(recipe.runs):
            outputs = self.resolved(run.outputs)
            if outputs is None or run.mode == "always_generate_new" or run.generate or not _dims_ok(
                    run.input_dimensions, self.inputs):
                continue
            choice = choose_record({"records": rows}, run.settings(), native,
                                   outputs["tensors"])
            if choice.part is None:
                self.error(("run", i), _unserved(run, len(rows)), _why(choice.seen))

    def decodes(self, recipe: Recipe) -> None:
        """Each decode run's fields against the model, at the run's input dimensions."""
        for i, run in enumerate(recipe.runs):
            if run.decode is None or not _dims_ok(run.input_dimensions, self.inputs):
                continue
            dims = dict(run.input_dimensions.items)
            inputs = {n: dims.get(n, t.static_shape) for n, t in self.inputs.items()}
            outputs = {t.name: None if dims else t.static_shape  # shapes at the model's own
                       for t in self.model.graph.outputs}
            requested = self.resolved(run.outputs)
            for field, message, hint in run.decode.problems(
                    inputs, outputs, None if requested is None else requested["tensors"]):
                sub = tuple(field.split(".", 1))
                self.error(("run", i, "decode", *sub), message, hint,
                           key=len(sub) > 1)

    def generates(self, recipe: Recipe, data: Any) -> None:
        """Each generate run's cache names against the model (udo_build.runtime.generate)."""
        from ..runtime.generate import CacheLayout, LayoutError

        inputs = {n: (t.static_shape, t.dtype) for n, t in self.inputs.items()}
        outputs = {t.name: t.static_shape for t in self.model.graph.outputs}
        for i, run in enumerate(recipe.runs):
            if run.generate is None:
                continue
            try:
                CacheLayout.of(run.generate.cache, inputs, outputs)
            except LayoutError as exc:
                path: FieldPath = ("run", i, "generate")
                section = data["run"][i]["generate"]
                for part in exc.field.split("."):  # as deep as the recipe writes it
                    if not isinstance(section, dict) or part not in section:
                        break
                    path, section = (*path, part), section[part]
                self.error(path, exc.message, exc.hint or None)

    def _row(self, target: RecordTarget) -> dict[str, Any] | None:
        """The row the assemble step would write for `target`'s record."""
        from ..runtime.records import native_dims

        outputs = self.resolved(target.outputs)
        if outputs is None or not _dims_ok(target.input_dimensions, self.inputs):
            return None
        key = target.compile_target().to_params()
        dims = {**native_dims(self.model), **key["input_dimensions"]}  # as the compiler keys
        return {"name": target.id, "identifier": "", "size": 0,
                "level": key["optimization_level"], "arch": key["arch"],
                "vtcm_mb": key["vtcm_mb"],
                "dims": ";".join(f"{k}={'x'.join(map(str, v))}" for k, v in dims.items()),
                "outputs": ",".join(outputs["tensors"]), "part": target.id,
                "precision": key["precision"], "input_dimensions": dims,
                "output_tensors": sorted(outputs["tensors"])}


def _dims_ok(dims: Dims, inputs: dict[str, Any]) -> bool:
    """Whether `dims` name inputs of the model at their ranks (else its problem is reported)."""
    return all(name in inputs and (inputs[name].shape is None
                                   or len(inputs[name].shape) == len(d))
               for name, d in dims.items)


def _unserved(run: RunSpec, count: int) -> str:
    return (f"run '{run.name}' ({run.soc.name}, {run.soc.arch}, {run.soc.vtcm_mb} MB VTCM, "
            f"O{run.optimization_level}, {run.precision}, input dimensions "
            f"{run.input_dimensions.label}, outputs {run.outputs.label}) is served by none of "
            f"the {count} prepared records: it would prepare online at every start-up")


def _why(seen: tuple[tuple[str, str], ...], limit: int = 6) -> str:
    if not seen:
        return "add a prepare: matrix whose targets serve it"
    shown = "; ".join(f"{part}: {why}" for part, why in seen[:limit])
    more = f"; and {len(seen) - limit} more" if len(seen) > limit else ""
    return f"add a prepare target that serves it (records seen: {shown}{more})"


def _shape_text(shape: Any) -> str:
    return "x".join(str(d) for d in shape) if shape is not None else "unknown shape"
