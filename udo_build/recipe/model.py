"""The recipe as values: what a loaded, checked recipe says, with every path resolved.

A prepare target (`RecordTarget`) and a run entry (`RunSpec`) become the compiler's and the
runtime's values here, in one place each: `RecordTarget.compile_target()`,
`RunSpec.compile_target()` and `RunSpec.settings()`.

`Dims`, `Outputs`, `RunSpec` and the recipe's sections (`PackageSpec`, `OpSource`,
`NativeCheckSpec`, `ModelSpec`, `QuantizeSpec`, `TargetSpec`) are NamedTuples: read by
attribute, never replaced nor compared with values of another class; their equality and hash are
those of the frozen dataclasses they were, and each is about 1 ms cheaper to define (every build
that loads a recipe defines them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from ..runtime.metrics import RunCheck
from ..runtime.records import RunSettings
from ..soc.table import Soc
from ..soc.target import CompileTarget
from ..source import FieldPath, Positions

if TYPE_CHECKING:  # a run's decode and generate settings: imported by the recipes that have them
    from ..runtime.decode import DecodeSettings
    from ..runtime.generate import GenerateSettings

DEFAULT_BACKENDS = ("CPU", "HTP")
DEFAULT_LEVEL = 2
BYTE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def parse_bytes(value: Any) -> int:
    """A size in bytes: a whole number, or a number with a unit ("2GiB", "1.5 GB", "512KiB");
    a ValueError that says what is wrong and what is right."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        number, unit = float(value), ""
    elif isinstance(value, str):
        text = value.strip()
        digits = text.rstrip("".join(sorted({c for u in BYTE_UNITS for c in u})))
        number_text, unit = digits.strip(), text[len(digits):].strip()
        if unit not in BYTE_UNITS:
            raise ValueError(f"unknown unit {unit!r} in {value!r}: the units are "
                             + ", ".join(u for u in BYTE_UNITS if u))
        try:
            number = float(number_text)
        except ValueError:
            raise ValueError(f"{value!r} is not a size (a number and a unit, like 2GiB)"
                             ) from None
    else:
        raise ValueError(f"{value!r} is not a size (a number and a unit, like 2GiB)")
    size = number * BYTE_UNITS[unit]
    if not size >= 1 or size != size or size == float("inf"):
        raise ValueError(f"{value!r} is not a positive size")
    return int(size)


class Dims(NamedTuple):
    """Input dimensions by input name; empty means the model's own dimensions."""

    items: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @staticmethod
    def of(mapping: dict[str, list[int]] | None) -> Dims:
        return Dims(tuple(sorted((k, tuple(v)) for k, v in (mapping or {}).items())))

    @property
    def label(self) -> str:
        if not self.items:
            return "native"
        return ",".join(f"{k}={'x'.join(map(str, v))}" for k, v in self.items)

    def to_json(self) -> dict[str, list[int]]:
        return {k: list(v) for k, v in self.items}


class Outputs(NamedTuple):
    """Graph outputs by layer or tensor name; both empty means all outputs of the last layer."""

    tensors: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()

    @staticmethod
    def of(value: Any) -> Outputs:
        if value in (None, "default"):
            return Outputs()
        return Outputs(tuple(value.get("tensors", ())), tuple(value.get("layers", ())))

    @property
    def is_default(self) -> bool:
        return not self.tensors and not self.layers

    @property
    def label(self) -> str:
        if self.is_default:
            return "default"
        parts = []
        if self.layers:
            parts.append("layers=" + ",".join(self.layers))
        if self.tensors:
            parts.append("tensors=" + ",".join(self.tensors))
        return ";".join(parts)

    def to_json(self) -> Any:
        if self.is_default:
            return "default"
        out: dict[str, list[str]] = {}
        if self.layers:
            out["layers"] = list(self.layers)
        if self.tensors:
            out["tensors"] = list(self.tensors)
        return out


@dataclass(frozen=True)
class RecordTarget:
    """One prepare target: a cell of the expanded matrix."""

    soc: Soc
    optimization_level: int
    input_dimensions: Dims
    outputs: Outputs
    precision: str
    # where the recipe writes this target's outputs (for messages; not part of the target)
    outputs_at: FieldPath = field(default=(), compare=False)
    # of prepare.matrix.graphs: the graph's name in the weight-shared record of its SoC,
    # level, outputs and precision ("": a record of its own)
    graph: str = ""

    @property
    def id(self) -> str:
        dims = f"graph:{self.graph}" if self.graph else self.input_dimensions.label
        return "/".join([self.soc.name, f"O{self.optimization_level}", dims,
                         self.outputs.label, self.precision])

    @property
    def record_id(self) -> str:
        """The record that holds this target's graph: its own (the id), or the weight-shared
        one of its graphs (the id without the dimensions)."""
        if not self.graph:
            return self.id
        return "/".join([self.soc.name, f"O{self.optimization_level}", self.outputs.label,
                         self.precision])

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "soc": self.soc.name, **self.compile_target().to_params(),
                **({"graph": self.graph} if self.graph else {})}

    def compile_target(self) -> CompileTarget:
        return _compile_target(self.soc, self.optimization_level, self.input_dimensions,
                               self.outputs, self.precision)


def _compile_target(soc: Soc, level: int, dims: Dims, outputs: Outputs,
                    precision: str) -> CompileTarget:
    """What the compiler prepares for (the SoC's name is not part of it: two SoCs with equal
    arch and VTCM share their records)."""
    vtcm_mb: Any = soc.vtcm_mb  # known: the loader rejects SoCs without a VTCM size
    return CompileTarget(soc.arch, vtcm_mb, level, dims.to_json(), outputs.to_json(), precision)


