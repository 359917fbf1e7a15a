"""Fuzzing recipes: any text, any structure -> a Recipe or a UserError, never a traceback."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udo_build.errors import UserError
from udo_build.recipe import load_recipe

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
    st.sampled_from(["sm8550", "sm7325", "sm9999", "int8", "fp16", "HTP", "CPU", "v73",
                     "default", "net.onnx", "../x", "/etc/passwd", "", "1.0"]),
    st.text(max_size=8),
)
keys = st.sampled_from([
    "recipe", "name", "package", "model", "quantize", "prepare", "run", "socs", "matrix",
    "soc", "optimization_level", "input_dimensions", "outputs", "precision", "include",
    "exclude", "tensors", "layers", "ops", "config", "kernels", "backends", "dsp_arch",
    "onnx", "input_list", "act_bitwidth", "quantizer", "arch", "vtcm_mb", "check", "mode",
    "min_sqnr_db", "input", "sm8550", "x",
])
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=25,
)
recipes = st.fixed_dictionaries(
    {"recipe": st.sampled_from([1, 1, 1, 2, "1"]), "name": st.sampled_from(["r", "bad name"])},
    optional={k: values for k in ("package", "model", "quantize", "prepare", "run", "socs")},
)


def _load(project: Path, text: str) -> None:
    path = project / "recipe.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        load_recipe(path)
    except UserError as exc:
        assert exc.problems and all(p.message for p in exc.problems)


@FUZZ
@given(recipe=recipes)
def test_structured_recipes(project: Path, recipe: dict) -> None:
    (project / "net.onnx").write_text("x")
    _load(project, yaml.safe_dump(recipe))


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list("recipe: 1\nname:-[]{},&*!|>'\"#%@`x\t ")),
                    max_size=120))
def test_arbitrary_text(project: Path, text: str) -> None:
    _load(project, text)


@FUZZ
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes(project: Path, data: bytes) -> None:
    path = project / "recipe.yaml"
    path.write_bytes(data)
    try:
        load_recipe(path)
    except UserError:
        pass
