"""`model-compile diff` on the command line: formats, exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest
from fixture_repo import base_files, commit, git, init_repo, recipe_files
from test_plumbing import fake_analyze

from model_compile import cli
from model_compile.cli import main
from model_compile.review import run as review_run


@pytest.fixture(autouse=True)
def _fake(monkeypatch):
    monkeypatch.setattr(review_run, "_default_analyzer", lambda: fake_analyze)
    # Only the command under test: sibling commands are other people's work in progress.
    monkeypatch.setattr(cli, "COMMANDS", {"diff": cli.COMMANDS["diff"]})


def _repo(tmp_path):
    files = base_files()
    files.update(recipe_files("vlm"))
    return init_repo(tmp_path / "repo", files)


def test_json_contract_and_exit_1_on_new_error(tmp_path, capsys):
    root = _repo(tmp_path)
    eng = root / "recipes/vlm/engine/vlm_engine.py"
    eng.write_text(eng.read_text() + "X = 1  # ERR\n")
    rc = main(["diff", str(root), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1
    for key in ("tool", "version", "base", "head", "recipes", "new", "fixed", "unchanged"):
        assert key in out
    assert out["head"] == {"rev": "working tree", "commit": None, "tree": None}
    (f,) = out["new"]
    assert (f["file"], f["line"], f["side"], f["on_changed_line"]) == (
        "recipes/vlm/engine/vlm_engine.py",
        22,
        "head",
        True,
    )


def test_text_and_markdown_exit_0(tmp_path, capsys):
    root = _repo(tmp_path)
    (root / "recipes/vlm/README.md").write_text("# new text\n")
    assert main(["diff", str(root)]) == 0
    text = capsys.readouterr().out
    assert "recipe vlm [modified] touches: docs" in text and "result: no new error finding" in text
    assert main(["diff", str(root), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## model-compile diff") and "| `vlm` | modified | docs |" in md


def test_all_findings_lists_unchanged(tmp_path, capsys):
    root = _repo(tmp_path)
    eng = root / "recipes/vlm/engine/vlm_engine.py"
    eng.write_text(eng.read_text() + "X = 1  # ERR\n")
    commit(root, "old error")
    (root / "recipes/vlm/README.md").write_text("# new\n")
    (root / "recipes/vlm/engine/vlm_engine.py").write_text("\n" + eng.read_text())
    assert main(["diff", str(root), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unchanged"] == [] and out["unchanged_count"] == 1
    assert main(["diff", str(root), "--format", "json", "--all-findings"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [f["line"] for f in out["unchanged"]] == [23]


def test_input_errors_are_one_line_exit_2(tmp_path, capsys):
    assert main(["diff", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not inside a git repository" in err
    root = _repo(tmp_path)
    assert main(["diff", str(root), "--base", "does-not-exist"]) == 2
    assert "unknown revision 'does-not-exist'" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_explicit_head_without_base_uses_merge_base(tmp_path, capsys):
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "-b", "topic")
    (root / "recipes/vlm/README.md").write_text("# topic\n")
    commit(root, "topic docs")
    git(root, "checkout", "-q", "main")
    assert main(["diff", str(root), "--head", "topic", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["base"]["commit"] == git(root, "rev-parse", "main")
    assert [r["name"] for r in out["recipes"]] == ["vlm"]
