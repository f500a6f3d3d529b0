"""Golden-file tests of the recipe test templates (asserts.py.j2, test_compile_parity.py.j2).

Regenerate after an intended template change:
    MODEL_COMPILE_UPDATE_GOLDEN=1 pytest tests/golden/test_recipe_tests_golden.py
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import jinja2
import pytest

from model_compile.recipe_tests import TEMPLATES, default_context, render_recipe_tests

GOLDEN = Path(__file__).parent / "recipe_tests"
UPDATE = os.environ.get("MODEL_COMPILE_UPDATE_GOLDEN") == "1"

CASES = {
    "kit": default_context("vlm_kit", "kit", target="model (vision tower eager)"),
    "regional": default_context(
        "vlm_regional",
        "fallback:regional",
        target="text decoder layers and vision blocks",
        backend="inductor",
        recompile_budget=4,
        config_name="stage1",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_render_matches_golden_and_parses(case, name):
    text = render_recipe_tests(CASES[case])[name]
    ast.parse(text)
    golden = GOLDEN / f"{case}__{name}"
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden {golden.name}: run with MODEL_COMPILE_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), f"{golden.name} differs (intended? regenerate)"


def test_context_values_land_in_the_output():
    rendered = render_recipe_tests(CASES["regional"])
    assert 'COMPILE_CALL = "compile"' in rendered["asserts.py"] and 'WRAP_CALL = "parallelize_model"' in (
        rendered["asserts.py"]
    )
    assert len(rendered["asserts.py"].splitlines()) <= 130  # sized like a repository's own skill asserts
    assert "compile_checks" not in rendered["asserts.py"]  # one file: nothing to load beside it
    assert 'TARGET_PATTERNS = ["model.language_model.layers.*", "model.visual.blocks.*"]' in rendered["asserts.py"]
    assert 'RECIPE_PACKAGE = "recipes.vlm_regional"' in rendered["test_compile_parity.py"]
    assert "testing.utils" not in rendered["test_compile_parity.py"]  # self-contained
    assert '"MODEL_COMPILE_PARITY_BACKEND", "inductor"' in rendered["test_compile_parity.py"]


def test_missing_context_variable_is_an_error():
    context = dict(CASES["kit"])
    del context["compile_call"]
    with pytest.raises(jinja2.UndefinedError):
        render_recipe_tests(context)


def test_demo_repo_files_are_current():
    """The committed example asserts/parity files are exactly what the templates render."""
    demo = Path(__file__).resolve().parents[2] / "examples" / "demo_repo" / "recipes"
    contexts = {
        "vlm_kit": default_context("vlm_kit", "kit", target="model (vision tower eager via torch.compiler.disable)"),
        "vlm_regional": default_context("vlm_regional", "fallback:regional", target="text decoder layers and vision blocks"),
        "vlm_recompile": default_context("vlm_recompile", "kit", target="model (vision tower eager via torch.compiler.disable)"),
    }
    for recipe, context in contexts.items():
        for name, text in render_recipe_tests(context).items():
            path = demo / recipe / "tests" / "skills" / "model-compile" / name
            assert path.read_text(encoding="utf-8") == text, f"{path} is stale: re-render it"
