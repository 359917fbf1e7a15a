"""`udo-build fleet` and `udo-build plan-records`."""

from __future__ import annotations

import io
import json
from pathlib import Path

from udo_build.cli import main

from ..conftest import RECIPES

FLEET = "sm8350,sm8450,sm8550,sm8650,sm8750,ssg2115p,qcs6490"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err, env={}), out.getvalue(), err.getvalue()


def test_fleet_shows_the_record_each_device_loads_or_why_it_prepares_online() -> None:
    code, out, err = cli("fleet", str(RECIPES / "softplus.yaml"), "--devices", FLEET, "--json")
    assert code == 0, err
    found = {d["device"]: d for d in json.loads(out)["devices"]}
    assert found["sm8550"]["record"] == "sm8550/O2/input=1x3x32x32/tensors=logits/int8"
    assert found["sm8750"]["online_prepare"] is False
    small = found["ssg2115p"]  # v73 with 2 MB: every v73 record wants 8 MB
    assert small["online_prepare"] is True
    reasons = {r["reason"] for r in small["rejected"]}
    assert "prepared for 8 MB of VTCM, the device has 2 MB" in reasons
    assert "a v69 record does not run on v73 (another arch generation)" in reasons
    code, out, err = cli("fleet", str(RECIPES / "softplus.yaml"), "--devices", "sm8550")
    assert code == 0 and "sm8550  v73   smoke  sm8550/O2/input=1x3x32x32/tensors=logits" in out


def test_plan_records_covers_a_fleet_with_the_fewest_records(tmp_path: Path) -> None:
    code, out, err = cli("plan-records", "--devices", FLEET, "--json")
    records = json.loads(out)["records"]
    assert [(r["arch"], r["vtcm_mb"]) for r in records] == [("v68", 2.0), ("v73", 2.0)]
    assert records[1]["serves"] == ["sm8550", "sm8650", "sm8750", "ssg2115p"]
    devices = tmp_path / "devices.yaml"
    devices.write_text("- sm8550\n- {name: lab-board, arch: v75, vtcm_mb: 4}\n")
    code, out, err = cli("plan-records", "--devices-file", str(devices), "--mode", "strict",
                         "--json")
    assert [(r["arch"], r["vtcm_mb"]) for r in json.loads(out)["records"]] == [
        ("v73", 8.0), ("v75", 4.0)]
    code, out, err = cli("plan-records", "--devices", "sm7325")
    assert code == 2 and "'sm7325' is not a SoC with a known VTCM size" in err
