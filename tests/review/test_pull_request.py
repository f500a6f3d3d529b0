"""A pull request reviewed with `--hard` as it will merge, in the clones people and CI have (issue 45).

The runtime layers run on the merge result (materialized in a temporary tree that borrows the repository's
objects) against the target's tip; a merge that conflicts is reviewed as the branch against its merge base,
naming each conflict's kind and what the target has since; a shallow clone without the merge base is one line
naming the fetch; blobs this clone lacks are left out of the tree when the run does not read them, and refuse
the runtime layers in one line when it does. The runtime layers themselves are stood in for here (what they are
handed is checked); tests/hard runs them for real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixture_repo import base_files, commit, git, init_repo, recipe_files, write

from model_compile.errors import InputError
from model_compile.report.run import review_path


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the runtime layers are handed: the recipe folders (their files read while the tree exists), the
    base revision and the repository whose environment runs them."""
    calls: list[dict[str, Any]] = []

    def run_hard(dirs: dict[str, Path], *args: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, str]]:
        files = {
            name: {p.relative_to(d).as_posix(): p.read_text() for p in d.rglob("*") if p.is_file()}
            for name, d in dirs.items()
        }
        top = next(iter(dirs.values())).parents[1] if dirs else None
        shared = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()} if top else set()
        calls.append({"dirs": dirs, "files": files, "tree": shared, **kwargs})
        return {}, {name: "stood in for by the test" for name in dirs}

    monkeypatch.setattr("model_compile.report.runtime.run_hard", run_hard)
    monkeypatch.setattr("model_compile.report.runtime._question", lambda *args: None)
    return calls


def _branch_and_main(tmp_path: Path, theirs: dict[str, str], ours: dict[str, str], main_rm: str = "") -> Path:
    files = base_files()
    files.update(recipe_files("vlm"))
    root = init_repo(tmp_path / "repo", files)
    git(root, "checkout", "-q", "-b", "feature")
    write(root, ours)
    commit(root, "feature")
    git(root, "checkout", "-q", "main")
    write(root, theirs)
    if main_rm:
        git(root, "rm", "-q", "-r", main_rm)
    commit(root, "main moves on")
    git(root, "checkout", "-q", "feature")
    return root


def _engine(root: Path) -> str:
    return (root / "recipes/vlm/engine/vlm_engine.py").read_text()


def test_a_clean_merge_runs_on_the_merge_result_against_the_targets_tip(
    tmp_path: Path, handed: list[dict[str, Any]]
) -> None:
    files = recipe_files("vlm")
    engine = files["recipes/vlm/engine/vlm_engine.py"]
    ours = {"recipes/vlm/engine/vlm_engine.py": engine.replace("use_reentrant=False", "use_reentrant=True")}
    theirs = {"pkg/engine.py": "class Engine:\n    ready = True\n\n    def before_train(self):\n        pass\n"}
    root = _branch_and_main(tmp_path, theirs, ours)
    report = review_path(root, head="feature", hard=True)
    (call,) = handed
    assert call["base_rev"] == git(root, "rev-parse", "main") and call["home"] == root.resolve()
    # the merge result: the branch's engine and main's shared file, together; the repository is not touched
    assert "use_reentrant=True" in call["files"]["vlm"]["engine/vlm_engine.py"]
    assert not str(call["dirs"]["vlm"]).startswith(str(root))
    assert any(n.startswith("the runtime layers ran on the merge result of feature into main") for n in report.notes)
    assert any(n.startswith("reviewed as the merge of feature into main") for n in report.scope.notes)
    assert git(root, "status", "--porcelain") == "" and "ready = True" not in (root / "pkg/engine.py").read_text()
    assert not call["dirs"]["vlm"].exists()  # the temporary tree is gone after the run


