"""A dry run reviews the planned files without writing them."""

from __future__ import annotations

import json

from gen_helpers import make_repo, run_generate, snapshot

from model_compile.api import review_recipe


def test_dry_run_reviews_the_planned_result_and_writes_nothing(tmp_path):
    root = make_repo(tmp_path, "after_wrap")
    recipe = root / "recipes" / "toy_vlm"
    before = snapshot(root)
    assert "MC408" in {f.rule for f in review_recipe(recipe).findings}  # the defect on disk

    code, out, err = run_generate(str(recipe), "--path", "kit", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["dry_run"] and not data["written"]
    validation = data["validation"]
    assert validation["planned"] is True
    assert validation["errors"] == 0 and validation["compile_path"] == "kit"
    assert snapshot(root) == before  # nothing written
    assert "MC408" in {f.rule for f in review_recipe(recipe).findings}  # disk unchanged


def test_dry_run_text_says_after_this_edit(tmp_path):
    root = make_repo(tmp_path, "none_assign")
    code, out, err = run_generate(str(root / "recipes" / "toy_vlm"), "--path", "kit")
    assert code == 0 and out.startswith("--- a/")
    assert "soft validation: after this edit, compile path kit: 0 error(s)" in err


def test_repository_nested_in_another_checkout_uses_its_own_kit(tmp_path):
    """The recipes/ layout, not the outer git top level, decides the repository."""
    import git

    outer = tmp_path / "outer"
    inner = make_repo(outer / "vendor", "none_assign", use_git=False)
    engine = inner / "recipes" / "toy_vlm" / "engine" / "toy_vlm_engine.py"
    text = engine.read_text()
    engine.write_text(
        text.replace("from toykit.kit import MLLMModelKit\n", "").replace(
            "        self.model_kit = MLLMModelKit()\n", ""
        )
    )
    # the outer checkout has more recipes importing a different kit module
    for i in range(3):
        other = outer / "recipes" / f"o{i}" / "engine" / "e.py"
        other.parent.mkdir(parents=True)
        other.write_text("from elsewhere.kit import MLLMModelKit\n")
    (outer / "elsewhere").mkdir()
    (outer / "elsewhere" / "kit.py").write_text("class MLLMModelKit:\n    pass\n")
    repo = git.Repo.init(outer)
    repo.git.add(A=True)
    repo.index.commit("outer", author=git.Actor("t", "t@example.com"), committer=git.Actor("t", "t@example.com"))

    code, out, err = run_generate(str(inner / "recipes" / "toy_vlm"), "--path", "kit")
    assert code == 0, err
    assert "+from toykit.kit import MLLMModelKit" in out
    assert out.startswith("--- a/recipes/toy_vlm/")
