"""Scope by what runs: a change to a Python file a recipe's run imports brings the recipe into `review` and `diff`,
with the import path as the reason; a comment- or docstring-only change is listed as such and needs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixture_repo import base_files, commit, git, init_repo, recipe_files

from model_compile.cli import main
from model_compile.report.models import ReviewReport
from model_compile.report.render import emit
from model_compile.report.run import review_path
from model_compile.review.render import render_markdown, render_text
from model_compile.review.run import review

LOSS_INIT = '''"""Loss kits, exported lazily."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .token import TokenLoss

_EXPORTS = {"TokenLoss": ".token"}


def __getattr__(name):
    from importlib import import_module

    return getattr(import_module(_EXPORTS[name], __name__), name)
'''

TOKEN = '''"""Token loss in chunks."""

import torch

from .gone import clamp


class TokenLoss:
    def __call__(self, hidden, labels, chunk_size=4096):
        out = []
        for start in range(0, hidden.size(0), chunk_size):
            chunk = labels[start : start + chunk_size]
            out.append(clamp(hidden[start : start + chunk_size]).sum() * chunk.numel())
        return torch.stack(out).sum()
'''

BRANCH = (
    "            chunk = labels[start : start + chunk_size]\n"
    "            if (chunk == -100).all():\n"
    "                continue\n"
)


def _repo(tmp_path: Path) -> Path:
    files = base_files()
    files.update(
        {
            "pkg/kit/__init__.py": "",
            "pkg/kit/loss/__init__.py": LOSS_INIT,
            "pkg/kit/loss/token.py": TOKEN,
            "pkg/kit/loss/gone.py": "def clamp(x):\n    return x\n",
            "pkg/kit/loss/unused.py": "def nobody():\n    return 0\n",
        }
    )
    files.update(recipe_files("vlm"))
    files.update(recipe_files("bad", compile_at="after_wrap"))  # an existing error finding (compile after the wrap)
    files.update(recipe_files("toy", compile_at=None))  # imports the kit, not the loss
    for name in ("vlm", "bad"):
        engine = f"recipes/{name}/engine/{name}_engine.py"
        files[engine] = files[engine].replace(
            "from pkg.kit.mllm.model import MLLMModelKit\n",
            "from pkg.kit.loss import TokenLoss\nfrom pkg.kit.mllm.model import MLLMModelKit\n",
        )
    return init_repo(tmp_path / "repo", files)


def _edit(root: Path, path: str, old: str, new: str, message: str) -> str:
    p = root / path
    text = p.read_text()
    assert old in text, old
    p.write_text(text.replace(old, new, 1))
    return commit(root, message)


def test_a_data_dependent_branch_in_a_shared_module_scopes_the_recipes_that_import_it(tmp_path):
    root = _repo(tmp_path)
    head = _edit(root, "pkg/kit/loss/token.py", BRANCH.splitlines(True)[0], BRANCH, "skip label-less chunks")
    diff = review(root, base="HEAD~1", head=head)
    assert [(d.name, d.status) for d in diff.recipes] == [("bad", "imports"), ("vlm", "imports")]  # toy: not
    vlm = diff.recipes[1]
    (imp,) = vlm.imports
    assert imp.via == ["recipes/vlm/engine/vlm_engine.py", "pkg/kit/loss/__init__.py", "pkg/kit/loss/token.py"]
    assert imp.reason == (
        "pkg/kit/loss/token.py is imported by recipes/vlm through recipes/vlm/engine/vlm_engine.py -> "
        "pkg/kit/loss/__init__.py -> pkg/kit/loss/token.py"
    )
    assert imp.code_changed and vlm.code_changed and vlm.changed_lines == {"pkg/kit/loss/token.py": [13, 14]}
    assert "imported by the run of: bad, vlm" in render_text(diff)
    assert f"- in scope: {imp.reason}" in render_markdown(diff)

    report = review_path(root, base="HEAD~1", head=head)
    assert report.verdict != "nothing to review" and report.scope.recipes == ["bad", "vlm"]
    assert report.scope.reasons["vlm"] == [imp.reason]
    section = next(r for r in report.recipes if r.name == "vlm")
    assert section.change == "imports" and section.changed_lines == {"pkg/kit/loss/token.py": [13, 14]}
    assert section.verdict == "not validated" and "through code its run imports" in section.verdict_reason
    bad = next(r for r in report.recipes if r.name == "bad")
    assert bad.verdict == "needs changes" and "existing" in bad.verdict_reason  # a code change: as for a touched one
    assert report.exit_code == 0  # nothing new
    data = json.loads(emit(report, "json"))
    assert data["recipes"][1]["imports"][0]["via"][-1] == "pkg/kit/loss/token.py"
    assert ReviewReport.model_validate(data).recipes[1].changed_lines == section.changed_lines
    assert "in scope: pkg/kit/loss/token.py is imported by recipes/vlm through" in emit(report, "text")
    assert "`vlm`: its run imports the changed `pkg/kit/loss/token.py`" in emit(report, "markdown")
    sarif = json.loads(emit(report, "sarif"))
    assert sarif["runs"][0]["properties"]["scope"]["vlm"] == [imp.reason]


@pytest.mark.parametrize(
    "old, new",
    [
        ("        out = []\n", "        # one entry per chunk\n        out = []\n\n"),  # a comment and a blank line
        ('"""Token loss in chunks."""', '"""Token loss, computed chunk by chunk."""'),  # the module's docstring
    ],
)
def test_a_comment_or_docstring_change_is_listed_and_needs_nothing(tmp_path, old, new):
    root = _repo(tmp_path)
    head = _edit(root, "pkg/kit/loss/token.py", old, new, "words only")
    diff = review(root, base="HEAD~1", head=head)
    assert [d.name for d in diff.recipes] == ["bad", "vlm"]
    assert all(not d.code_changed and d.changed_lines == {} for d in diff.recipes)
    assert all(
        not i.code_changed and "(comments, blank lines or docstrings only)" in i.reason for i in diff.recipes[0].imports
    )
    report = review_path(root, base="HEAD~1", head=head)
    bad = next(r for r in report.recipes if r.name == "bad")
    assert bad.code_changed is False
    assert bad.verdict == "not validated" and bad.verdict_reason.startswith("no code change reaches it")
    assert "existing error finding(s), not introduced by this change" in bad.verdict_reason  # said, not a verdict
    assert report.verdict == "not validated" and report.exit_code == 0


def test_a_module_no_recipe_imports_is_nothing_to_review(tmp_path):
    root = _repo(tmp_path)
    head = _edit(root, "pkg/kit/loss/unused.py", "return 0", "return 1", "unused helper")
    report = review_path(root, base="HEAD~1", head=head)
    assert report.verdict == "nothing to review" and not report.recipes
    assert "no Python file a recipe's run imports" in report.verdict_reason


def test_a_package_init_change_scopes_the_recipes_importing_through_it(tmp_path):
    root = _repo(tmp_path)
    head = _edit(root, "pkg/kit/loss/__init__.py", '"TokenLoss": ".token"}', '"TokenLoss": ".token", "X": ".x"}', "x")
    diff = review(root, base="HEAD~1", head=head)
    assert [d.name for d in diff.recipes] == ["bad", "vlm"]
    assert diff.recipes[1].imports[0].via == ["recipes/vlm/engine/vlm_engine.py", "pkg/kit/loss/__init__.py"]


def test_a_deleted_module_is_found_on_the_base_side_and_a_renamed_one_on_the_head_side(tmp_path):
    root = _repo(tmp_path)
    (root / "pkg/kit/loss/gone.py").unlink()
    head = _edit(root, "pkg/kit/loss/token.py", "from .gone import clamp\n", "clamp = abs\n", "inline clamp")
    diff = review(root, base="HEAD~1", head=head)
    vlm = next(d for d in diff.recipes if d.name == "vlm")
    gone = next(i for i in vlm.imports if i.path == "pkg/kit/loss/gone.py")
    assert gone.change == "deleted" and gone.side == "base" and gone.via[-2:] == ["pkg/kit/loss/token.py", gone.path]
    assert gone.reason.startswith("pkg/kit/loss/gone.py (deleted) was imported by recipes/vlm before the change")
    assert list(vlm.changed_lines) == ["pkg/kit/loss/token.py"]  # a deleted file has no head-side line

    root = _repo(tmp_path / "again")
    git(root, "mv", "pkg/kit/loss/gone.py", "pkg/kit/loss/clamping.py")
    head = _edit(root, "pkg/kit/loss/token.py", "from .gone import", "from .clamping import", "rename")
    vlm = next(d for d in review(root, base="HEAD~1", head=head).recipes if d.name == "vlm")
    moved = next(i for i in vlm.imports if i.path == "pkg/kit/loss/clamping.py")
    assert moved.change == "renamed" and moved.old_path == "pkg/kit/loss/gone.py" and moved.side == "head"


def test_a_recipe_given_explicitly_is_in_scope_through_its_imports(tmp_path, capsys):
    root = _repo(tmp_path)
    head = _edit(root, "pkg/kit/loss/token.py", BRANCH.splitlines(True)[0], BRANCH, "branch")
    code = main(["review", str(root / "recipes" / "vlm"), "--base", "HEAD~1", "--head", head, "--format", "json"])
    report = ReviewReport.model_validate_json(capsys.readouterr().out)
    assert code == 0 and [r.change for r in report.recipes] == ["imports"]
    assert not any("reviewed whole" in n for n in report.scope.notes)


def test_a_comment_in_the_recipes_own_engine_is_no_code_change_either(tmp_path):
    root = _repo(tmp_path)
    engine = "recipes/bad/engine/bad_engine.py"
    head = _edit(root, engine, "    def prepare_model(self):\n", "    def prepare_model(self):  # builds it\n", "c")
    report = review_path(root, base="HEAD~1", head=head)
    (bad,) = report.recipes
    assert bad.change == "modified" and bad.code_changed is False and bad.changed_lines == {}
    assert bad.verdict == "not validated" and f"no code change reaches it ({engine}: comments" in bad.verdict_reason
    readme = _edit(root, "recipes/bad/README.md", "A tiny recipe.", "A tiny recipe, reworded.", "docs")
    (bad,) = review_path(root, base="HEAD~1", head=readme).recipes
    assert bad.code_changed is True and bad.verdict == "needs changes"  # not a Python file: judged as before
