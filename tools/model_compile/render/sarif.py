"""SARIF 2.1.0 (GitHub code scanning) and GitHub workflow annotations."""

from __future__ import annotations

from typing import Any

from model_compile import __version__
from model_compile.findings.models import Report
from model_compile.rules.finding import Finding, active

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _result(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ruleId": f.rule,
        "level": _LEVEL[f.severity],
        "message": {"text": f"{f.message} (fix: {f.fix})"},
        "locations": [
            {"physicalLocation": {"artifactLocation": {"uri": f.file}, "region": {"startLine": max(f.line, 1)}}}
        ],
        "partialFingerprints": {"modelCompile/v1": f.fingerprint},
    }
    if f.suppressed is not None:
        out["suppressions"] = [{"kind": f.suppressed.kind, "justification": f.suppressed.justification}]
    return out


def sarif(report: Report) -> dict[str, Any]:
    """The report as SARIF 2.1.0; suppressed findings carry a `suppressions` entry (kind inSource)."""
    from model_compile.rules import ALL_RULES

    results = [_result(f) for f in report.all_findings()]
    return {
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "model-compile",
                        "version": __version__,
                        "rules": [
                            {
                                "id": r.id,
                                "name": r.__name__,
                                "shortDescription": {"text": r.title},
                                "fullDescription": {"text": r.what},
                                "help": {"text": f"{r.why}\nUse instead: {r.use_instead}"},
                            }
                            for r in ALL_RULES
                        ],
                    }
                },
                "results": results,
            }
        ],
    }


def github_annotations(report: Report) -> str:
    kind = {"error": "error", "warning": "warning", "info": "notice"}
    lines = []
    for f in active(report.all_findings()):
        msg = f"{f.message} (fix: {f.fix})".replace("%", "%25").replace("\n", "%0A")
        lines.append(f"::{kind[f.severity]} file={f.file},line={f.line},title={f.rule}::{msg}")
    return "\n".join(lines) + ("\n" if lines else "")
