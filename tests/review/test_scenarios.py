"""`diff` with the real static analysis over a recipe history.

The history: add kit compile (clean) -> move the kit compile after wrapping
(new MC408) -> fix it (MC408 fixed) -> flip a stage YAML to enabled (new MC203)
-> rename a recipe -> delete one -> touch only a README -> change the kit.
"""

from __future__ import annotations

import hashlib

import pytest
from fixture_repo import KIT, base_files, commit, engine, git, init_repo, recipe_files, write

pytest.importorskip("model_compile.analyze")

from model_compile.review.run import review  # noqa: E402


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("hist") / "repo"
    files = base_files()
    files.update(recipe_files("vlm", compile_at=None))
    files.update(recipe_files("llm"))
    files.update(recipe_files("toy"))
    c = {"init": init_repo(root, files) and git(root, "rev-parse", "HEAD")}
    write(root, recipe_files("vlm"))
    c["add"] = commit(root, "vlm: kit compile before wrapping")
    write(root, {"recipes/vlm/engine/vlm_engine.py": engine("Vlm", "after_wrap")})
    c["move"] = commit(root, "vlm: compile after parallelize_model")
    write(root, {"recipes/vlm/engine/vlm_engine.py": engine("Vlm", "before_wrap")})
    c["fix"] = commit(root, "vlm: compile before wrapping again")
    y = root / "recipes/vlm/configs/train.yaml"
    y.write_text(y.read_text().replace("enabled: false", "enabled: true"))
    c["yaml"] = commit(root, "vlm: enable compile in train stage")
    git(root, "mv", "recipes/toy", "recipes/toy2")
    c["rename"] = commit(root, "rename toy -> toy2")
    git(root, "rm", "-q", "-r", "recipes/llm")
    c["delete"] = commit(root, "delete llm")
    (root / "recipes/vlm/README.md").write_text("# vlm\n\nNow with more words.\n")
    c["readme"] = commit(root, "docs")
    write(
        root,
        {
            "pkg/kit/mllm/model.py": KIT.replace(
                "model.compile(backend=backend, mode=mode)", "model = torch.compile(model, backend=backend, mode=mode)"
            )
        },
    )
    c["kit"] = commit(root, "kit: wrapper compile")
    return root, c


def _step(history, a, b):
    root, c = history
    return review(root, base=c[a], head=c[b])


def _rules(items):
    return sorted(f.rule for f in items)


def test_add_kit_compile_is_clean(history):
    rep = _step(history, "init", "add")
    (d,) = rep.recipes
    assert d.name == "vlm" and d.status == "modified"
    assert d.before.compile_path == "none" and d.after.compile_path == "kit"
    assert any(c.startswith("compile added") for c in d.ledger_changes)
    assert any(c.where == "schema" and c.field == "enabled" for c in d.config_changes)
    assert not [f for f in rep.new if f.severity == "error"] and rep.exit_code == 0


def test_move_kit_compile_after_wrapping_is_new_mc408(history):
    rep = _step(history, "add", "move")
    assert _rules(rep.new) == ["MC408"] and rep.exit_code == 1
    (d,) = rep.recipes
    assert "compile moved: now after parallelize_model (wrap)" in d.ledger_changes
    f = next(f for f in rep.new if f.rule == "MC408")
    assert "move the kit call before `parallelize_model(...)`" in f.fix
    assert f.file == "recipes/vlm/engine/vlm_engine.py" and f.side == "head" and f.near_change
    assert rep.new[0].near_change  # findings at the change sort first


def test_fix_is_fixed_mc408(history):
    rep = _step(history, "move", "fix")
    assert "MC408" in _rules(rep.fixed) and "MC408" not in _rules(rep.new)
    assert rep.exit_code == 0
    assert "compile moved: now before parallelize_model (wrap)" in rep.recipes[0].ledger_changes


