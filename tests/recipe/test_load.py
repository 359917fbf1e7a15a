"""Recipe loading: the ready recipe, every check with its exact message, and hardening."""

from __future__ import annotations

from pathlib import Path

import pytest

from udo_build.errors import Diagnostics, UserError
from udo_build.recipe import load_recipe
from udo_build.source import MAX_YAML_BYTES

from ..conftest import RECIPES

KNOWN = ("sm8350, sm8450, sm8475, sm8550, sm8650, sm8750, sm8850, sm8635, qcs6490, qcm6490, "
         "sm7450, sa8295, sa8255, sa8540, sc8380xp, ssg2115p, sxr2230p, sxr2330p, qcs9100, "
         "qcs8300, sa8797, sm7325, sm7475, sm6450, qcs8550")


def write(project: Path, text: str, *files: str) -> Path:
    for name in files:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("x")
    path = project / "recipe.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(UserError) as info:
        load_recipe(path)
    return [f"{p.line}:{p.column}: {p.field}: {p.message}; {p.hint}" if p.hint
            else f"{p.line}:{p.column}: {p.field}: {p.message}" for p in info.value.problems]


BASE = """\
recipe: 1
name: demo
model:
  onnx: net.onnx
"""


def test_ready_recipe_loads_with_its_matrix() -> None:
    diag = Diagnostics()
    recipe = load_recipe(RECIPES / "softplus.yaml", diag)
    assert diag.warnings == []
    assert recipe.name == "softplus-demo"
    assert recipe.package is not None and recipe.package.backends == ("CPU", "HTP")
    assert [op.config.name for op in recipe.package.ops] == ["softplus.xml", "swish.json"]
    # 5 socs x 2 levels x 2 dims x 2 outputs, minus batch 4 on two socs (2 x 2 x 2 each)
    assert len(recipe.targets) == 40 - 8
    assert recipe.targets[0].id == "sm8350/O2/input=1x3x32x32/tensors=logits/int8"
    assert recipe.targets[-1].id == "sm8750/O3/input=4x3x32x32/layers=head/int8"
    assert recipe.runs[0].soc.arch == "v73" and recipe.runs[0].check.min_sqnr_db == 25


def test_only_recipe_and_name_are_required(project: Path) -> None:
    recipe = load_recipe(write(project, "recipe: 1\nname: empty\n"))
    assert (recipe.package, recipe.model, recipe.quantize, recipe.targets, recipe.runs) == (
        None, None, None, (), ())


def test_package_only_recipe(project: Path) -> None:
    path = write(project, "recipe: 1\nname: p\npackage:\n  ops: [{config: ops/a.xml}]\n",
                 "ops/a.xml")
    recipe = load_recipe(path)
    assert recipe.package is not None
    assert recipe.package.ops[0].config == (project / "ops/a.xml").resolve()
    assert recipe.package.name is None and recipe.package.backends == ("CPU", "HTP")


def test_unknown_soc_message_names_the_field_and_the_fix(project: Path) -> None:
    path = write(project, BASE + "prepare:\n  matrix:\n    soc: [sm8550, sm8650, sm9999]\n",
                 "net.onnx")
    assert problems(path) == [
        f"7:27: prepare.matrix.soc[2]: 'sm9999' is not a known SoC; known: {KNOWN} "
        "(or declare it under socs:)"
    ]
    with pytest.raises(UserError) as info:
        load_recipe(path)
    assert str(info.value).startswith(f"{path}:7:27: prepare.matrix.soc[2]: 'sm9999' is not")


def test_declared_soc_and_vtcm(project: Path) -> None:
    text = BASE + ("prepare:\n  matrix:\n    soc: [sm9999, sm7325]\n    precision: [fp16]\n"
                   "socs:\n  sm9999: {arch: v81, vtcm_mb: 16}\n  sm7325: {vtcm_mb: 2}\n")
    recipe = load_recipe(write(project, text, "net.onnx"))
    assert [(t.soc.name, t.soc.arch, t.soc.vtcm_mb, t.soc.source) for t in recipe.targets] == [
        ("sm9999", "v81", 16, "recipe"), ("sm7325", "v68", 2, "recipe")]


def test_soc_without_public_vtcm_is_never_guessed(project: Path) -> None:
    path = write(project, BASE + "prepare:\n  matrix:\n    soc: [sm7325]\n", "net.onnx")
    assert problems(path) == [
        "7:11: prepare.matrix.soc[0]: SoC sm7325 has no public VTCM size; udo-build does not "
        "guess it; state it under socs: (sm7325: {vtcm_mb: N})"]


