"""Rule selection (`[tool.model-compile]` select/ignore/severity) and inline
`# model-compile: ignore[MCxxx] - <reason>` suppression."""

from __future__ import annotations

import json

import pytest

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.errors import InputError
from model_compile.findings.models import Report
from model_compile.render import emit_report
from model_compile.rules.base import Example
from model_compile.rules.scaffold import SCHEMA, STAGE, example_files, replace_once

KIT = "class MLLMModelKit:\n    def apply_model_compile(self, model, backend, mode):\n        model.compile(backend=backend, mode=mode)\n        return model\n"
STR_BACKEND = 'backend: str = "inductor"'
LITERAL_BACKEND = 'backend: Literal["inductor", "aot_eager", "eager"] = "inductor"'
STAGE_ON = replace_once(STAGE, "enabled: false", "enabled: true")


def _analyze(pyproject: str | None = None, schema: str = SCHEMA, stage: str = STAGE) -> Report:
    files: dict[str, str | bytes] = {
        "example_engine/kit/mllm/model.py": KIT,
        **example_files(Example(schema=schema, stages={"train": stage})),
    }
    if pyproject is not None:
        files["pyproject.toml"] = pyproject
    return analyze_tree(MemoryTree(files))


def _rules(report: Report, suppressed: bool = False) -> list[str]:
    return sorted(f.rule for f in report.all_findings() if (f.suppressed is not None) == suppressed)


def test_ignore_select_and_severity_from_pyproject() -> None:
    schema = replace_once(SCHEMA, LITERAL_BACKEND, STR_BACKEND)
    assert _rules(_analyze(None, schema, STAGE_ON)) == ["MC203", "MC205"]
    assert _rules(_analyze('[tool.model-compile]\nignore = ["MC205"]\n', schema, STAGE_ON)) == ["MC203"]
    assert _rules(_analyze('[tool.model-compile]\nselect = ["MC20"]\nignore = ["MC203"]\n', schema, STAGE_ON)) == [
        "MC205"
    ]
    report = _analyze('[tool.model-compile]\nseverity = { MC203 = "error" }\n', schema, STAGE_ON)
    assert {f.rule: f.severity for f in report.all_findings()}["MC203"] == "error"
    assert report.exit_code == 1


@pytest.mark.parametrize(
    "table,needle",
    [
        ('ignore = ["MC999"]', "ignore: 'MC999' names no rule"),
        ('select = ["XX"]', "select: 'XX' names no rule"),
        ('severity = { MC999 = "info" }', "severity: 'MC999' is not a rule id"),
        ('severity = { MC203 = "fatal" }', "severity.MC203"),
    ],
)
def test_unknown_rule_ids_are_input_errors(table: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        _analyze(f"[tool.model-compile]\n{table}\n")


def test_inline_ignore_with_reason_suppresses_on_the_line_and_below() -> None:
    same = replace_once(
        STAGE, "enabled: false", "enabled: true  # model-compile: ignore[MC203] - nightly benchmark stage"
    )
    above = replace_once(
        STAGE, "    enabled: false", "    # model-compile: ignore[MC203] - nightly benchmark stage\n    enabled: true"
    )
    for stage in (same, above):
        report = _analyze(stage=stage)
        assert _rules(report) == [] and _rules(report, suppressed=True) == ["MC203"]
        (f,) = report.all_findings()
        assert f.suppressed is not None and f.suppressed.justification == "nightly benchmark stage"


def test_ignore_without_reason_silences_nothing_and_is_reported() -> None:
    stage = replace_once(STAGE, "enabled: false", "enabled: true  # model-compile: ignore[MC203]")
    report = _analyze(stage=stage)
    assert _rules(report) == ["MC001", "MC203"] and _rules(report, suppressed=True) == []


def test_suppressed_findings_stay_in_json_and_sarif_but_not_in_counts_or_exit_code() -> None:
    stage = replace_once(STAGE, "enabled: false", "enabled: true  # model-compile: ignore[MC203] - benchmark stage")
    report = _analyze('[tool.model-compile]\nseverity = { MC203 = "error" }\n', stage=stage)
    assert report.exit_code == 0
    data = json.loads(emit_report(report, "json"))
    (f,) = data["recipes"][0]["findings"]
    assert f["rule"] == "MC203" and f["suppressed"]["justification"] == "benchmark stage"
    sarif = json.loads(emit_report(report, "sarif"))
    (result,) = sarif["runs"][0]["results"]
    assert result["suppressions"] == [{"kind": "inSource", "justification": "benchmark stage"}]
    text = emit_report(report, "text")
    assert "MC203" not in text and "0 error(s), 0 warning(s), 0 info, 1 suppressed" in text
    assert emit_report(report, "github") == ""
