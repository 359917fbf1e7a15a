"""A quantized model: the prepared float graph, its encodings, and the settings that made them.

The graph is the float bundle's after quantization preparation (`prepare.py`: constants folded,
batch norms and per-channel affine ops folded into the convolutions that feed them), in the
ONNX op vocabulary. Encodings:

- `activations`: tensor name -> Encoding, unsigned asymmetric (8 or 16 bit), for the graph
  inputs and node outputs that are quantized. A float output of a Conv, Gemm, MatMul or Add
  with no encoding whose only reader is a Relu (or Clip) is absorbed: the integer path
  requantizes straight into the activation's encoding. Any other float tensor without an
  encoding stays float (float fallback); ops around it dequantize and quantize.
- `params`: weight name -> [Encoding] (one, or one per output channel; block encodings, one per
  output channel with its blocks: udo_build.ir.encodings), signed symmetric; and
  bias name -> [Encoding] (32 or 8 bit, scale = input scale x weight scale, offset 0).

In a bundle the encodings travel as the part `encodings.json` (AIMET format) and the settings
as the meta entry `quantization`; weights stay float32 (the integer path quantizes them with
their encodings when it loads). A prepared int8 record holds them quantized instead, and the
integer path takes those integers as they are (udo_build.compiler.record).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .encodings import Encoding, dump, dumps, from_aimet
from .graph import Model
from .part_sources import FilePart

ENCODINGS_PART = "encodings.json"
ABSORBING = ("Relu", "Clip")  # activations a producing Conv/Gemm/MatMul/Add can absorb
ABSORBED_PRODUCERS = ("Conv", "Gemm", "MatMul", "Add", "Sum")


@dataclass(frozen=True)
class QuantizedModel:
    model: Model
    activations: dict[str, Encoding]
    params: dict[str, list[Encoding]]
    settings: dict[str, Any] = field(default_factory=dict)

    def encodings_json(self) -> bytes:
        return dumps(*self._encodings())

    def write_encodings(self, path: Path) -> FilePart:
        """The encodings written to a file (the bytes of `encodings_json`, never whole in
        memory: an LLM's are over a hundred MB), as a bundle part."""
        with open(path, "wb") as out:
            dump(*self._encodings(), out)
        return FilePart(path)

    def _encodings(self) -> tuple[dict[str, list[Encoding]], dict[str, list[Encoding]]]:
        """(activations, params) as the encodings formats hold them: lists per tensor."""
        return {k: [v] for k, v in self.activations.items()}, self.params

    def absorbed(self) -> dict[str, str]:
        """Float tensors whose reader's encoding they take: {tensor: activation's output}."""
        consumers = self.model.graph.consumers()
        producers = self.model.graph.producers()
        out = {}
        for name, readers in consumers.items():
            producer = producers.get(name)
            if (name not in self.activations and producer is not None
                    and producer.op in ABSORBED_PRODUCERS and len(readers) == 1
                    and readers[0].op in ABSORBING and readers[0].outputs[0] in self.activations):
                out[name] = readers[0].outputs[0]
        return out


def to_bundle(qmodel: QuantizedModel, opdefs: dict[str, Any] | None,
              meta: dict[str, Any], encodings: bytes | FilePart | None = None) -> Any:
    """The quantized bundle; `encodings`: qmodel.encodings_json() or write_encodings(), when
    made already."""
    from .bundle import Bundle

    return Bundle(qmodel.model, opdefs, {**meta, "quantization": qmodel.settings},
                  {ENCODINGS_PART: encodings if encodings is not None
                   else qmodel.encodings_json()})


def from_bundle(bundle: Any, file: str = "bundle") -> QuantizedModel:
    """The quantized model a bundle holds; a UserError when it holds no encodings."""
    from ..errors import UserError

    data = bundle.parts.get(ENCODINGS_PART)
    if data is None:
        raise UserError("the bundle is not quantized (it has no encodings)", file=file,
                        hint="build the recipe's quantize step, or run the float bundle")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"part {ENCODINGS_PART} of the bundle is not valid JSON "
                        f"({str(exc)[:80]})", file=file, field=ENCODINGS_PART) from None
    from .blocks import block_layouts

    activations, params = from_aimet(doc, file, f"{ENCODINGS_PART}: ",
                                     block_layouts(bundle.model))
    return QuantizedModel(bundle.model, {k: v[0] for k, v in activations.items()}, params,
                          dict(bundle.meta.get("quantization") or {}))
