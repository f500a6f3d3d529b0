"""A branch proposed against a default branch that moved on is reviewed as its merge (git merge-tree): nothing is
called added or deleted that the merge would not add or delete, the recipes changed on both sides and the files
that conflict are named, and the repository is left as it was (no object, ref, index or file written)."""

from __future__ import annotations

from fixture_repo import base_files, commit, git, init_repo, recipe_files, write

from model_compile.review.run import review


def _diverged(tmp_path, conflict: bool):
    files = base_files()
    files.update(recipe_files("vlm"))
    files.update(recipe_files("old", compile_at=None))
    root = init_repo(tmp_path / "repo", files)
    git(root, "checkout", "-q", "-b", "feature")
    write(root, recipe_files("mine"))
    if conflict:
        cfg = root / "recipes/vlm/configs/train.yaml"
        cfg.write_text(cfg.read_text().replace("mode: default", "mode: max-autotune-no-cudagraphs"))
    commit(root, "feature: a recipe of its own")
    git(root, "checkout", "-q", "main")
    write(root, recipe_files("theirs"))
    git(root, "rm", "-q", "-r", "recipes/old")
    if conflict:
        cfg = root / "recipes/vlm/configs/train.yaml"
        cfg.write_text(cfg.read_text().replace("mode: default", "mode: reduce-overhead"))
    commit(root, "main moves on")
    git(root, "checkout", "-q", "feature")
    return root


def _state(root):
    return (
        git(root, "count-objects", "-v"),
        git(root, "for-each-ref"),
        git(root, "--no-optional-locks", "status", "--porcelain"),
        (root / ".git" / "index").read_bytes(),
    )


def test_a_clean_merge_is_reviewed_against_the_moved_default_branch(tmp_path):
    root = _diverged(tmp_path, conflict=False)
    before = _state(root)
    rep = review(root)
    assert _state(root) == before
    assert rep.merge is not None and rep.merge.clean and rep.merge.target == "main" and rep.merge.ahead == 1
    # main's new recipe and the recipe main deleted are not the branch's doing
    assert [(d.name, d.status) for d in rep.recipes] == [("mine", "added")]
    assert any("reviewed as the merge of" in n for n in rep.notes)
    assert rep.base.commit == git(root, "rev-parse", "main")


def test_an_explicit_base_that_moved_on_is_a_merge_not_two_trees(tmp_path):
    root = _diverged(tmp_path, conflict=False)
    rep = review(root, base="main", head="feature")
    assert [(d.name, d.status) for d in rep.recipes] == [("mine", "added")]  # not 'theirs' deleted, 'old' added


def test_a_conflicting_merge_names_both_sides_and_reads_the_branchs_side(tmp_path):
    root = _diverged(tmp_path, conflict=True)
    before = _state(root)
    rep = review(root)
    assert _state(root) == before
    assert rep.merge is not None and not rep.merge.clean
    assert rep.merge.conflicts == ["recipes/vlm/configs/train.yaml"] and rep.merge.both_sides == ["vlm"]
    vlm = next(d for d in rep.recipes if d.name == "vlm")
    assert vlm.status == "modified" and vlm.both_sides and vlm.conflicts == ["recipes/vlm/configs/train.yaml"]
    # the conflicted file is read as the branch has it
    assert [(c.field, c.before, c.after) for c in vlm.config_changes] == [
        ("mode", "reduce-overhead", "max-autotune-no-cudagraphs")
    ]
    assert any("read as the branch has them" in n for n in rep.notes)
    assert any("changed on both sides since the merge base: vlm" in n for n in rep.notes)


def test_a_branch_behind_its_base_is_compared_as_asked(tmp_path):
    root = _diverged(tmp_path, conflict=False)
    rep = review(root, base="feature", head="feature~1")
    assert rep.merge is None and [(d.name, d.status) for d in rep.recipes] == [("mine", "deleted")]
