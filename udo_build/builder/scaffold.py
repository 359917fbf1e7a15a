"""`udo-build init MODEL.onnx`: a starting project for a model with custom nodes.

For every node the emulator's default package does not know (a non-ONNX domain, or an ONNX op
it has no kernel for), one op per node type goes into an XML OpDefCollection: inputs and outputs
with the ranks and datatypes the model gives them (shape inference; a rank the nodes disagree on,
or do not state, is ND), the node attributes as parameters with their types (mandatory when every
node sets them, else optional with the first node's value as default). Next to it: the numpy
kernels stub the package generator writes (`udo_build.package.stub`), and a recipe that generates
the CPU and HTP packages, converts the model, quantizes it, prepares a record and runs it with a
check. The recipe's input lists name input files init writes too: random values of the model's
input shapes (seeded: the same bytes on every machine), placeholders for real calibration and
test data, as the recipe's comments and init's message say. An unwritten kernel fails the first
step that runs its op (quantize's calibration) with "kernel not written: <op> in <file>".

Nothing is overwritten: when any of the files exists, none is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ..errors import Diagnostics, UserError

# ONNX TensorProto element types -> op config datatypes
DATATYPES = {1: "FLOAT_32", 2: "UINT_8", 3: "INT_8", 4: "UINT_16", 5: "INT_16", 6: "INT_32",
             7: "INT_64", 8: "STRING", 9: "BOOL_8", 10: "FLOAT_16", 11: "FLOAT_64",
             12: "UINT_32", 13: "UINT_64"}
BACKENDS = ("CPU", "HTP")
DEFAULT_DOMAIN = "aisw"
INT32 = (-(2 ** 31), 2 ** 31 - 1)
SOC = "sm8550"  # the SoC the recipe prepares for and runs on
DATA_SETS = (("calib", 4), ("test", 1))  # (placeholder input list, inferences)
INTEGER_TYPES = frozenset({2, 3, 4, 5, 6, 7, 12, 13})
BOOL = 9


@dataclass(frozen=True)
class Tensor:
    name: str
    rank: str  # 1D..5D or ND
    datatype: str
    mandatory: bool = True


@dataclass(frozen=True)
class Param:
    name: str
    rank: str  # SCALAR or 1D
    datatype: str
    default: str | None  # the XML text; None: mandatory


@dataclass(frozen=True)
class CustomOp:
    name: str
    nodes: tuple[str, ...]
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    params: tuple[Param, ...]
    onnx_domain: bool  # an ONNX op: its config says UseDefaultTranslation


@dataclass(frozen=True)
class ModelInput:
    name: str
    elem_type: int  # ONNX TensorProto element type
    dims: tuple[int | None, ...]  # None: symbolic (the placeholder files take 1)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(1 if d is None else d for d in self.dims)


@dataclass(frozen=True)
class Scaffold:
    package: str
    domain: str
    ops: tuple[CustomOp, ...]
    inputs: tuple[ModelInput, ...]  # the model's, as the placeholder data fills them
    files: dict[Path, bytes]  # absolute path (below `folder`) -> content
    folder: Path  # the --out folder, resolved: every file is written through it


def plan(model_path: Path, out: Path, package: str | None = None) -> Scaffold:
    """The files `init` writes for the model (nothing is written yet)."""
    from ..model.onnx_import import ONNX_DOMAINS, load_onnx

    proto = _inferred(load_onnx(model_path), str(model_path))
    nodes = [n for n in proto.graph.node if _unknown(n, ONNX_DOMAINS)]
    if not nodes:
        raise UserError("every node of the model is an op of the emulator's default package",
                        file=model_path, hint="no op config is needed: convert the model as "
                                              "it is (udo-build convert)")
    domains = sorted({n.domain for n in nodes if n.domain not in ONNX_DOMAINS})
    if len(domains) > 1:
        raise UserError(f"the custom nodes use {len(domains)} domains ({', '.join(domains)}); "
                        "init writes one package", file=model_path,
                        hint="write one op config per domain")
    name = package or _camel(model_path.stem) + "OpPackage"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise UserError(f"package name '{name}' is not an identifier",
                        hint="pass --package NAME (letters, digits, _)")
    ops = _ops(nodes, _types(proto), ONNX_DOMAINS)
    domain = domains[0] if domains else DEFAULT_DOMAIN
    inputs = _inputs(proto, model_path)
    return Scaffold(name, domain, ops, inputs,
                    _files(model_path, out, name, domain, ops, inputs), out.resolve())


def write(scaffold: Scaffold) -> None:
    """Write the files; a UserError naming those that exist (and nothing written) if any do.
    They are written through the folder: a link planted in it is refused, never followed."""
    from ..atomic import Confined

    with Confined(scaffold.folder) as out:
        rels = {path.relative_to(scaffold.folder).as_posix(): data
                for path, data in scaffold.files.items()}
        taken = [str(scaffold.folder / rel) for rel in rels if out.lstat(rel) is not None]
        if taken:
            raise UserError("init does not overwrite: " + ", ".join(taken) + " already exist"
                            + ("s" if len(taken) == 1 else ""),
                            hint="remove them, or pass another --out folder")
        for rel, data in rels.items():
            out.write(rel, data, durable=True)


# -- reading the model ----------------------------------------------------------------------------


def _inferred(proto: Any, file: str) -> Any:
    from onnx import shape_inference

    try:
        return shape_inference.infer_shapes(proto)
    except Exception as exc:  # onnx raises its own InferenceError and bare RuntimeErrors
        raise UserError(f"ONNX shape inference fails: {str(exc).splitlines()[0][:200]}",
                        file=file) from None


def _inputs(proto: Any, file: Path) -> tuple[ModelInput, ...]:
    """The model's inputs (those that are not initializers), with their shapes."""
    weights = {init.name for init in proto.graph.initializer}
    found = []
    for vi in proto.graph.input:
        if vi.name in weights:
            continue
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not t.HasField("shape"):
            raise UserError(f"input '{vi.name}' is not a tensor of a known rank", file=file,
                            hint="init writes placeholder inputs of the model's input shapes: "
                                 "give the input a shape in the model")
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        found.append(ModelInput(vi.name, t.elem_type, dims))
    return tuple(found)


