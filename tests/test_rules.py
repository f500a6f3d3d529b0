"""Every rule's VALID and INVALID examples run as its tests (Fixit style)."""

from __future__ import annotations

import pytest

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.rules import ALL_RULES
from model_compile.rules.scaffold import example_files

KIT = (
    "class MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)


def _run(example):
    files = {"example_engine/kit/mllm/model.py": KIT, **example_files(example)}
    return analyze_tree(MemoryTree(files))


def _cases(kind):
    for rule in ALL_RULES:
        for i, ex in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, ex, id=f"{rule.id}-{kind.lower()}-{i}{'-' + ex.note.replace(' ', '_') if ex.note else ''}")


@pytest.mark.parametrize("rule,example", list(_cases("VALID")))
def test_valid_example_has_no_finding(rule, example):
    report = _run(example)
    hits = [f for f in report.all_findings() if f.rule == rule.id]
    assert not hits, [f"{f.file}:{f.line} {f.message}" for f in hits]
    broken = [f.message for f in report.all_findings() if f.rule == "MC000"]
    assert not broken, f"the VALID example itself does not parse: {broken}"


@pytest.mark.parametrize("rule,example", list(_cases("INVALID")))
def test_invalid_example_is_flagged(rule, example):
    report = _run(example)
    hits = [f for f in report.all_findings() if f.rule == rule.id]
    assert hits, f"{rule.id} not reported; got {[(f.rule, f.message) for f in report.all_findings()]}"
    if rule.id != "MC000":
        broken = [f.message for f in report.all_findings() if f.rule == "MC000"]
        assert not broken, f"the INVALID example itself does not parse: {broken}"
    for f in hits:
        assert f.severity == rule.severity
        assert f.fix and f.message and f.line >= 1


def test_canonical_example_is_clean():
    from model_compile.rules.base import Example

    report = _run(Example())
    assert [f for f in report.all_findings() if f.severity != "info"] == []
    assert report.recipes[0].compile_path == "kit"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_rule_is_documented(rule):
    for attr in ("id", "severity", "title", "what", "why", "example", "use_instead", "fix"):
        assert getattr(rule, attr), f"{rule.id} lacks {attr}"
    assert rule.VALID and rule.INVALID, f"{rule.id} needs VALID and INVALID examples"


def test_replace_once_fails_loudly_on_a_missing_or_repeated_anchor():
    from model_compile.rules.scaffold import replace_once

    assert replace_once("a b c", "b", "B") == "a B c"
    with pytest.raises(ValueError, match=r"'enabled: sometimes' occurs 0 times"):
        replace_once("enabled: false\n", "enabled: sometimes", "enabled: true")
    with pytest.raises(ValueError, match=r"'model' occurs 2 times"):
        replace_once("model = build(model)\n", "model", "net")