def test_stage_yaml_enabled_is_new_mc203(history):
    rep = _step(history, "fix", "yaml")
    (d,) = rep.recipes
    assert d.touches == ["config"]
    assert [(c.where, c.field, c.before, c.after) for c in d.config_changes] == [
        ("recipes/vlm/configs/train.yaml", "enabled", False, True)
    ]
    assert "MC203" in _rules(rep.new)


def test_rename_keeps_findings_unchanged(history):
    rep = _step(history, "yaml", "rename")
    (d,) = rep.recipes
    assert (d.status, d.old_name, d.name) == ("renamed", "toy", "toy2")
    assert all(f.change == "renamed" for f in d.files)
    assert rep.fixed == [] and rep.exit_code == 0
    assert d.ledger_changes == [] and d.config_changes == []
    # whatever toy had, toy2 has the same (matched through the rename)
    assert all(f.recipe != "toy2" for f in rep.new), rep.new


def test_delete_recipe(history):
    rep = _step(history, "rename", "delete")
    (d,) = rep.recipes
    assert (d.name, d.status, d.after) == ("llm", "deleted", None)
    assert d.before.compile_path == "kit"
    assert rep.new == [] and rep.exit_code == 0


def test_readme_only(history):
    rep = _step(history, "delete", "readme")
    (d,) = rep.recipes
    assert d.touches == ["docs"] and d.ledger_changes == [] and d.config_changes == []
    assert rep.new == [] and rep.fixed == [] and rep.exit_code == 0


def test_kit_change_affects_every_kit_recipe(history):
    rep = _step(history, "readme", "kit")
    assert rep.kit_changed and rep.kit_files == ["pkg/kit/mllm/model.py"]
    assert {(d.name, d.status) for d in rep.recipes} == {("vlm", "kit"), ("toy2", "kit")}
    assert rep.kit_changes == ["MLLMModelKit.apply_model_compile (pkg/kit/mllm/model.py): in place -> not in place"]
    assert "MC103" in _rules(rep.new) and rep.exit_code == 1


def test_range_diff_summarises_the_whole_history(history):
    rep = _step(history, "init", "kit")
    status = {d.name: d.status for d in rep.recipes}
    assert status["llm"] == "deleted" and status["toy2"] == "renamed" and status["vlm"] == "modified"


def test_unparsable_file_on_head_is_mc000_not_a_crash(tmp_path):
    files = base_files()
    files.update(recipe_files("vlm"))
    root = init_repo(tmp_path / "repo", files)
    eng = root / "recipes/vlm/engine/vlm_engine.py"
    eng.write_text(eng.read_text().replace("def prepare_model(self):", "def prepare_model(self:"))
    rep = review(root)
    assert "MC000" in _rules(rep.new)
    assert rep.recipes[0].status == "modified"
    commit(root, "broken")
    eng.write_text(engine("Vlm", "before_wrap"))
    back = review(root)
    assert "MC000" in _rules(back.fixed)


def _snapshot(root):
    files = {
        str(p): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }
    return (
        git(root, "rev-parse", "HEAD"),
        hashlib.sha1((root / ".git/index").read_bytes()).hexdigest(),
        (root / ".git/index").stat().st_mtime_ns,
        git(root, "--no-optional-locks", "status", "--porcelain"),
        files,
    )


def test_diff_leaves_worktree_index_and_head_alone(tmp_path):
    files = base_files()
    files.update(recipe_files("vlm"))
    root = init_repo(tmp_path / "repo", files)
    write(
        root, {"recipes/vlm/engine/vlm_engine.py": engine("Vlm", "after_wrap"), "recipes/vlm/model/new.py": "x = 1\n"}
    )
    git(root, "add", "recipes/vlm/model/new.py")
    (root / "recipes/vlm/README.md").unlink()
    before = _snapshot(root)
    rep = review(root)
    assert rep.exit_code == 1
    assert _snapshot(root) == before