def _unknown(node: Any, onnx_domains: Sequence[str]) -> bool:
    from ..kernels.default import DEFAULT

    return node.domain not in onnx_domains or not DEFAULT.has(node.op_type)


def _types(proto: Any) -> dict[str, tuple[int | None, int]]:
    """tensor name -> (rank or None, element type) for the values the model types."""
    out: dict[str, tuple[int | None, int]] = {}
    graph = proto.graph
    for vi in (*graph.input, *graph.value_info, *graph.output):
        t = vi.type.tensor_type
        out[vi.name] = (len(t.shape.dim) if t.HasField("shape") else None, t.elem_type)
    for init in graph.initializer:
        out[init.name] = (len(init.dims), init.data_type)
    return out


def _ops(nodes: list[Any], types: dict[str, tuple[int | None, int]],
         onnx_domains: Sequence[str]) -> tuple[CustomOp, ...]:
    by_type: dict[str, list[Any]] = {}
    for node in nodes:
        by_type.setdefault(node.op_type, []).append(node)
    return tuple(CustomOp(op_type, tuple(n.name or op_type for n in group),
                          _tensors(group, "input", types), _tensors(group, "output", types),
                          _params(op_type, group), group[0].domain in onnx_domains)
                 for op_type, group in by_type.items())


def _tensors(group: list[Any], kind: str, types: dict[str, tuple[int | None, int]]
             ) -> tuple[Tensor, ...]:
    lists = [[x for x in getattr(n, kind)] for n in group]
    count = max(len(names) for names in lists)
    out = []
    for i in range(count):
        given = [names[i] for names in lists if i < len(names) and names[i]]
        mandatory = len(given) == len(lists)
        ranks = {types.get(x, (None, 0))[0] for x in given}
        elems = {types.get(x, (None, 0))[1] for x in given} - {0}
        rank = ranks.pop() if len(ranks) == 1 else None
        text = f"{rank}D" if rank is not None and 1 <= rank <= 5 else "ND"
        datatype = DATATYPES.get(elems.pop(), "FLOAT_32") if len(elems) == 1 else "FLOAT_32"
        out.append(Tensor(f"{kind}_{i}", text, datatype, mandatory))
    return tuple(out)


def _params(op_type: str, group: list[Any]) -> tuple[Param, ...]:
    from onnx import helper

    values: dict[str, list[Any]] = {}
    for node in group:
        for attr in node.attribute:
            values.setdefault(attr.name, []).append(helper.get_attribute_value(attr))
    out = []
    for name, given in values.items():
        rank, datatype = _param_type(op_type, name, given[0])
        default = None if len(given) == len(group) else _text(given[0])
        out.append(Param(name, rank, datatype, default))
    return tuple(out)


