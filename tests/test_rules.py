"""Every rule's VALID and INVALID examples run as its tests (Fixit style)."""

from __future__ import annotations

import pytest

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.rules import ALL_RULES
from model_compile.rules.base import Example
from model_compile.rules.scaffold import example_files, render_example

KIT = (
    "class MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)


def _run(example):
    files = {"example_engine/kit/mllm/model.py": KIT, **example_files(example)}
    return analyze_tree(MemoryTree(files))


def _marks(example):
    return render_example(example)[1]


def _cases(kind):
    for rule in ALL_RULES:
        for i, ex in enumerate(getattr(rule, kind)):
            yield pytest.param(
                rule, ex, id=f"{rule.id}-{kind.lower()}-{i}{'-' + ex.note.replace(' ', '_') if ex.note else ''}"
            )


@pytest.mark.parametrize("rule,example", list(_cases("VALID")))
def test_valid_example_has_no_finding(rule, example):
    assert not _marks(example), "a VALID example marks no line"
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
        assert f.severity == (example.severity or rule.severity)
        assert f.fix and f.message and f.line >= 1
        assert f.subject, f"{rule.id} finding has no subject (diff fingerprints need one)"
    marks = _marks(example)
    assert {m.rule for m in marks} <= {rule.id}, f"markers of other rules in a {rule.id} example: {marks}"
    expected = {(m.file, m.line) for m in marks}
    got = {(f.file, f.line) for f in hits}
    assert got == expected, f"{rule.id} flagged {sorted(got)} but the example marks {sorted(expected)}: " + "; ".join(
        f"{f.file}:{f.line} `{f.code}` {f.message}" for f in hits
    )


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_every_invalid_example_marks_its_line(rule):
    unmarked = [i for i, ex in enumerate(rule.INVALID) if not _marks(ex)]
    assert not unmarked, f"{rule.id} INVALID examples {unmarked} mark no line with `# <- {rule.id}`"


def test_canonical_example_is_clean():
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


def test_markers_give_the_expected_lines_and_are_stripped():
    from model_compile.rules.scaffold import Mark, mark

    files, marks = render_example(
        Example(
            body=mark("model = build()\nreturn model\n", "return", "MC405"),
            stages={"train": "model:\n  compile:\n    enabled: true  # <- MC203\n"},
            files={"model/notes.py": b"# caf\xe9  # <- MC000\n"},
        )
    )
    engine = files["recipes/example/engine/example_engine.py"]
    line = engine.splitlines().index("        return model") + 1
    assert Mark("recipes/example/engine/example_engine.py", line, "MC405") in marks
    assert Mark("recipes/example/configs/train.yaml", 3, "MC203") in marks
    assert Mark("recipes/example/model/notes.py", 1, "MC000") in marks
    assert len(marks) == 3
    assert files["recipes/example/configs/train.yaml"].endswith("    enabled: true\n")
    assert files["recipes/example/model/notes.py"] == b"# caf\xe9\n"
    assert "<-" not in engine


def test_mark_fails_loudly_on_a_missing_or_repeated_anchor():
    from model_compile.rules.scaffold import mark

    assert mark("a\nb\n", "b", "MC401") == "a\nb  # <- MC401\n"
    with pytest.raises(ValueError, match="on 0 lines"):
        mark("a\nb\n", "c", "MC401")
    with pytest.raises(ValueError, match="on 2 lines"):
        mark("model\nmodel\n", "model", "MC401")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_every_rule_has_a_near_miss_valid_example(rule):
    canonical = example_files(Example())
    near = [ex for ex in rule.VALID if example_files(ex) != canonical]
    assert near, f"{rule.id} needs a VALID example close to an INVALID one, beyond the canonical recipe"


def test_no_compile_hint_respects_a_readme_that_opts_out_of_the_kit():
    from model_compile.rules.structure import NoCompileSupport

    example = next(ex for ex in NoCompileSupport.INVALID if ex.readme)
    (hit,) = [f for f in _run(example).all_findings() if f.rule == "MC100"]
    assert "does not use the kit: ask" in hit.fix and "--path submodule" in hit.fix
    (plain,) = [f for f in _run(NoCompileSupport.INVALID[0]).all_findings() if f.rule == "MC100"]
    assert plain.fix.endswith("--path kit")
