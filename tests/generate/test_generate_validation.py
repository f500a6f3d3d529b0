"""After --write the recipe passes soft validation (the lead's static review)."""

from __future__ import annotations

import json

import pytest
from gen_helpers import REASON, RECIPE_REL, make_repo, run_generate

api = pytest.importorskip("model_compile.api")

PATHS = [[], *[["--path", k, "--reason", REASON] for k in ("submodule", "graph-break", "regional", "post-wrap")]]


@pytest.mark.parametrize("args", PATHS, ids=["kit", "submodule", "graph-break", "regional", "post-wrap"])
@pytest.mark.parametrize("engine", ["none_assign", "none_return"])
def test_added_wiring_is_soft_clean(tmp_path, engine, args):
    repo = make_repo(tmp_path, engine)
    code, out, err = run_generate(str(repo / RECIPE_REL), *args, "--write", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    v = data["validation"]
    assert v["available"] and v["errors"] == 0, v["findings"]
    expected = "kit" if not args else f"fallback:{args[1]}"
    assert v["compile_path"] == expected
    assert any(p.endswith("tests/skills/model-compile/asserts.py") for p in data["written"])


@pytest.mark.parametrize("defect", ["after_wrap", "before_freeze", "ungated", "hardcoded", "wrapper"])
def test_repaired_defects_are_soft_clean(tmp_path, defect):
    repo = make_repo(tmp_path, defect)
    before = api.review_recipe(repo / RECIPE_REL)
    assert before.errors, f"fixture {defect} should start with an error finding"
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write", "--format", "json")
    assert code == 0, err
    v = json.loads(out)["validation"]
    assert v["errors"] == 0, v["findings"]
