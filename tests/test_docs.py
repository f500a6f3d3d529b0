"""Generated references stay in sync with the code."""

from __future__ import annotations

import json
from pathlib import Path

from model_compile.findings.models import Report
from model_compile.render.rules_doc import rules_markdown
from model_compile.rules import ALL_RULES

ROOT = Path(__file__).resolve().parents[1]


def test_rules_md_is_current():
    assert (ROOT / "references" / "rules.md").read_text() == rules_markdown(ALL_RULES), (
        "regenerate: model-compile rules --format markdown > references/rules.md"
    )


def test_report_schema_is_current():
    on_disk = json.loads((ROOT / "references" / "report.schema.json").read_text())
    assert on_disk == Report.model_json_schema(by_alias=True), (
        "regenerate: model-compile schema > references/report.schema.json"
    )


def test_skill_frontmatter():
    text = (ROOT / "skills" / "model-compile" / "SKILL.md").read_text()
    assert text.startswith("---\n")
    front = text.split("---\n")[1]
    fields = dict(line.split(": ", 1) for line in front.strip().splitlines() if ": " in line)
    assert fields["name"] == "model-compile"
    assert (
        1 <= len(fields["description"]) <= 1024
        and "<" not in fields["description"]
        and ">" not in fields["description"]
    )
    assert len(text.splitlines()) < 500


def test_review_schema_is_current():
    from model_compile.report.models import ReviewReport

    on_disk = json.loads((ROOT / "references" / "review.schema.json").read_text())
    assert on_disk == ReviewReport.model_json_schema(), (
        "regenerate: model-compile schema review > references/review.schema.json"
    )


def test_skill_rules_md_is_current():
    assert (ROOT / "skills" / "model-compile" / "references" / "rules.md").read_text() == rules_markdown(ALL_RULES), (
        "regenerate: model-compile rules --format markdown > skills/model-compile/references/rules.md"
    )


def test_skill_rehearsal_md_is_the_references_copy():
    """The skill ships the rehearsal's reference beside its rules (SKILL.md links it): one text, two places."""
    shipped = ROOT / "skills" / "model-compile" / "references" / "rehearsal.md"
    assert shipped.read_text() == (ROOT / "references" / "rehearsal.md").read_text(), (
        "copy: cp references/rehearsal.md skills/model-compile/references/rehearsal.md"
    )
