"""`diff` over histories with entries that are not plain text files.

Each commit of these fixture histories is diffed with the real analysis,
through the command line, as `diff` runs on a real repository's history:
a submodule entry (gitlink) added inside a recipe and under a folder that
holds nothing else, a symlink (inside and outside the tree), a binary file, a
recipe folder renamed, a recipe deleted, and a blob missing from the object
database. Every run must exit 0 or 1 with valid JSON that says what happened.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixture_repo import base_files, commit, git, init_repo, recipe_files, write

from model_compile.cli import main
from model_compile.review.gittree import GitTree, open_repo

SUB_SHA = "1234567890abcdef1234567890abcdef12345678"  # a commit of another repository: never read


def _diff(root: Path, capsys: pytest.CaptureFixture[str], base: str, head: str) -> tuple[int, dict]:
    rc = main(["diff", str(root), "--base", base, "--head", head, "--format", "json"])
    captured = capsys.readouterr()
    assert rc in (0, 1), captured.err
    return rc, json.loads(captured.out)


def _gitlink(root: Path, path: str) -> str:
    (root / path).mkdir(parents=True)  # an unpopulated submodule: `git add -A` keeps the entry
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{SUB_SHA},{path}")
    git(root, "commit", "-q", "-m", f"submodule {path}")
    return git(root, "rev-parse", "HEAD")


def _repo(tmp_path: Path) -> Path:
    files = base_files()
    files.update(recipe_files("vlm"))
    files.update(recipe_files("toy"))
    return init_repo(tmp_path / "repo", files)


def _files(out: dict) -> dict[str, dict]:
    every = [f for r in out["recipes"] for f in r["files"]] + out["shared_files"]
    return {f["path"]: f for f in every}


def test_gitlink_in_a_folder_with_no_files_is_no_recipe(tmp_path, capsys):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    c1 = _gitlink(root, "recipes/refs/vendored")
    rc, out = _diff(root, capsys, c0, c1)
    assert rc == 0 and out["recipes"] == []
    (f,) = out["shared_files"]
    assert (f["path"], f["entry"], f["change"], f["recipe"]) == ("recipes/refs/vendored", "submodule", "added", None)
    assert SUB_SHA[:12] in f["note"]
    assert any("recipes/refs/ holds no file of this repository" in n for n in out["notes"])
    # ... and deleting it again (the history's "delete trash" commit) diffs too.
    git(root, "rm", "-q", "--cached", "recipes/refs/vendored")
    (root / "recipes/refs/vendored").rmdir()
    c2 = commit(root, "drop submodule")
    rc, out = _diff(root, capsys, c1, c2)
    assert rc == 0 and _files(out)["recipes/refs/vendored"]["change"] == "deleted"


def test_gitlink_inside_a_recipe_is_listed_not_read(tmp_path, capsys):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    c1 = _gitlink(root, "recipes/vlm/third_party/lib")
    rc, out = _diff(root, capsys, c0, c1)
    assert rc == 0
    (recipe,) = out["recipes"]
    assert recipe["name"] == "vlm" and recipe["status"] == "modified"
    (f,) = recipe["files"]
    assert f["entry"] == "submodule" and f["note"].startswith("a submodule (gitlink)")
    assert recipe["new"] == 0 and recipe["fixed"] == 0  # the recipe's wiring did not change
    tree = GitTree(open_repo(root).commit(c1))
    assert "recipes/vlm/third_party/lib" not in tree.files()
    assert tree.gitlinks() == {"recipes/vlm/third_party/lib": SUB_SHA}
    assert "submodule" in (tree.problem("recipes/vlm/third_party/lib") or "")


def test_symlink_inside_reads_as_its_target_outside_is_refused(tmp_path, capsys):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    (root / "recipes/vlm/configs/stage2.yaml").symlink_to("train.yaml")
    (root / "recipes/vlm/configs/leak.yaml").symlink_to("/etc/hostname")
    c1 = commit(root, "symlinks")
    rc, out = _diff(root, capsys, c0, c1)
    files = _files(out)
    assert files["recipes/vlm/configs/stage2.yaml"]["entry"] == "symlink"
    assert files["recipes/vlm/configs/leak.yaml"]["entry"] == "symlink"
    # The outside link is reported as unreadable (MC000), never followed.
    new = [(f["rule"], f["file"]) for f in out["new"]]
    assert ("MC000", "recipes/vlm/configs/leak.yaml") in new
    tree = GitTree(open_repo(root).commit(c1))
    assert tree.read_bytes("recipes/vlm/configs/stage2.yaml") == (root / "recipes/vlm/configs/train.yaml").read_bytes()
    assert tree.read_bytes("recipes/vlm/configs/leak.yaml") is None
    assert "outside the repository" in (tree.problem("recipes/vlm/configs/leak.yaml") or "")
    assert rc == 1  # MC000 is an error the change introduces


def test_binary_file_in_a_recipe(tmp_path, capsys):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    write(root, {"recipes/vlm/assets/logo.png": b"\x89PNG\r\n\x1a\n\0\0\0IHDR" + bytes(range(256))})
    c1 = commit(root, "logo")
    rc, out = _diff(root, capsys, c0, c1)
    assert rc == 0
    f = _files(out)["recipes/vlm/assets/logo.png"]
    assert f["binary"] is True and f["entry"] == "file" and f["change"] == "added"


def test_recipe_folder_renamed(tmp_path, capsys):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    git(root, "mv", "recipes/toy", "recipes/toy2")
    c1 = commit(root, "rename recipe")
    rc, out = _diff(root, capsys, c0, c1)
    assert rc == 0
    (recipe,) = out["recipes"]
    assert (recipe["name"], recipe["old_name"], recipe["status"]) == ("toy2", "toy", "renamed")
    assert recipe["new"] == 0 and recipe["fixed"] == 0  # same findings, followed through the rename


def test_recipe_deleted(tmp_path, capsys):
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    git(root, "rm", "-q", "-r", "recipes/toy")
    c1 = commit(root, "drop toy")
    rc, out = _diff(root, capsys, c0, c1)
    assert rc == 0
    (recipe,) = out["recipes"]
    assert (recipe["name"], recipe["status"]) == ("toy", "deleted")
    assert recipe["ledger_changes"] == ["recipe removed (compile path was kit)"]
    assert all(f["change"] == "deleted" for f in recipe["files"])


def _drop_object(root: Path, sha: str) -> None:
    """Delete a loose object: the clone now lacks it, as a partial or damaged one does."""
    obj = root / ".git" / "objects" / sha[:2] / sha[2:]
    obj.chmod(0o644)
    obj.unlink()


def test_blob_missing_from_the_clone(tmp_path, capsys):
    """A listed blob the object database lacks (a partial or damaged clone) is named, not fatal."""
    root = _repo(tmp_path)
    c0 = git(root, "rev-parse", "HEAD")
    write(root, {"docs/big.bin": b"\0" * 64, "recipes/vlm/README.md": "# vlm\n\nchanged\n"})
    c1 = commit(root, "big file")
    sha = git(root, "rev-parse", f"{c1}:docs/big.bin")
    _drop_object(root, sha)
    rc, out = _diff(root, capsys, c0, c1)
    assert rc == 0
    files = _files(out)
    assert "missing from this clone" in files["docs/big.bin"]["note"]
    assert files["recipes/vlm/README.md"]["note"] is None  # the rest is compared as usual


def test_every_commit_of_the_fixture_history_diffs(tmp_path, capsys):
    """All of the above as one history, diffed commit by commit like the reference repository's."""
    root = _repo(tmp_path)
    _gitlink(root, "recipes/refs/a")
    _gitlink(root, "recipes/vlm/third_party/lib")
    (root / "recipes/vlm/configs/stage2.yaml").symlink_to("train.yaml")
    commit(root, "symlink")
    write(root, {"recipes/vlm/assets/logo.png": b"\0\x01\x02" * 50})
    commit(root, "binary")
    git(root, "mv", "recipes/toy", "recipes/toy2")
    commit(root, "rename")
    git(root, "rm", "-q", "--cached", "recipes/refs/a")
    (root / "recipes/refs/a").rmdir()
    commit(root, "drop submodule")
    git(root, "rm", "-q", "-r", "recipes/toy2")
    commit(root, "drop recipe")
    commits = git(root, "log", "--format=%H").split()
    codes = [_diff(root, capsys, f"{c}~1", c)[0] for c in commits[:-1]]
    assert len(codes) == 7 and set(codes) <= {0, 1}
    assert "recipes/vlm/third_party/lib" in git(root, "ls-tree", "-r", "HEAD", "recipes/vlm")  # the entries stayed


def test_a_deleted_blob_missing_from_the_clone_does_not_stop_rename_detection(tmp_path, capsys):
    """Rename detection reads a deleted file's blob to pair it with an added one: when the clone lacks it,
    the listing is redone without renames instead of failing (a merge of the reference history did)."""
    root = _repo(tmp_path)
    write(root, {"assets/logo.png": b"\x89PNG" + b"\0" * 64})
    c1 = commit(root, "logo")
    sha = git(root, "rev-parse", f"{c1}:assets/logo.png")
    git(root, "rm", "-q", "assets/logo.png")
    write(root, {"assets/logo2.png": b"\x89PNG" + b"\0" * 63 + b"\1", "recipes/vlm/README.md": "# vlm\n\nmoved\n"})
    c2 = commit(root, "replace the logo")
    _drop_object(root, sha)
    rc, out = _diff(root, capsys, c1, c2)
    assert rc == 0
    files = _files(out)
    assert (
        files["assets/logo.png"]["change"] == "deleted"
        and "missing from this clone" in files["assets/logo.png"]["note"]
    )
    assert files["assets/logo2.png"]["change"] == "added" and files["recipes/vlm/README.md"]["note"] is None
