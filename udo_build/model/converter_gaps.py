"""What onnx's version converter leaves out when it converts a model up to the target opset.

An adapter that moves a node to a new version must keep its meaning; where a new version's
attribute default differs from what the old version did, the attribute must be written out.
onnx's Resize 10 -> 11 adapter does not: Resize 10 maps coordinates asymmetrically
(x_in = x_out / scale) and rounds nearest down, Resize 11's defaults are half_pixel and
round_prefer_floor, so a converted Resize 10 computed other numbers. The gaps are data:

    (op, the version that changed the default): {attribute: what the older versions meant}
"""

from __future__ import annotations

from typing import Any

from onnx import helper

GAPS: dict[tuple[str, int], dict[str, Any]] = {
    ("Resize", 11): {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
}
ONNX_DOMAINS = ("", "ai.onnx")


def gapped_outputs(model: Any, opset: int) -> dict[str, dict[str, Any]]:
    """{first output of a node the converter will leave a gap in: the attributes it needs},
    read before converting the model from `opset`."""
    out = {}
    for node in model.graph.node:
        for (op, changed), attributes in GAPS.items():
            if node.op_type == op and node.domain in ONNX_DOMAINS and opset < changed:
                out[node.output[0]] = attributes
    return out


def mend(converted: Any, gapped: dict[str, dict[str, Any]]) -> None:
    """Write out the attributes the converter left at a default of another meaning (in place;
    an attribute the node sets is kept)."""
    for node in converted.graph.node:
        attributes = gapped.get(node.output[0]) if node.output else None
        if attributes is None:
            continue
        given = {a.name for a in node.attribute}
        node.attribute.extend(helper.make_attribute(name, value)
                              for name, value in sorted(attributes.items()) if name not in given)
