"""AIMET encodings: the 1.0.0 list form (written) and the older dict form (read), both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udo_build.errors import UserError
from udo_build.ir.encodings import Encoding, dumps, from_aimet, load

ACTS = {"x": [Encoding(8, 0.02, -128)], "y": [Encoding(16, 6.05e-05, -35799)]}
PARAMS = {"conv.weight": [Encoding(8, 0.01, 0, signed=True), Encoding(8, 0.03, 0, signed=True)],
          "conv.bias": [Encoding(32, 2e-4, 0, signed=True)],
          "fc.weight": [Encoding(4, 0.0405, 0, signed=True)]}


def test_the_written_format_is_1_0_0_and_reads_back_equal() -> None:
    doc = json.loads(dumps(ACTS, PARAMS))
    assert doc["version"] == "1.0.0"
    weight = next(e for e in doc["param_encodings"] if e["name"] == "conv.weight")
    assert weight == {"name": "conv.weight", "dtype": "INT", "enc_type": "PER_CHANNEL",
                      "bw": 8, "is_sym": True, "scale": [0.01, 0.03], "offset": [-128, -128]}
    assert [e["name"] for e in doc["activation_encodings"]] == ["x", "y"]
    assert from_aimet(doc, "e.json") == (ACTS, PARAMS)


def test_the_older_dict_form_reads_and_writes_out_as_1_0_0_unchanged() -> None:
    legacy = {"version": "0.6.1",
              "activation_encodings": {"x": [{"bitwidth": 8, "dtype": "int", "is_symmetric":
                                              "False", "min": -2.56, "max": 2.54,
                                              "offset": -128, "scale": 0.02}]},
              "param_encodings": {"fc.weight": [{"bitwidth": 4, "dtype": "int",
                                                 "is_symmetric": "True", "offset": -8,
                                                 "scale": 0.0405}]}}
    acts, params = from_aimet(legacy, "old.json")
    assert acts == {"x": ACTS["x"]} and params == {"fc.weight": PARAMS["fc.weight"]}
    assert from_aimet(json.loads(dumps(acts, params)), "new.json") == (acts, params)


def test_a_file_as_aimet_2_exports_it_loads(tmp_path: Path) -> None:
    path = tmp_path / "model.encodings"
    path.write_text(json.dumps({
        "version": "1.0.0", "excluded_layers": [], "producer": {"name": "aimet-torch"},
        "quantizer_args": {"activation_bitwidth": 16},
        "activation_encodings": [{"name": "/fc1/Gemm_output_0", "bw": 16, "dtype": "INT",
                                  "enc_type": "PER_TENSOR", "is_sym": False,
                                  "offset": [-35799], "scale": [6.05e-05]},
                                 {"name": "kv", "bw": 16, "dtype": "INT",
                                  "enc_type": "PER_TENSOR", "is_sym": True,
                                  "offset": [-32768.0], "scale": [0.001]}],
        "param_encodings": [{"name": "fc1.weight", "bw": 4, "dtype": "INT",
                             "enc_type": "PER_CHANNEL", "is_sym": True,
                             "offset": [-8, -8], "scale": [0.0405, 0.0397]}]}))
    acts, params = load(path)
    assert acts == {"/fc1/Gemm_output_0": [Encoding(16, 6.05e-05, -35799)],
                    "kv": [Encoding(16, 0.001, 0, signed=True)]}
    assert params["fc1.weight"] == [Encoding(4, 0.0405, 0, signed=True),
                                    Encoding(4, 0.0397, 0, signed=True)]
    assert params["fc1.weight"][0].qmin == -7


def _entry(**change: Any) -> dict[str, Any]:
    entry = {"name": "t", "dtype": "INT", "enc_type": "PER_TENSOR", "bw": 8, "is_sym": False,
             "scale": [0.1], "offset": [0]}
    entry.update(change)
    return {k: v for k, v in entry.items() if v is not None}


BAD = [
    ({"version": "2.0.0"}, "version"),
    ({"version": "1.0.0", "param_encodings": {"w": []}}, "param_encodings"),
    ({"version": "1.0.0", "activation_encodings": [{"bw": 8}]}, "activation_encodings[0]"),
    ({"version": "1.0.0", "activation_encodings": [_entry(), _entry()]},
     "activation_encodings[1]"),
    ({"version": "1.0.0", "activation_encodings": [_entry(dtype="FLOAT", bw=16)]},
     "activation_encodings[0].dtype"),
    ({"version": "1.0.0", "param_encodings": [_entry(enc_type="LPBQ")]},
     "param_encodings[0].enc_type"),
    ({"version": "1.0.0", "param_encodings": [_entry(bw=7)]}, "param_encodings[0].bw"),
    ({"version": "1.0.0", "param_encodings": [_entry(is_sym="yes")]},
     "param_encodings[0].is_sym"),
    ({"version": "1.0.0", "param_encodings": [_entry(scale=[0.0])]},
     "param_encodings[0].scale"),
    ({"version": "1.0.0", "param_encodings": [_entry(scale=None)]},
     "param_encodings[0].scale"),
    ({"version": "1.0.0", "param_encodings": [_entry(offset=[0.5])]},
     "param_encodings[0].offset"),
    ({"version": "1.0.0", "param_encodings": [_entry(offset=[0, 0])]},
     "param_encodings[0].offset"),
    ({"version": "1.0.0", "param_encodings": [_entry(scale=[0.1, 0.2], offset=[0, 0])]},
     "param_encodings[0].scale"),
    ({"activation_encodings": [_entry()]}, "activation_encodings"),
]


@pytest.mark.parametrize(("doc", "field"), BAD, ids=[f for _, f in BAD])
def test_a_bad_entry_is_refused_naming_its_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(UserError) as info:
        from_aimet(doc, "e.json")
    problem = info.value.problems[0]
    assert (problem.file, problem.field) == ("e.json", field)


def test_long_lists_are_written_as_json_writes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """dumps writes long lists (an LLM's block integers) apart, into the very text json's
    indenting encoder gives."""
    import numpy as np

    from udo_build.ir import encodings
    from udo_build.quant.blocks import block_weights

    w = np.random.default_rng(3).standard_normal((96, 40)).astype(np.float32)
    params = {"lpbq": block_weights(w, (40, 96, True), 4, 32, True),
              "blocks": block_weights(w, (40, 96, True), 4, 16, False),
              "channels": [Encoding(8, float(s), 0, True) for s in np.linspace(0.01, 1, 50)]}
    acts = {"a": [Encoding(16, 0.00123, -5)], "b": [Encoding(8, 1e-30, 3)]}
    monkeypatch.setattr(encodings, "LONG", 2)
    monkeypatch.setattr(encodings, "CHUNK", 7)  # lists of several chunks, one not full
    for a, p in ((acts, params), (acts, {}), ({}, params), ({}, {})):
        want = (json.dumps(encodings.to_aimet(a, p), indent=1, sort_keys=True) + "\n").encode()
        assert encodings.dumps(a, p) == want
