"""A change judged against its base by code identity and by its keys, rehearsed for real (issue 45).

The fixture's `lm_token_loss` recipe compiles its model whole; main's shared loss has a graph break in its chunk
loop. A change that adds code above the loop moves that statement down without changing it: the same site, not
new. A change that renames the model's attribute renames every parameter (and the optimizer state saved by name):
the keys differ from the base's, which fails the change unless it documents the rename with
`# model-compile: keys - <reason>`. One base rehearsal (cached by the files its run reads) serves every head.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("omegaconf")

from git_helpers import git  # noqa: E402

from model_compile.cli import main  # noqa: E402

pytestmark = [pytest.mark.hard, pytest.mark.slow]

FIXTURE = Path(__file__).parent / "fixtures" / "rehearsal_repo"
LOSS = "toy_engine/loss.py"
ENGINE = "recipes/lm_token_loss/engine/lm_token_loss_engine.py"
BREAK = '        total = total + F.cross_entropy(logits.float(), part, ignore_index=-100, reduction="sum")\n'
LOOP = "    for start in range(0, hidden.size(0), chunk_size):\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("identity")
    root = work / "repo"
    shutil.copytree(FIXTURE, root)
    loss = root / LOSS
    text = loss.read_text()
    assert BREAK in text and LOOP in text
    loss.write_text(text.replace(BREAK, BREAK + "        torch._dynamo.graph_break()\n"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "main: a graph break in the shared loss")
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # the base's rehearsal cached here, for every head
    yield root
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


def _branch(root: Path, name: str, path: str, old: str, new: str) -> None:
    git(root, "checkout", "-q", "-B", name, "main")
    file = root / path
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new))
    git(root, "commit", "-qam", name)


def _rehearse(root: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    args = ["rehearse", str(root / "recipes" / "lm_token_loss"), "--base", "main", "--steps", "3"]
    code = main([*args, "--backend", "aot_eager", "--format", "json", "--out", str(out)])
    return code, json.loads(capsys.readouterr().out)


def test_a_graph_break_the_change_only_moved_is_the_same_site(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    above = "    rows, step = hidden.size(0), chunk_size\n    assert step > 0\n    assert rows >= 0\n"
    _branch(repo, "moved", LOSS, LOOP, above + LOOP)
    code, facts = _rehearse(repo, tmp_path / "out", capsys)
    text = (repo / LOSS).read_text().splitlines()
    line = text.index("        torch._dynamo.graph_break()") + 1
    assert any(g["site"] == f"{LOSS}:{line}" for g in facts["graph_break_sites"]), facts["graph_break_sites"]
    base_sites = [g["site"] for g in facts["base"]["graph_break_sites"]]
    assert f"{LOSS}:{line - 3}" in base_sites, base_sites  # three lines up at the base: the same statement
    assert not any("new graph-break site" in r or "recompile-limit" in r for r in facts["regressions"])
    assert any(f"{LOSS}:{line - 3} -> {LOSS}:{line}" in v and "only moved" in v for v in facts["versus_base"])
    assert code == 0 or not facts["regressions"], facts["reason"]


def test_a_rename_of_the_parameters_needs_changes_unless_the_change_documents_it(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    renamed = "        self.language_model, self.chunk_size = lm, chunk_size\n"
    _branch(repo, "rename", ENGINE, "        self.lm, self.chunk_size = lm, chunk_size\n", renamed)
    engine = repo / ENGINE
    engine.write_text(engine.read_text().replace("self.lm.", "self.language_model."))
    git(repo, "commit", "-qam", "rename: the language model's attribute")
    code, facts = _rehearse(repo, tmp_path / "out", capsys)
    assert code == 1 and facts["status"] == "failed", facts["reason"]
    assert facts["reason"].startswith("new with the change: keys differ from the base's: parameter names: ")
    (params,) = [k for k in facts["keys_across"] if k.startswith("parameter names")]
    assert "'lm.model.embed_tokens.weight' -> 'language_model.model.embed_tokens.weight'" in params
    assert any(k.startswith("optimizer-state entries by parameter name") for k in facts["keys_across"])
    assert facts["keys_documented"] is None
    # the same rename, documented by the change: reported, not failed
    note = "        # model-compile: keys - the attribute is renamed; old checkpoints are converted on load\n"
    engine.write_text(engine.read_text().replace(renamed, note + renamed))
    git(repo, "commit", "-qam", "rename: documented")
    code, facts = _rehearse(repo, tmp_path / "documented", capsys)
    assert facts["keys_documented"].startswith(f"{ENGINE}:"), facts["keys_documented"]
    assert not any(r.startswith("keys differ") for r in facts["regressions"]), facts["regressions"]
    assert any("documented by the change" in v for v in facts["versus_base"])