@dataclass(frozen=True)
class OutputRequests:
    """The parameters of an `outputs` action: the distinct output requests of the targets
    prepared from one bundle, each resolved to its sorted tensor names, and where the recipe
    writes each (`places`: file, line, column, field path; for messages only)."""

    requests: tuple[Outputs, ...]
    places: tuple[tuple[str | None, int | None, int | None, str], ...] = ()

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("requests",)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> OutputRequests:
        return cls(tuple(Outputs.of(r) for r in params["requests"]),
                   tuple(tuple(p) for p in params.get("places") or ()))  # type: ignore[misc]

    def to_params(self) -> dict[str, Any]:
        return {"requests": [r.to_json() for r in self.requests],
                "places": [list(p) for p in self.places]}


class OpSource(NamedTuple):
    """One op config of the package, with its kernels file and the runtimes its ops may use."""

    config: Path
    kernels: Path | None = None
    runtimes: tuple[str, ...] | None = None  # the runtimes its ops may use (None: any)


class NativeCheckSpec(NamedTuple):
    """`package.native_check`: the C++ op bodies checked against the numpy kernels on the
    calibration inputs (builder/kinds/native_check.py); `sources` (a folder laid over the CPU
    package's src/) are compiled by the build, else the `cpu_library` is checked."""

    sources: Path | None = None
    atol: float = 1e-5
    rtol: float = 1e-4


class PackageSpec(NamedTuple):
    """The recipe's `package:` section."""

    name: str | None  # None: take the op config's package name
    domain: str | None
    version: str | None
    ops: tuple[OpSource, ...]
    backends: tuple[str, ...] = DEFAULT_BACKENDS
    dsp_arch: tuple[str, ...] = ()
    cpu_library: Path | None = None  # the CPU package compiled for the emulator (build-cpu)
    native_check: NativeCheckSpec | None = None  # with a cpu_library: checked by default


class ModelSpec(NamedTuple):
    """The recipe's `model:` section."""

    onnx: Path
    # op type or node name -> the runtimes it may use (udo_build.compiler.partition)
    runtimes: tuple[tuple[str, tuple[str, ...]], ...] = ()


class TargetSpec(NamedTuple):
    """`quantize.target`: mixed precision for an output SQNR (udo_build.quant.mixed_search),
    measured over the first `inputs` inferences of `input_list` (None: the first run's input
    list, else the calibration list); activations take 8 or 16 bits, weights `weight_widths`."""

    min_sqnr_db: float
    input_list: Path | None = None
    inputs: int = 8
    weight_widths: tuple[int, int] = (4, 8)  # or (8, 16): the two widths a weight takes


class QuantizeSpec(NamedTuple):
    """The recipe's `quantize:` section."""

    input_list: Path | None  # None: calibrated over token sequences (`sequences`)
    act_bitwidth: int = 8
    weights_bitwidth: int = 8
    bias_bitwidth: int = 32
    per_channel: bool = False
    quantizer: str = "tf"
    override_encodings: Path | None = None
    float_fallback: bool = False
    report_inputs: int = 1  # calibration inputs the per-layer SQNR is measured over
    weights_block_size: int = 0  # > 0: weights per block (udo_build.quant.blocks)
    lpbq: bool = False
    algorithms: tuple[str, ...] = ()  # of cle, bias_correction, adaround (udo_build.quant)
    adaround: tuple[tuple[str, Any], ...] = ()  # AdaRound settings the recipe states, sorted
    target: TargetSpec | None = None  # mixed precision (quantize.target)
    sequences: Path | None = None  # token id sequences, one per line (an LLM's calibration)
    cache: tuple[tuple[str, Any], ...] = ()  # with sequences: the cache names, sorted


class RunSpec(NamedTuple):
    """One entry of the recipe's `run:` list."""

    name: str
    soc: Soc
    input_list: Path | None  # None: a generate run (it reads `prompt`)
    input_dimensions: Dims = Dims()
    outputs: Outputs = Outputs()
    optimization_level: int = DEFAULT_LEVEL
    precision: str = "int8"
    mode: str = "permissive"
    check: RunCheck = RunCheck()
    decode: DecodeSettings | None = None  # its steps chain; input_list is decode.input_list
    generate: GenerateSettings | None = None  # it prefills `prompt` and decodes tokens
    prompt: Path | None = None  # a generate run's token ids (generate.prompt)

    def compile_target(self) -> CompileTarget:
        """What the run asks of a record, and what it prepares online when none fits."""
        return _compile_target(self.soc, self.optimization_level, self.input_dimensions,
                               self.outputs, self.precision)

    def settings(self) -> RunSettings:
        return RunSettings(self.name, self.soc.name, self.compile_target(), self.mode,
                           self.check, self.decode, self.generate)


@dataclass(frozen=True)
class Recipe:
    """A loaded, checked recipe, every path resolved."""

    path: Path
    root: Path  # the project folder that every path of the recipe stays inside
    name: str
    package: PackageSpec | None = None
    model: ModelSpec | None = None
    quantize: QuantizeSpec | None = None
    targets: tuple[RecordTarget, ...] = ()
    runs: tuple[RunSpec, ...] = ()
    max_record_bytes: int | None = None  # prepare.max_record_bytes: parts (compiler.parts)
    socs: dict[str, Soc] = field(default_factory=dict, compare=False)
    positions: Positions | None = field(default=None, compare=False, repr=False)
    # every path the recipe names (files and folders, resolved): what a replayed no-op finds
    # as it was (see builder/uptodate.py)
    named: tuple[Path, ...] = field(default=(), compare=False, repr=False)

    @property
    def folder(self) -> Path:
        return self.path.parent
