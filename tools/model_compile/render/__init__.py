"""Render reports: text for people, JSON for agents, Markdown for PRs, SARIF and
GitHub annotations for CI."""

from __future__ import annotations

import json

from model_compile.findings.models import Report
from model_compile.render.sarif import github_annotations, sarif
from model_compile.render.text import inspect_text, report_markdown, report_text


def emit_report(report: Report, fmt: str, title: str = "model-compile") -> str:
    """A validate report in the requested format."""
    if fmt == "json":
        return report.model_dump_json(indent=2, by_alias=True) + "\n"
    if fmt == "markdown":
        return report_markdown(report, title)
    if fmt == "sarif":
        return json.dumps(sarif(report), indent=2) + "\n"
    if fmt == "github":
        return github_annotations(report)
    return report_text(report)


def emit_inspect(report: Report, fmt: str) -> str:
    """An inspect report: ledger and config facts."""
    if fmt == "json":
        return report.model_dump_json(indent=2, by_alias=True) + "\n"
    return inspect_text(report)
