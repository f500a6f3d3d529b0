"""The family of a checkpoint whose config.json is not here, read from what the recipe says of its model.

Static: recipes are copied into tmp_path and edited; nothing of them is imported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from model_compile.analyze import analyze_path
from model_compile.hard.rehearsal.planning import family
from model_compile.hard.rehearsal.planning.model_plan import UNKNOWN_DEPTH, NotPlanned, name_family
from model_compile.hard.rehearsal.planning.plan import plan
from model_compile.hard.stages import stage_files

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
KEY = "model.pretrained_model_name_or_path"


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """lm_unknown, whose one stage names a checkpoint on a cluster path that names nothing."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES, repo, ignore=shutil.ignore_patterns("__pycache__"))
    root = repo / "recipes" / "lm_unknown"
    train = root / "configs" / "train.yaml"
    train.write_text(train.read_text().replace('"acme/mystery-7b"', '"/cluster/runs/run7/final"'))
    return root


def _stage(root: Path, name: str, model: str) -> None:
    text = (root / "configs" / "train.yaml").read_text()
    (root / "configs" / f"{name}.yaml").write_text(text.replace('"/cluster/runs/run7/final"', f'"{model}"'))


def _evidence(root: Path) -> family.Evidence:
    return family.recipe_family(root, KEY, stage_files(root), "train", name_family)


def _plan(root: Path, out: Path):
    return plan(analyze_path(root).recipes[0], root, root.parents[1], out, stage="train")


def test_another_stage_of_the_recipe_names_the_family_and_the_preset_says_where(recipe: Path, tmp_path: Path) -> None:
    _stage(recipe, "debug", "lab/Qwen3-8B-Base-stage0")
    planned = _plan(recipe, tmp_path / "out")
    assert planned.model.model_type == "qwen3" and not planned.model.depth_known
    assert planned.model.depth == {"layers": UNKNOWN_DEPTH}
    source = planned.model.source
    assert "the recipe's other stages do: stage debug sets model.pretrained_model_name_or_path" in source
    assert "'lab/Qwen3-8B-Base-stage0'" in source and "structure fields are the preset's" in source
    assert "--model-config /cluster/runs/run7/final=PATH" in source


def test_the_readme_head_names_it_when_no_stage_does_and_a_later_section_is_not_read(recipe: Path) -> None:
    (recipe / "README.md").write_text(
        "# lm_unknown\n\nA Qwen3 recipe for long documents.\n\n## Compared\n\nQwen2-VL and ViT runs differ.\n"
    )
    evidence = _evidence(recipe)
    assert (evidence.family, evidence.place, evidence.where()) == ("qwen3", "the recipe's README", "README.md:3")


def test_the_recipes_code_names_it_by_module_and_by_the_transformers_package_it_imports(recipe: Path) -> None:
    (recipe / "model").mkdir()
    (recipe / "model" / "qwen2_vl_patches.py").write_text("from transformers.models.qwen2_vl import modeling\n")
    (recipe / "tests").mkdir()
    (recipe / "tests" / "test_vit.py").write_text("import transformers.models.vit\n")  # tests are not the recipe
    evidence = _evidence(recipe)
    assert evidence.family == "qwen2_vl" and evidence.place == "the recipe's own code"
    assert evidence.where() == (
        "the recipe's module model/qwen2_vl_patches.py; model/qwen2_vl_patches.py:1 imports transformers.models.qwen2_vl"
    )


def test_two_families_in_one_place_are_no_answer_and_the_message_names_both(recipe: Path, tmp_path: Path) -> None:
    _stage(recipe, "a", "lab/Qwen3-8B")
    _stage(recipe, "b", "lab/Qwen2.5-VL-7B")
    with pytest.raises(NotPlanned) as refused:
        _plan(recipe, tmp_path / "out")
    message = str(refused.value)
    assert "the recipe's other stages name more than one" in message
    assert "qwen3 (stage a sets" in message and "qwen2_5_vl (stage b sets" in message
    assert "--model-config /cluster/runs/run7/final=PATH" in message


def test_another_architecture_of_a_family_is_no_answer_even_when_the_readme_names_the_family(recipe: Path) -> None:
    _stage(recipe, "debug", "lab/Qwen3-VL-30B-A3B-Instruct")  # a mixture of experts: not the preset's structure
    (recipe / "README.md").write_text("# lm_unknown\n\nA Qwen3-VL recipe.\n")
    evidence = _evidence(recipe)
    assert evidence.family is None and evidence.place == "the recipe's other stages"
    assert evidence.candidates().startswith("qwen3_vl variant (stage debug sets")


def test_a_recipe_that_names_nothing_is_not_planned_and_says_where_it_looked(recipe: Path, tmp_path: Path) -> None:
    with pytest.raises(NotPlanned, match=r"neither its name nor the recipe \(its other stages, README, code\)"):
        _plan(recipe, tmp_path / "out")
