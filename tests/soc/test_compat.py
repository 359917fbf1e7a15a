"""The record compatibility rules, the choice of a record, and the smallest covering set."""

from __future__ import annotations

import pytest

from udo_build.soc.compat import Device, Prepared, choose, cover, rejection
from udo_build.soc.table import builtin_socs


def device(name: str) -> Device:
    soc = builtin_socs()[name]
    return Device(name, soc.arch, soc.vtcm_mb)


@pytest.mark.parametrize("record, soc, mode, reason", [
    (Prepared("v73", 8), "sm8550", "permissive", None),
    (Prepared("v73", 8), "sm8650", "permissive", None),  # older arch, same generation
    (Prepared("v75", 8), "sm8550", "permissive", "prepared for v75, newer than the device's v73"),
    (Prepared("v69", 8), "sm8550", "permissive",
     "a v69 record does not run on v73 (another arch generation)"),
    (Prepared("v68", 4), "sm8450", "permissive", None),  # v68 on v69: same generation
    (Prepared("v73", 8), "ssg2115p", "permissive",
     "prepared for 8 MB of VTCM, the device has 2 MB"),
    (Prepared("v73", 2), "sm8550", "permissive", None),
    (Prepared("v73", 2), "sm8550", "strict",
     "strict mode wants a record that uses the device fully (v73, 8 MB), this one is v73, 2 MB"),
    (Prepared("v73", 8), "sm8550", "always_generate_new",
     "mode always_generate_new uses no record"),
])
def test_rules(record: Prepared, soc: str, mode: str, reason: str | None) -> None:
    assert rejection(record, device(soc), mode) == reason


def test_outputs_and_dims_must_equal() -> None:
    record = Prepared("v73", 8, {"input": [1, 3, 32, 32]}, {"tensors": ["logits"]})
    assert rejection(record, device("sm8550"), want=Prepared(
        "v73", 8, {"input": [1, 3, 32, 32]}, {"tensors": ["logits"]})) is None
    assert rejection(record, device("sm8550"), want=Prepared(
        "v73", 8, {"input": [1, 3, 32, 32]}, "default")) == (
        'prepared for outputs {"tensors":["logits"]}, the run wants default')
    assert rejection(record, device("sm8550"), want=Prepared(
        "v73", 8, {"input": [4, 3, 32, 32]}, {"tensors": ["logits"]})).startswith(
        "prepared for input dimensions")


def test_choose_prefers_the_same_arch_then_the_largest_vtcm() -> None:
    records = [Prepared("v73", 2, name="a"), Prepared("v73", 8, name="b"),
               Prepared("v75", 8, name="c"), Prepared("v69", 8, name="d")]
    best, rejected = choose(records, device("sm8650"))
    assert best.name == "c" and [(r.name, why) for r, why in rejected] == [
        ("a", "fits, but c is closer: it is for the device's arch v75"),
        ("b", "fits, but c is closer: it is for the device's arch v75"),
        ("d", "a v69 record does not run on v75 (another arch generation)")]
    best, rejected = choose(records, device("sm8550"))
    assert best.name == "b" and dict((r.name, why) for r, why in rejected)["a"] == (
        "fits, but b is closer: it uses more VTCM (8 MB against 2 MB)")
    best, rejected = choose(records, device("sm8350"))
    assert best is None and len(rejected) == 4


def test_cover_finds_the_smallest_set() -> None:
    fleet = [device(n) for n in ("sm8350", "sm8450", "sm8550", "sm8650", "sm8750",
                                 "ssg2115p", "qcs6490")]
    chosen = cover(fleet)
    # v68/2 serves the v68 and v69 devices; v73/2 serves every v73-and-later device
    assert [(r.arch, r.vtcm_mb) for r in chosen] == [("v68", 2), ("v73", 2)]
    assert all(any(rejection(r, d) is None for r in chosen) for d in fleet)
    strict = cover(fleet, "strict")
    assert len(strict) == len({(d.arch, d.vtcm_mb) for d in fleet})
