"""A change to the shared kit, reviewed as a reader of the pull request sees it: the recipes that call the
changed class, their soft layer failing with the kit's finding (at its compile call), error counts that include
it, and no 'unchanged' beside a changed compiled scope."""

from __future__ import annotations

from fixture_repo import base_files, commit, init_repo, recipe_files

from model_compile.report.render import markdown
from model_compile.report.run import review_path
from model_compile.report.text import text

SAVE = (
    "def save(model, path):\n"
    '    base = getattr(model, "_orig_mod", model)\n'
    "    torch.save(base.module.state_dict(), path)\n"
)


def _kit_branch(tmp_path):
    files = base_files()
    files["pkg/utils/checkpoint.py"] = "import torch\n\n\n" + SAVE
    files.update(recipe_files("vlm"))
    root = init_repo(tmp_path / "repo", files)
    kit = root / "pkg/kit/mllm/model.py"
    old = kit.read_text()
    new = old.replace(
        '        visual = getattr(getattr(model, "model", None), "visual", None)\n'
        "        if visual is not None:\n"
        "            visual.forward = torch.compiler.disable(visual.forward)\n"
        "        model.compile(backend=backend, mode=mode)\n"
        "        return model\n",
        "        return torch.compile(model, backend=backend, mode=mode, dynamic=False)\n",
    )
    assert new != old
    kit.write_text(new)
    commit(root, "kit: whole-model torch.compile")
    call_line = next(i for i, ln in enumerate(new.splitlines(), 1) if "torch.compile(" in ln)
    return root, call_line


def test_the_kit_finding_fails_the_soft_layer_of_each_recipe_that_calls_it(tmp_path):
    root, call_line = _kit_branch(tmp_path)
    report = review_path(root, base="HEAD~1")
    (kit103,) = [f for f in report.findings if f.rule == "MC103"]
    assert (kit103.file, kit103.line) == ("pkg/kit/mllm/model.py", call_line)  # the call, repository-relative
    assert "`.module.state_dict()` (pkg/utils/checkpoint.py:6)" in kit103.message
    assert "(pkg/utils/checkpoint.py:5) unwraps it only as the outermost module" in kit103.message
    assert "FSDP auto-wrap" not in kit103.message
    assert any(f.rule == "MC207" and "dynamic=False" in f.message for f in report.findings)
    (vlm,) = report.recipes
    assert vlm.kits == ["MLLMModelKit"] and [f.rule for f in vlm.kit_findings if f.severity == "error"] == ["MC103"]
    soft = vlm.validation[0]
    assert soft.status == "failed" and "in the kit it calls (MLLMModelKit)" in (soft.reason or "")
    assert vlm.verdict == "needs changes" and "in the kit it calls" in vlm.verdict_reason
    md = markdown(report)
    assert "| `vlm` (kit) | :x: needs changes | kit | `model` | 1 (1) (kit: 1) |" in md
    out = text(report)
    assert "wiring: unchanged" not in out and "wiring: compile path and placement unchanged; changed:" in out
    assert "change: compiled scope:" in out


def test_markdown_and_github_name_no_path_of_this_machine(tmp_path, monkeypatch):
    from model_compile.report.render import emit

    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    root, _ = _kit_branch(tmp_path)
    report = review_path(root, base="HEAD~1")
    for fmt in ("markdown", "github"):
        out = emit(report, fmt)
        assert str(root) not in out and str(root.resolve()) not in out, fmt
        assert "`model-compile validate --soft recipes/vlm`" in out
        assert "`python -m pytest recipes/vlm/tests/" in out or "tests/test_structure.py does not exist" in out
    assert str(root) in text(report)  # the terminal's text keeps this machine's paths
