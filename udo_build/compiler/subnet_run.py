"""Running a partitioned graph: its subnets in order, each on its runtime.

    program, selection = run_subnets(bundle, settings, packages, part, outputs, choose=True)
    runner = program.runner(packages)
    runner.run({"input": x})          # the requested outputs, as floats

An HTP subnet runs on a record: the bundle's record for that subnet (rows of its identifier
`<graph>:subnet<i>`) that the compatibility rules choose for the device, at the subnet's input
dimensions (those of its tensors at the run's input dimensions) and outputs; when none fits, one
prepared here (online prepare, with the warning, as for a whole graph). A CPU subnet runs on the
CPU runtime: the float session on the subnet's model; on the integer path (int8) as the
runtime's float fallback does: its inputs dequantized (they come quantized with their
encodings) and its outputs quantized with theirs, so the next HTP subnet reads exactly the
integers it would have made.

`selection` is the run report's fields: `record` (the records loaded, joined by " + "),
`online_prepare` (whether any subnet prepared online, with its `warning`), `seen` (every record
not taken, of every subnet), `partition` (each subnet: runtime, nodes, inputs, outputs, and for
an HTP subnet its record) and `switches` (how many times the run passes between runtimes).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..ir.graph import Model
from ..runtime.records import RunSettings, choose_record
from .driver import compile_bundle, input_shapes
from .partition import CPU, Partition, Subnet, subnet_bundle, subnet_model
from .record import Record, read_record


@dataclass(frozen=True)
class Step:
    subnet: Subnet
    record: Record | None  # an HTP subnet's
    model: Model | None  # a CPU subnet's


@dataclass
class SubnetProgram:
    """The runnable partitioned graph: what `record_for_run` gives for one."""

    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    encodings: Mapping[str, Any] | None  # activations' encodings on the integer path
    seconds: float | None = None  # what online preparations cost here (messages only)
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)  # outputs that are weights

    @property
    def key(self) -> dict[str, Any]:
        names = [s.record.key.get("name") for s in self.steps if s.record is not None]
        return {"name": " + ".join(str(n) for n in names)}

    def runner(self, packages: Any = None) -> SubnetRunner:
        return SubnetRunner(self, packages)


class SubnetRunner:
    def __init__(self, program: SubnetProgram, packages: Any) -> None:
        from ..runtime.float_session import Session

        self.program = program
        self.runs = [s.record.runner(packages).run if s.record is not None
                     else Session(s.model, packages).run for s in program.steps]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = {**self.program.constants, **feeds}
        for step, run in zip(self.program.steps, self.runs, strict=True):
            given = {name: env[name] for name in step.subnet.inputs}
            if step.record is not None:
                env.update(run(given))
                continue
            outputs = list(step.subnet.outputs)
            env.update(self._requantized(run(self._requantized(given), outputs)))
        return {name: env[name] for name in self.program.outputs}

    def _requantized(self, tensors: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """On the integer path, the tensors as their encodings hold them (CPU boundaries)."""
        codes = self.program.encodings
        if codes is None:
            return dict(tensors)
        from ..runtime.integer.fixed import quantize  # NaN and infinities as the integer path

        return {name: (codes[name].dequantize(quantize(x, codes[name])).astype(
            x.dtype if x.dtype.kind == "f" else np.float32, copy=False) if name in codes else x)
            for name, x in tensors.items()}


def run_subnets(bundle: Any, settings: RunSettings, packages: Any, part: Partition,
                outputs: Sequence[str], choose: bool = True
                ) -> tuple[SubnetProgram, dict[str, Any]]:
    """The program running `part` for the run, and the run report's fields (see above)."""
    _, infos, _, _ = input_shapes(bundle.model, settings.target.input_dimensions, packages or {})
    steps, rows, seen, online, seconds = [], [], [], 0, 0.0
    for subnet in part.subnets:
        row: dict[str, Any] = subnet.to_json()
        row["nodes"] = len(subnet.nodes)
        if subnet.runtime == CPU:
            steps.append(Step(subnet, None, subnet_model(bundle.model, subnet, infos)))
            rows.append(row)
            continue
        sub = subnet_bundle(bundle, subnet, infos)
        record, fields, cost = _htp_record(bundle, sub, subnet, settings, packages, choose)
        seen += fields.get("seen", [])
        online += fields["online_prepare"]
        seconds += cost or 0.0
        steps.append(Step(subnet, record, None))
        rows.append({**row, **{k: v for k, v in fields.items() if k != "warning"}})
    codes = None
    if settings.target.precision == "int8":
        from ..ir.qmodel import from_bundle

        codes = from_bundle(bundle).activations
    constants = {name: bundle.model.weights[name] for name in outputs
                 if name in bundle.model.weights}  # (an output the importer folded)
    program = SubnetProgram(tuple(steps), tuple(outputs), codes, seconds if online else None,
                            constants)
    selection = {"record": program.key["name"] or None, "online_prepare": bool(online),
                 "seen": seen, "partition": rows, "switches": part.switches}
    if online:
        selection["warning"] = (f"{online} HTP subnet(s) had no record of the bundle that "
                                "fits: prepared online, at every start-up")
    return program, selection


def _htp_record(bundle: Any, sub: Any, subnet: Subnet, settings: RunSettings, packages: Any,
                choose: bool) -> tuple[Record, dict[str, Any], float | None]:
    """An HTP subnet's record: the bundle's that fits, else one prepared here."""
    dims = {t.name: list(t.static_shape or ()) for t in sub.model.graph.inputs}
    own = replace(settings.target, input_dimensions=dims,
                  outputs={"tensors": list(subnet.outputs)})
    choice = None
    if choose:
        identifier = subnet.identifier(bundle.model.graph.name)
        choice = choose_record(bundle.meta, replace(settings, target=own), dims,
                               list(subnet.outputs), subnet=identifier)
        if choice.part is not None:
            record = read_record(bundle.parts[choice.part], choice.part)
            return record, choice.loaded(record.key.get("name")), None
    started = time.perf_counter()
    compiled = compile_bundle(sub, replace(own, input_dimensions={}), packages)
    record = read_record(compiled.record(), "online")
    fields = choice.online() if choice is not None else {"record": None, "online_prepare": True}
    return record, fields, time.perf_counter() - started