@pytest.mark.parametrize("kind", ["content", "modify/delete"])
def test_a_conflict_is_named_with_its_kind_and_the_branch_runs_against_its_merge_base(
    tmp_path: Path, handed: list[dict[str, Any]], kind: str
) -> None:
    engine = recipe_files("vlm")["recipes/vlm/engine/vlm_engine.py"]
    ours = {"recipes/vlm/engine/vlm_engine.py": engine.replace("use_reentrant=False", "use_reentrant=True")}
    if kind == "content":
        theirs = {"recipes/vlm/engine/vlm_engine.py": engine.replace("use_reentrant=False", "use_reentrant=None")}
        root = _branch_and_main(tmp_path, theirs, ours)
    else:
        root = _branch_and_main(tmp_path, {"pkg/other.py": "X = 1\n"}, ours, main_rm="recipes/vlm/engine")
    base = git(root, "merge-base", "main", "feature")
    report = review_path(root, head="feature", hard=True)
    (call,) = handed
    assert call["base_rev"] == base  # the branch against its merge base
    assert "use_reentrant=True" in call["files"]["vlm"]["engine/vlm_engine.py"]
    (said,) = [n for n in report.scope.notes + report.notes if n.startswith("the merge into main conflicts")]
    assert f"recipes/vlm/engine/vlm_engine.py ({kind})" in said
    assert f"against its merge base {base[:12]} instead" in said
    assert any(
        n.startswith("main has 1 commit(s) since the merge base, which this review lacks") for n in report.scope.notes
    )
    assert report.scope.base.startswith(base[:12])


def _shallow(tmp_path: Path, depth_main: int | None) -> Path:
    source = _branch_and_main(tmp_path, {"pkg/other.py": "X = 1\n"}, {"recipes/vlm/README.md": "# vlm\n\nmore\n"})
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{source}", str(clone))
    if depth_main:
        git(clone, "fetch", "-q", "--depth", str(depth_main), "origin", "main:refs/remotes/origin/main")
    return clone


def test_a_shallow_clone_without_the_merge_base_is_one_line_naming_the_fetch(tmp_path: Path) -> None:
    clone = _shallow(tmp_path, depth_main=1)
    with pytest.raises(InputError) as caught:
        review_path(clone, base="origin/main", hard=True)
    said = str(caught.value)
    assert "\n" not in said and said.endswith("`git fetch --unshallow origin main`")
    assert "no merge base in this shallow clone" in said


def test_a_shallow_clone_without_the_base_names_the_fetch_that_brings_it(tmp_path: Path) -> None:
    clone = _shallow(tmp_path, depth_main=None)
    with pytest.raises(InputError) as caught:
        review_path(clone, base="origin/main", hard=True)
    assert str(caught.value) == (
        "unknown revision 'origin/main' (this is a shallow clone: fetch it with `git fetch --unshallow origin main`)"
    )


def _drop_blob(root: Path, rev: str, path: str) -> str:
    """Remove the blob of `path` at `rev` from the object store (as a partial clone lacks it); its sha."""
    sha = git(root, "rev-parse", f"{rev}:{path}")
    (root / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    return sha


def test_a_blob_missing_outside_what_the_run_reads_is_left_out_and_the_tree_is_not_dirty(
    tmp_path: Path, handed: list[dict[str, Any]]
) -> None:
    ours = {"docs/panel.png": b"\x89PNG old pixels\x00", "recipes/vlm/README.md": "# vlm\n\nmore words\n"}
    root = _branch_and_main(tmp_path, {"pkg/other.py": "X = 1\n"}, ours)  # type: ignore[arg-type]
    _drop_blob(root, "feature", "docs/panel.png")
    (root / "docs/panel.png").unlink()  # what a checkout that could not read the blob leaves
    report = review_path(root, hard=True)
    (call,) = handed
    assert "docs/panel.png" not in call["tree"] and "pkg/other.py" in call["tree"]  # left out; main's file merged in
    assert any(
        n.startswith("1 tracked file(s) are absent from the working tree because this clone lacks their blobs")
        for n in report.scope.notes + report.notes
    )
    assert any(
        n.startswith("1 file(s) of the reviewed tree are not in this clone (docs/panel.png)") for n in report.notes
    )
    assert any(n.startswith("the runtime layers ran on the merge result of") for n in report.notes)


def test_a_blob_missing_that_the_run_reads_refuses_the_runtime_layers_in_one_line(
    tmp_path: Path, handed: list[dict[str, Any]]
) -> None:
    ours = {"recipes/vlm/configs/extra.yaml": "model:\n  path: /elsewhere\n"}
    root = _branch_and_main(tmp_path, {"pkg/other.py": "X = 1\n"}, ours)
    sha = _drop_blob(root, "feature", "recipes/vlm/configs/extra.yaml")
    report = review_path(root, head="feature", hard=True)
    assert handed == []
    (recipe,) = report.recipes
    row = next(r for r in recipe.validation if r.name == "rehearsal")
    assert row.status == "not-run" and row.reason is not None
    assert f"recipes/vlm/configs/extra.yaml ({sha[:12]}): not in this clone" in row.reason
    assert "fetch --refetch origin" in row.reason and "\n" not in row.reason
