"""A branch's recipe that imports what its target removed since the merge base is the change's, as it merges: git
names every such name, the files and the target's commits (an agent found ten by hand that the run named one of)."""

from __future__ import annotations

from pathlib import Path

from git_helpers import git

from model_compile.report.merge_drift import gone_since


def _repo(tmp_path: Path) -> tuple[Path, str, str, str]:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("def old_name():\n    pass\n\n\nclass Kept:\n    pass\n\nHELPER = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "feature")
    (root / "recipes" / "r").mkdir(parents=True)
    (root / "recipes" / "r" / "engine.py").write_text("from pkg.mod import HELPER, Kept, old_name\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a recipe")
    head = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "main")
    (root / "pkg" / "mod.py").write_text("def new_name():\n    pass\n\n\nclass Kept:\n    pass\n")
    git(root, "commit", "-q", "-am", "refactor: the module's API")
    target = git(root, "rev-parse", "HEAD").strip()
    return root, base, head, target


def test_names_the_target_removed_since_the_merge_base_are_the_changes(tmp_path: Path) -> None:
    root, base, head, target = _repo(tmp_path)
    failed = "ImportError: cannot import name 'old_name' from 'pkg.mod' (/tmp/x/pkg/mod.py)"
    (note,) = gone_since(root, base, target, "main", {"r": failed}, {"r": (head, "recipes/r")})
    assert note.startswith("r: the change's, as it merges: it imports 2 name(s) `old_name, HELPER` from pkg/mod.py")
    assert "1 commit(s) of main since changed it" in note and "refactor: the module's API" in note
    assert "Kept" not in note  # still there at the target


def test_no_import_failure_no_note(tmp_path: Path) -> None:
    root, base, head, target = _repo(tmp_path)
    assert gone_since(root, base, target, "main", {"r": "all passed"}, {"r": (head, "recipes/r")}) == []
    # a failure of a name the merge base never had is not the merge's
    failed = "ImportError: cannot import name 'never' from 'pkg.mod' (/tmp/x/pkg/mod.py)"
    assert gone_since(root, base, target, "main", {"r": failed}, {}) == []
