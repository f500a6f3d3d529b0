"""A change to shared code that runs compiled, rehearsed against its base for real (issue 39's end-to-end case).

The fixture repository's `lm_token_loss` recipe compiles its model whole, and its forward calls the
repository's shared chunked loss (`toy_engine/loss.py`). A change that adds a data-dependent branch inside the
loss's chunk loop makes dynamo skip the loss's frame: its work leaves compile. `rehearse --base main` must fail
the change naming the module that left compile and the new site, and count the changed lines; a comment-only
change to the same file is nothing new.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("omegaconf")

from git_helpers import git  # noqa: E402

from model_compile.cli import main  # noqa: E402

pytestmark = pytest.mark.hard

FIXTURE = Path(__file__).parent / "fixtures" / "rehearsal_repo"
LOSS = "toy_engine/loss.py"
LOOP_LINE = "        part = labels[start : start + chunk_size]\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("change") / "repo"
    shutil.copytree(FIXTURE, root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def _branch(root: Path, name: str, insert: str) -> int:
    """A branch off main whose one commit inserts `insert` after the loss's loop line; the first inserted line."""
    git(root, "checkout", "-q", "-B", name, "main")
    path = root / LOSS
    text = path.read_text()
    assert LOOP_LINE in text
    path.write_text(text.replace(LOOP_LINE, LOOP_LINE + insert))
    git(root, "commit", "-qam", name)
    return text[: text.index(LOOP_LINE)].count("\n") + 2


def _rehearse(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(
        [
            "rehearse",
            str(root / "recipes" / "lm_token_loss"),
            "--base",
            "main",
            "--steps",
            "3",
            "--backend",
            "aot_eager",
            "--format",
            "json",
            "--out",
            str(out),
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_a_data_dependent_branch_in_shared_compiled_code_fails_the_change(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _branch(repo, "skip-empty-chunks", "        if (part != -100).sum() == 0:\n            continue\n")
    code, facts = _rehearse(repo, tmp_path / "out", capsys)
    assert code == 1 and facts["status"] == "failed", facts["reason"]
    assert facts["reason"].startswith("new with the change: lost compile: (model) own code")
    assert f"new graph-break site {LOSS}:{line} (1x): Data-dependent branching" in facts["regressions"]
    own = next(e for e in facts["coverage"] if e["module"] == "(model) own code")
    assert own["compiled"] == 0.0 and own["base_compiled"] == 1.0, "the base compiled the loss, the head does not"
    text = (repo / LOSS).read_text()
    frame = text[: text.index("def chunked_token_loss")].count("\n") + 1
    # the cause is the break dynamo could not resume from, inside the loss's frame, which it names
    (skip,) = [c for c in own["eager_causes"] if c["kind"] == "skipped-frame"]
    assert skip["site"].endswith(f"{LOSS}:{line}"), skip
    assert f"the frame starts at {LOSS}:{frame}" in skip["cause"], skip
    # the changed lines: the `if` ran as Python with compile on (never in a graph), the `continue` never
    (hunk,) = facts["changed_lines"]
    assert hunk["file"] == LOSS and hunk["lines"] == [line, line + 1]
    assert hunk["ran_compiled"] == 0 and hunk["ran_eager"] > 0 and hunk["not_reached"] == [line + 1]
    fixes = [f for f in facts["fixes"] if f"{LOSS}:{line}" in f["fix"]]
    assert len(fixes) == 1 and fixes[0]["tried"] == "not tried" and fixes[0]["shared_code"]


def test_a_comment_only_change_to_the_same_file_is_nothing_new(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _branch(repo, "comment-only", "        # every chunk counts, supervised or not\n")
    code, facts = _rehearse(repo, tmp_path / "out", capsys)
    assert code == 0 and facts["status"] == "passed", facts["reason"]
    assert facts["regressions"] == [] and facts["existing"] is not True
    (versus,) = facts["versus_base"]
    assert versus.endswith("nothing is new with the change, everything measured here is already there at the base")
    assert facts["changed_lines"] == [] and facts["changed_note"].startswith("none to count: the changed lines")
