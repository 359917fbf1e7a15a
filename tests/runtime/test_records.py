"""Choosing the record of a deployable bundle for a run, or saying why none fits."""

from __future__ import annotations

from types import SimpleNamespace

from udo_build.ir import TensorInfo
from udo_build.runtime.metrics import RunCheck
from udo_build.runtime.records import RunSettings, choose_record, native_dims
from udo_build.soc.compat import Device
from udo_build.soc.target import CompileTarget

NATIVE = {"input": [1, 3, 32, 32]}


def row(part: str, arch: str, vtcm: float, dims: object = None, outputs: str = "logits",
        precision: str = "int8", level: int = 2) -> dict[str, object]:
    """A record row as the assemble step writes it into the bundle's meta (its outputs: the
    resolved tensor names, as the Cache Info row has them)."""
    return {"part": part, "arch": arch, "vtcm_mb": vtcm, "input_dimensions": dims or {},
            "outputs": outputs, "precision": precision, "name": f"net/{arch}", "level": level}


def settings(mode: str = "permissive", **target: object) -> RunSettings:
    fields = {"arch": "v73", "vtcm_mb": 8, "precision": "int8", **target}
    return RunSettings("smoke", "sm8550", CompileTarget(**fields), mode)  # type: ignore[arg-type]


META = {"records": [
    row("records/a.udr", "v69", 8, NATIVE),
    row("records/b.udr", "v73", 8, NATIVE, "feat,logits"),
    row("records/c.udr", "v73", 8, NATIVE),
    row("records/d.udr", "v73", 8, {"input": [4, 3, 32, 32]}),
    row("records/e.udr", "v75", 8, NATIVE),
]}
LOGITS = ["logits"]


def test_the_fitting_record_is_chosen_and_the_others_say_why_not() -> None:
    choice = choose_record(META, settings(), NATIVE, LOGITS)
    assert choice.part == "records/c.udr" and choice.available == 5
    assert choice.seen == (
        ("records/a.udr", "a v69 record does not run on v73 (another arch generation)"),
        ("records/b.udr", "prepared for outputs feat,logits, the run wants logits"),
        ("records/d.udr", 'prepared for input dimensions {"input":[4,3,32,32]}, the run has '
                          '{"input":[1,3,32,32]}'),
        ("records/e.udr", "prepared for v75, newer than the device's v73"))
    assert choice.loaded("net/v73") == {
        "record": "net/v73", "online_prepare": False,
        "seen": [{"record": part, "rejected": why} for part, why in choice.seen]}


def test_a_run_at_the_model_s_own_dims_takes_a_record_that_spells_them_out() -> None:
    spelled = choose_record(META, settings(), NATIVE, ["logits", "feat"])
    explicit = choose_record(META, settings(input_dimensions=NATIVE), NATIVE, ["feat", "logits"])
    assert spelled.part == explicit.part == "records/b.udr"


def test_when_none_fits_the_choice_says_so_and_the_caller_prepares_online() -> None:
    choice = choose_record(META, settings("strict", vtcm_mb=4), NATIVE, LOGITS)
    assert choice.part is None and len(choice.seen) == 5
    report = choice.online()
    assert report["record"] is None and report["online_prepare"] is True
    assert report["warning"] == "no record of the bundle fits (saw 5): prepared online, at " \
        "every start-up"
    assert "online_prepare_seconds" not in report  # a report holds no time: the same bytes
    assert choose_record({}, settings(), NATIVE, LOGITS).online()["seen"] == []


def test_precision_must_match() -> None:
    choice = choose_record(META, settings(precision="fp16"), NATIVE, LOGITS)
    assert choice.part is None
    assert dict(choice.seen)["records/c.udr"] == "prepared for int8, the run is fp16"