def test_new_soc_needs_an_arch(project: Path) -> None:
    path = write(project, "recipe: 1\nname: d\nsocs:\n  sm9000: {vtcm_mb: 4}\n")
    assert problems(path) == [
        "4:11: socs.sm9000: SoC sm9000 is not in the built-in table: give its arch; "
        "for example: {arch: v73, vtcm_mb: 8}"]


@pytest.mark.parametrize("value, message", [
    ("../outside.onnx", "'../outside.onnx' leads outside the project folder {root}; paths stay "
     "inside the recipe's project (the nearest folder above the recipe holding .git, "
     "pyproject.toml or .udo-build-root)"),
    ("/etc/hosts", "'/etc/hosts' is an absolute path; write it relative to the recipe's folder"),
    ("nope.onnx", "file not found: 'nope.onnx' (looked for {root}/nope.onnx)"),
    ("sub", "'sub' is not a file"),
])
def test_paths(project: Path, value: str, message: str) -> None:
    (project / "sub").mkdir()
    (project.parent / "outside.onnx").write_text("x")
    path = write(project, f"recipe: 1\nname: d\nmodel:\n  onnx: {value}\n")
    assert problems(path) == [f"4:9: model.onnx: {message.format(root=project.resolve())}"]


def test_symlink_out_of_the_project_is_an_escape(project: Path) -> None:
    (project.parent / "secret.onnx").write_text("x")
    (project / "net.onnx").symlink_to(project.parent / "secret.onnx")
    assert problems(write(project, BASE))[0].startswith(
        "4:9: model.onnx: 'net.onnx' leads outside the project folder")


def test_recipe_in_a_subfolder_may_use_the_project(project: Path) -> None:
    (project / "models").mkdir()
    (project / "models/net.onnx").write_text("x")
    (project / "recipes").mkdir()
    path = project / "recipes/r.yaml"
    path.write_text("recipe: 1\nname: d\nmodel: {onnx: ../models/net.onnx}\n")
    assert load_recipe(path).model.onnx == (project / "models/net.onnx").resolve()


@pytest.mark.parametrize("text, expected", [
    ("", ["None:None: None: the recipe is empty; start with 'recipe: 1' and 'name: ...'"]),
    ("- a\n- b\n", ["1:1: None: a recipe is a mapping of sections (recipe:, name:, ...)"]),
    ("name: x\n", ["1:1: None: missing required field 'recipe'; start the recipe with "
                   "'recipe: 1' (the format version)"]),
    ("recipe: 2\nname: x\n", ["1:9: recipe: unsupported recipe format version 2; this "
                              "udo-build reads recipe: 1"]),
    ("recipe: 1\n", ["1:1: name: missing required field 'name'"]),
    ("recipe: 1\nname: x\nname: y\n",
     ["3:1: name: duplicate key 'name' (first given at line 2); give each key once"]),
    ("recipe: 1\nname: x\npackge: {}\n",
     ["3:1: packge: unknown field 'packge'; did you mean 'package'?"]),
    ("recipe: 1\nname: [x]\n", ["2:7: name: expected a string, got a list; a recipe name uses "
                                "letters, digits, '.', '_' and '-' (it names the output folder)"]),
    ("recipe: 1\nname: x\n\tbad: 1\n", None),
    ("recipe: 1\nname: !!python/object:os.system x\n", None),
])
def test_document_errors(project: Path, text: str, expected: list[str] | None) -> None:
    found = problems(write(project, text))
    if expected is None:
        assert len(found) == 1 and found[0].startswith(("3:1: None: not valid YAML",
                                                        "2:7: name: bad value"))
    else:
        assert found == expected