def _param_type(op_type: str, name: str, value: Any) -> tuple[str, str]:
    if isinstance(value, bytes):
        return "SCALAR", "STRING"
    if isinstance(value, float):
        return "SCALAR", "FLOAT_32"
    if isinstance(value, int):
        return "SCALAR", "INT_32" if INT32[0] <= value <= INT32[1] else "INT_64"
    if isinstance(value, list) and all(isinstance(v, float) for v in value):
        return "1D", "FLOAT_32"
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        wide = any(not INT32[0] <= v <= INT32[1] for v in value)
        return "1D", "INT_64" if wide else "INT_32"
    if hasattr(value, "dims") and value.data_type in DATATYPES:  # a TensorProto attribute
        rank = len(value.dims)
        return (f"{rank}D" if 1 <= rank <= 5 else "ND"), DATATYPES[value.data_type]
    raise UserError(f"attribute '{name}' of the {op_type} nodes has a type init cannot write "
                    "as a parameter", hint="write the op config by hand")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return "[" + ", ".join(repr(v) for v in value) + "]"
    if hasattr(value, "dims"):
        from onnx import numpy_helper

        return str(numpy_helper.to_array(value).tolist())
    return repr(value)


def _camel(stem: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", stem) or ["Model"]
    name = "".join(w[:1].upper() + w[1:] for w in words)
    return name if name[0].isalpha() else "M" + name


# -- writing --------------------------------------------------------------------------------------


def _files(model_path: Path, out: Path, package: str, domain: str,
           ops: tuple[CustomOp, ...], inputs: tuple[ModelInput, ...]) -> dict[Path, bytes]:
    from ..source import find_root

    out = out.resolve()
    model = model_path.resolve()
    if not model.is_relative_to(find_root(out)):
        raise UserError(f"the model is outside the project folder {find_root(out)} of {out}",
                        file=model_path, hint="a recipe's files stay inside its project: "
                        "choose an --out folder in the model's project, or move the model")
    config = out / "ops" / f"{package}.xml"
    kernels = out / "ops" / f"{package}_kernels.py"
    recipe = out / f"{_recipe_name(model_path.stem)}.yaml"
    xml = opdef_xml(package, domain, ops, model_path.name)
    files = {config: xml, kernels: _stub(package, config, xml)}
    for seed, (name, count) in enumerate(DATA_SETS):
        files.update(placeholder_data(out / "data", name, count, inputs, seed))
    files[recipe] = _recipe(model_path.stem, package, out, model, config, kernels, inputs)
    return files


def placeholder_data(folder: Path, name: str, count: int, inputs: tuple[ModelInput, ...],
                     seed: int) -> dict[Path, bytes]:
    """An input list `folder/<name>.txt` of `count` inferences and the raw files it names:
    random values of each input's shape (normal for floats, small non-negative integers for
    integers, 0/1 for booleans) as raw little-endian float32 (.npy for an input with a
    symbolic dimension: a raw file is read in the model's shape), seeded by `seed` and
    position. (An input list has no comments: a first line starting with # names output
    layers.)"""
    import numpy as np

    files: dict[Path, bytes] = {}
    lines = []
    named = len(inputs) > 1 and all(re.fullmatch(r"[^\s:=#%]+", i.name) for i in inputs)
    for k in range(count):
        entries = []
        for j, given in enumerate(inputs):
            rng = np.random.default_rng([seed, k, j])
            rel = f"{name}/input_{k:02d}" + (f"_{j}" if len(inputs) > 1 else "")
            values = _random(rng, given).astype("<f4")
            if None in given.dims:
                rel, data = rel + ".npy", _npy(values)
            else:
                rel, data = rel + ".raw", values.tobytes()
            files[folder / rel] = data
            entries.append(f"{given.name}:={rel}" if named else rel)
        lines.append(" ".join(entries))
    files[folder / f"{name}.txt"] = ("\n".join(lines) + "\n").encode()
    return files


def _npy(values: Any) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, values, allow_pickle=False)
    return buffer.getvalue()


def _random(rng: Any, given: ModelInput) -> Any:
    if given.elem_type == BOOL:
        return rng.integers(0, 2, given.shape)
    if given.elem_type in INTEGER_TYPES:
        return rng.integers(0, 4, given.shape)
    return rng.standard_normal(given.shape)