def test_run_settings_round_trip_through_action_params() -> None:
    params = {"name": "smoke", "soc": "sm8550", "arch": "v73", "vtcm_mb": 8,
              "optimization_level": 2, "input_dimensions": {}, "outputs": "default",
              "precision": "int8", "mode": "strict", "check": {"min_sqnr_db": 25},
              "decode": None, "generate": None}
    run = RunSettings.from_params(params)
    assert run.check == RunCheck(min_sqnr_db=25) and run.mode == "strict"
    assert run.to_params() == params
    assert set(RunSettings.KEY_PARAMS) == set(params) - {"name", "soc"}
    assert run.device == Device("sm8550", "v73", 8)
    assert run.reference_target == CompileTarget("v73", 8, 1, {}, "default", "fp32")


def test_native_dims_are_the_static_input_shapes() -> None:
    model = SimpleNamespace(graph=SimpleNamespace(inputs=[
        TensorInfo("input", "float32", (1, 3, 32, 32)), TensorInfo("seq", "float32", ("N", 4))]))
    assert native_dims(model) == {"input": [1, 3, 32, 32]}


LEVELS = {"records": [row("records/o2.udr", "v73", 8, NATIVE, level=2),
                      row("records/o3.udr", "v73", 8, NATIVE, level=3),
                      row("records/o1.udr", "v73", 8, NATIVE, level=1)]}


def test_strict_never_gives_a_run_asking_o3_an_o2_record() -> None:
    o2_only = {"records": LEVELS["records"][:1]}
    choice = choose_record(o2_only, settings("strict", optimization_level=3), NATIVE, LOGITS)
    assert choice.part is None and choice.seen == (
        ("records/o2.udr", "prepared at O2, the run asks O3 (strict mode takes only the run's "
                           "level)"),)
    assert choose_record(LEVELS, settings("strict", optimization_level=3), NATIVE,
                         LOGITS).part == "records/o3.udr"


def test_permissive_takes_the_run_s_level_and_says_why_not_the_others() -> None:
    choice = choose_record(LEVELS, settings(optimization_level=3), NATIVE, LOGITS)
    assert choice.part == "records/o3.udr" and choice.note is None
    assert choice.seen == (
        ("records/o2.udr", "fits, but records/o3.udr is closer: this one is O2, it is at the "
                           "run's O3"),
        ("records/o1.udr", "fits, but records/o3.udr is closer: this one is O1, it is at the "
                           "run's O3"))
    assert "note" not in choice.loaded("net/v73")


def test_permissive_takes_another_level_only_when_none_at_the_run_s_fits_and_notes_it() -> None:
    others = {"records": [LEVELS["records"][0], LEVELS["records"][2]]}
    choice = choose_record(others, settings(optimization_level=3), NATIVE, LOGITS)
    assert choice.part == "records/o2.udr"  # as close as o1: the first listed wins
    assert choice.note == ("no record at the run's O3 fits: loaded one prepared at O2 "
                           "(permissive mode; strict mode would prepare online)")
    assert choice.loaded("net/v73")["note"] == choice.note


def test_a_record_of_the_run_s_level_wins_over_one_for_the_device_s_own_arch() -> None:
    rows = {"records": [row("records/v69o2.udr", "v69", 8, NATIVE, level=2),
                        row("records/v68o3.udr", "v68", 8, NATIVE, level=3)]}
    choice = choose_record(rows, settings(arch="v69", optimization_level=3), NATIVE, LOGITS)
    assert choice.part == "records/v68o3.udr" and choice.note is None
    assert choice.seen == (("records/v69o2.udr", "fits, but records/v68o3.udr is closer: this "
                                                 "one is O2, it is at the run's O3"),)


def test_rows_naming_their_output_tensors_compare_as_sets() -> None:
    rows = {"records": [{**row("records/x.udr", "v73", 8, NATIVE),
                         "output_tensors": ["b,1", "a"]}]}
    assert choose_record(rows, settings(), NATIVE, ["a", "b,1"]).part == "records/x.udr"
