"""Generated references stay in sync with the code."""

from __future__ import annotations

import json
import re
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


SKILL_DIR = ROOT / "skills" / "model-compile"


def test_skill_references_are_the_references_copies():
    """The skill ships copies of the project's references (SKILL.md links them): one text, two places."""
    shipped = sorted(p.name for p in (SKILL_DIR / "references").glob("*.md"))
    assert {"generate.md", "patterns.md", "rehearsal.md", "review.md", "rules.md"} <= set(shipped)
    for name in shipped:
        assert (SKILL_DIR / "references" / name).read_text() == (ROOT / "references" / name).read_text(), (
            f"copy: cp references/{name} skills/model-compile/references/{name}"
        )


def test_skill_links_resolve_one_level_deep():
    """Every link of SKILL.md is relative and one level deep (references/x.md), and every link of a shipped
    reference to another one resolves beside it: the installed skill reads them without the project."""
    links = re.findall(r"\]\(([^)#]+)\)", (SKILL_DIR / "SKILL.md").read_text())
    assert links and all(re.fullmatch(r"references/[\w.-]+\.md", link) for link in links), links
    assert all((SKILL_DIR / link).is_file() for link in links)
    for ref in (SKILL_DIR / "references").glob("*.md"):
        for link in re.findall(r"\]\(([\w.-]+\.md)\)", ref.read_text()):
            assert (ref.parent / link).is_file(), f"{ref.name} links {link}, which the skill does not ship"


def test_skill_stays_short():
    """What an agent needs to act; the rest is in references/ (two agents called 295 lines long)."""
    assert len((SKILL_DIR / "SKILL.md").read_text().splitlines()) <= 160