def test_alias_bomb_is_refused(project: Path) -> None:
    lines = ["recipe: 1", "name: x", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with pytest.raises(UserError) as info:
        load_recipe(write(project, "\n".join(lines) + "\n"))
    assert "expands to more than 100000 values (an alias bomb?)" in info.value.problem.message


def test_oversized_recipe_is_refused(project: Path) -> None:
    path = write(project, "recipe: 1\nname: x\n" + "#" * MAX_YAML_BYTES)
    with pytest.raises(UserError) as info:
        load_recipe(path)
    assert info.value.problem.message.endswith(f"over the limit of {MAX_YAML_BYTES} bytes")


def test_int8_needs_quantize_and_sections_need_a_model(project: Path) -> None:
    text = ("recipe: 1\nname: x\nprepare:\n  matrix: {soc: [sm8550], precision: [int8]}\n")
    assert problems(write(project, text)) == [
        "3:1: prepare: needs a model: section; add model: {onnx: path/to/model.onnx}",
        "4:39: prepare.matrix.precision[0]: int8 needs a quantized model; add a quantize: "
        "section with calibration data, or use precision fp16",
    ]


def test_default_precision_follows_quantize(project: Path) -> None:
    text = BASE + "prepare:\n  matrix: {soc: [sm8550]}\n"
    assert load_recipe(write(project, text, "net.onnx")).targets[0].precision == "fp16"
    text += "quantize: {input_list: calib.txt}\n"
    assert load_recipe(write(project, text, "net.onnx", "calib.txt")).targets[0].precision \
        == "int8"


def test_comments_key_order_and_merge_keys_change_nothing(project: Path) -> None:
    a = BASE + "prepare:\n  matrix:\n    soc: [sm8550, sm8650]\n    optimization_level: [3]\n"
    b = ("# comment\nname: demo\nrecipe: 1\ncommon: &c {optimization_level: [3]}\n"
         "model: {onnx: net.onnx}\nprepare:\n  matrix:\n    <<: *c\n    soc: [sm8550, sm8650]\n")
    first = load_recipe(write(project, a, "net.onnx")).targets
    with pytest.raises(UserError):  # 'common' is not a recipe field
        load_recipe(write(project, b))
    b = b.replace("common: &c {optimization_level: [3]}\n", "")
    b = b.replace("    <<: *c\n", "    optimization_level: [3]  # trailing\n")
    assert load_recipe(write(project, b)).targets == first


def test_dsp_arch_defaults_to_the_matrix_arches(project: Path) -> None:
    text = BASE + ("package:\n  ops: [{config: a.xml}]\n  backends: [DSP, HTP]\n"
                   "prepare:\n  matrix: {soc: [sm8650, sm8350, sm8550]}\n")
    recipe = load_recipe(write(project, text, "net.onnx", "a.xml"))
    assert recipe.package is not None and recipe.package.dsp_arch == ("v68", "v73", "v75")
    text = "recipe: 1\nname: x\npackage:\n  ops: [{config: a.xml}]\n  backends: [DSP]\n"
    assert problems(write(project, text, "a.xml")) == [
        "5:13: package.backends: the DSP backend needs DSP architectures; list them under "
        "package.dsp_arch (v65, v66, v68, ...), or add SoCs to prepare.matrix.soc"]


@pytest.mark.parametrize("value", ['!!python/object/apply:os.system ["echo hi"]',
                                   "!!set {a, b}", "!!omap [a: 1]"])
def test_tags_beyond_safe_yaml_are_refused(project: Path, value: str) -> None:
    (message,) = [p.message for p in _load_problems(project, f"recipe: 1\nname: {value}\n")]
    assert message.startswith("the tag ") and message.endswith(
        "is not allowed: recipes are safe YAML (plain mappings, lists and scalars)")


def _load_problems(project: Path, text: str) -> list:  # type: ignore[type-arg]
    with pytest.raises(UserError) as info:
        load_recipe(write(project, text))
    return info.value.problems


def test_report_inputs_of_quantize(project: Path) -> None:
    text = BASE + "quantize: {input_list: calib.txt}\n"
    quantize = load_recipe(write(project, text, "net.onnx", "calib.txt")).quantize
    assert quantize is not None and quantize.report_inputs == 1
    text = BASE + "quantize: {input_list: calib.txt, report_inputs: 0}\n"
    quantize = load_recipe(write(project, text, "net.onnx", "calib.txt")).quantize
    assert quantize is not None and quantize.report_inputs == 0
    hint = "how many calibration inputs to measure the per-layer SQNR over (0: none)"
    field = "5:50: quantize.report_inputs"
    for bad, problem in (("-1", "-1 must be at least 0"),
                         ("2.5", "expected a whole number, got 2.5"),
                         ("many", "expected a whole number, got 'many'")):
        text = BASE + f"quantize: {{input_list: calib.txt, report_inputs: {bad}}}\n"
        found = problems(write(project, text, "net.onnx", "calib.txt"))
        assert found == [f"{field}: {problem}; {hint}"]


DECODE_RUN = BASE + """\
run:
  - name: decode
    soc: sm8650
    decode:
      steps: 32
      input_list: prompt.txt
      feed: {present_key: past_key, present_value: past_value}
      position: position
      mask: attention_mask
"""


def test_a_decode_run_loads_its_settings_and_reads_its_input_list(project: Path) -> None:
    from udo_build.runtime.decode import DecodeSettings

    recipe = load_recipe(write(project, DECODE_RUN, "net.onnx", "prompt.txt"))
    run = recipe.runs[0]
    assert run.decode == DecodeSettings(32, (("present_key", "past_key"),
                                             ("present_value", "past_value")),
                                        "position", "attention_mask")
    assert run.input_list == (project / "prompt.txt").resolve()
    assert run.settings().decode == run.decode


def test_a_decode_run_has_one_input_list(project: Path) -> None:
    text = DECODE_RUN.replace("    decode:\n", "    input_list: test.txt\n    decode:\n")
    assert problems(write(project, text, "net.onnx", "prompt.txt", "test.txt")) == [
        "8:5: run[0].input_list: a decode run reads decode.input_list (its first line is the "
        "first step's inputs); move the input list under decode:"]


def test_a_run_without_an_input_list_or_decode_is_named(project: Path) -> None:
    text = BASE + "run:\n  - name: smoke\n    soc: sm8650\n"
    assert problems(write(project, text, "net.onnx")) == [
        "6:5: run[0]: missing required field 'input_list'; name the input list the run infers "
        "over (or a decode: section)"]


def test_max_drift_db_needs_a_decode_run(project: Path) -> None:
    text = BASE + ("run:\n  - name: smoke\n    soc: sm8650\n    input_list: test.txt\n"
                   "    check: {max_drift_db: 1}\n")
    assert problems(write(project, text, "net.onnx", "test.txt")) == [
        "9:27: run[0].check.max_drift_db: max_drift_db bounds the drift of a decode run's "
        "SQNR: this run does not decode; add a decode: section, or remove max_drift_db"]


@pytest.mark.parametrize(("old", "new", "field"), [
    ("steps: 32", "steps: 0", "run[0].decode.steps"),
    ("feed: {present_key: past_key, present_value: past_value}", "feed: {}",
     "run[0].decode.feed"),
    ("position: position", "position: 3", "run[0].decode.position"),
    ("mask: attention_mask", "window: slide", "run[0].decode.window"),
])
def test_a_bad_decode_section_is_named_by_the_schema(project: Path, old: str, new: str,
                                                      field: str) -> None:
    found = problems(write(project, DECODE_RUN.replace(old, new), "net.onnx", "prompt.txt"))
    assert len(found) == 1 and f": {field}: " in found[0], found


def test_a_checked_recipe_is_read_from_the_memo_and_a_tampered_memo_is_a_miss(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import json

    from udo_build.recipe import load as loading

    checked = project / "store" / "checked"
    path = write(project, BASE + "prepare:\n  matrix:\n    soc: [sm8550]\n", "net.onnx")
    first = load_recipe(path, checked=checked)
    (memo,) = checked.iterdir()
    kept = memo.read_bytes()
    head, _, body = kept.partition(b"\n")
    assert head.decode() == hashlib.sha256(body).hexdigest()  # the sum of its body
    doc = json.loads(body)
    parses: list[str] = []
    real = loading.load_yaml

    def counted(text: str, file: str) -> object:
        parses.append(file)
        return real(text, file)

    def summed(value: object) -> bytes:
        text = json.dumps(value).encode()
        return hashlib.sha256(text).hexdigest().encode() + b"\n" + text

    monkeypatch.setattr(loading, "load_yaml", counted)
    assert load_recipe(path, checked=checked) == first and parses == []  # the memo
    other = dict(doc, data=dict(doc["data"], prepare={"matrix": {"soc": ["sm8650"]}}))
    tampered = [
        head + b"\n" + json.dumps(other).encode(),  # edited, its sum left as it was
        kept[:-10],  # truncated
        summed(dict(other, digest="0" * 64)),  # another file's memo, copied here
        summed({key: value for key, value in doc.items() if key != "digest"}),
        summed(dict(doc, positions={"values": [[["name"], "x"]], "keys": 3})),
        summed([]), b"{}", b"", b"\xff\n{}",
    ]
    for bad in tampered:
        memo.write_bytes(bad)
        assert load_recipe(path, checked=checked) == first  # parsed and checked again
        assert parses == [str(path)] and memo.read_bytes() == kept  # and remembered
        parses.clear()