def _recipe_name(stem: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", stem) or "model"


def opdef_xml(package: str, domain: str, ops: tuple[CustomOp, ...], model: str) -> bytes:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f"<!-- written by udo-build init from {escape(model)}: check the ranks, datatypes "
             "and parameters -->",
             f"<OpDefCollection PackageName={quoteattr(package)} Domain={quoteattr(domain)} "
             'Version="1.0.0">', "  <OpDefList>"]
    for op in ops:
        lines += _op_xml(op)
    lines += ["  </OpDefList>", "</OpDefCollection>", ""]
    return "\n".join(lines).encode()


def _op_xml(op: CustomOp) -> list[str]:
    nodes = ", ".join(op.nodes[:5]) + (", ..." if len(op.nodes) > 5 else "")
    lines = ["    <OpDef>", f"      <Name>{escape(op.name)}</Name>",
             f"      <Description><Content>{escape(op.name)}, as the model's nodes use it "
             f"({escape(nodes)})</Content></Description>"]
    for kind, tensors in (("Input", op.inputs), ("Output", op.outputs)):
        for t in tensors:
            lines += [f"      <{kind}>", f"        <Name>{t.name}</Name>",
                      f"        <Mandatory>{str(t.mandatory).lower()}</Mandatory>",
                      f"        <Datatype>{t.datatype}</Datatype>",
                      f"        <Shape><Rank>{t.rank}</Rank></Shape>", f"      </{kind}>"]
    for p in op.params:
        lines += ["      <Parameter>", f"        <Name>{escape(p.name)}</Name>",
                  f"        <Mandatory>{str(p.default is None).lower()}</Mandatory>",
                  f"        <Datatype>{p.datatype}</Datatype>",
                  f"        <Shape><Rank>{p.rank}</Rank></Shape>"]
        if p.default is not None:
            lines.append(f"        <Default>{escape(p.default)}</Default>")
        lines.append("      </Parameter>")
    lines += ["      <UseDefaultTranslation>true</UseDefaultTranslation>"] * op.onnx_domain
    lines += [f"      <SupportedBackend>{b}</SupportedBackend>" for b in BACKENDS]
    return lines + ["    </OpDef>"]


def _stub(package: str, config: Path, xml: bytes) -> bytes:
    """The kernels stub of the package generator, made from the config as udo-build loads it."""
    import tempfile

    from ..opdef import load_config
    from ..package.generate import kernels_stub
    from ..package.stub import stub_ops

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / config.name
        path.write_bytes(xml)
        (loaded,) = load_config(path, Diagnostics())
    return kernels_stub(package, stub_ops([(op, config.name) for op in loaded.ops]))


def _recipe(stem: str, package: str, out: Path, model: Path, config: Path,
            kernels: Path, inputs: tuple[ModelInput, ...]) -> bytes:
    import json
    import os

    def text(path: Path) -> str:  # a JSON string is a YAML string
        return json.dumps(Path(os.path.relpath(path, out)).as_posix())

    (calib, _), (test, _) = DATA_SETS
    dims = ""
    if any(d is None for i in inputs for d in i.dims):  # symbolic: as the placeholders fill them
        dims = "{" + ", ".join(f"{json.dumps(i.name)}: {list(i.shape)}" for i in inputs) + "}"
    return "\n".join([
        f"# written by udo-build init from {model.name}: write the kernels in {text(kernels)},",
        f"# then build: udo-build {_recipe_name(stem)}.yaml",
        "recipe: 1", f"name: {_recipe_name(stem)}", "", "package:", f"  name: {package}",
        "  ops:", f"    - config: {text(config)}", f"      kernels: {text(kernels)}",
        f"  backends: [{', '.join(BACKENDS)}]", "", "model:", f"  onnx: {text(model)}", "",
        "# PLACEHOLDER DATA: init wrote the inputs these lists name as random values of the",
        "# model's input shapes, so that the recipe runs end to end. Replace them with real",
        "# calibration and test data (raw little-endian float32 or .npy, one line per",
        "# inference) before trusting the encodings or the check.",
        "quantize:", f"  input_list: {text(out / 'data' / f'{calib}.txt')}",
        "  act_bitwidth: 8", "  weights_bitwidth: 8", "  bias_bitwidth: 32",
        "  per_channel: true", "  quantizer: tf", "",
        "prepare:", "  matrix:", f"    soc: [{SOC}]",
        *([f"    input_dimensions: [{dims}]"] if dims else []), "",
        "run:", "  - name: check", f"    soc: {SOC}",
        f"    input_list: {text(out / 'data' / f'{test}.txt')}",
        *([f"    input_dimensions: {dims}"] if dims else []),
        "    check: {min_sqnr_db: 20}  # the int8 run against the float model",
        ""]).encode()
