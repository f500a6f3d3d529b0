"""Render a ReviewReport: Markdown (Jinja template), JSON, SARIF 2.1.0, GitHub annotations; write all to a folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jinja2

from model_compile.findings.models import Report
from model_compile.render.sarif import github_annotations, sarif
from model_compile.report.models import ReportFinding, ReviewReport
from model_compile.report.portable import portable
from model_compile.report.text import text
from model_compile.templating import environment

TEMPLATE = "report/review.md.j2"
FORMATS = ("markdown", "text", "json", "sarif", "github")
ICONS = {
    "ready": ":white_check_mark:",
    "needs changes": ":x:",
    "not validated": ":warning:",
    "nothing to review": ":information_source:",
    "passed": ":white_check_mark:",
    "failed": ":x:",
    "timeout": ":x:",
}
_BASELINE = {"new": "new", "existing": "unchanged"}


def _md(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _dur(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _sec(value: float | None) -> str:
    return "?" if value is None else f"{value} s"


def _short(call: str, limit: int = 60) -> str:
    call = " ".join(call.split())
    return call if len(call) <= limit else call[: limit - 1] + "…"


def _env(override: Path | None = None) -> jinja2.Environment:
    env = environment(override)
    env.filters.update(
        md=_md,
        dur=_dur,
        sec=_sec,
        short=_short,
        code=lambda s: f"`{s}`",
        icon=lambda s: ICONS.get(str(s), ":grey_question:" if str(s) != "none" else ""),
        errors=lambda fs: [f for f in fs if f.severity == "error" and not f.suppressed],
    )
    return env


def markdown(report: ReviewReport, override: Path | None = None) -> str:
    """The report as Markdown, rendered from templates/report/review.md.j2, every command relative to the
    repository root (it is read in a pull request, on another machine)."""
    text = _env(override).get_template(TEMPLATE).render(report=portable(report))
    lines = text.splitlines()
    out: list[str] = []
    for line in lines:  # collapse runs of blank lines the template's conditionals leave
        if line.strip() == "" and out and out[-1].strip() == "":
            continue
        out.append(line.rstrip())
    return "\n".join(out).strip() + "\n"


def _annotated(report: ReviewReport) -> list[ReportFinding]:
    findings = report.all_findings()
    if report.scope.kind == "change":
        findings = [f for f in findings if f.status == "new"]
    return findings


def sarif_log(report: ReviewReport) -> dict[str, Any]:
    """SARIF 2.1.0: stable rule ids, partial fingerprints, baseline state, suppressions."""
    findings = report.all_findings()
    log = sarif(Report(version=report.version, root=report.scope.path, findings=list(findings)))
    by_print = {f.fingerprint: f for f in findings}
    for result in log["runs"][0]["results"]:
        f = by_print.get((result.get("partialFingerprints") or {}).get("modelCompile/v1", ""))
        if f is None:
            continue
        if f.status in _BASELINE:
            result["baselineState"] = _BASELINE[f.status]
    properties = log["runs"][0].setdefault("properties", {})
    properties["verdict"] = f"{report.verdict}: {report.verdict_reason}"
    if report.scope.kind == "change":  # why each recipe is reviewed (e.g. its run imports a changed file)
        properties["scope"] = {name: list(reasons) for name, reasons in report.scope.reasons.items()}
    return log


def github(report: ReviewReport) -> str:
    """Workflow annotations for the findings (new ones when reviewing a change), plus a verdict notice."""
    findings = [f for f in _annotated(report) if not f.suppressed]
    text = github_annotations(Report(version=report.version, root=report.scope.path, findings=list(findings)))
    kind = {"ready": "notice", "not validated": "warning", "needs changes": "error", "nothing to review": "notice"}[
        report.verdict
    ]
    title = f"model-compile review: {report.verdict}"
    msg = report.verdict_reason.replace("%", "%25").replace("\r", "").replace("\n", "%0A")
    return text + f"::{kind} title={title}::{msg}\n"


def emit(report: ReviewReport, fmt: str) -> str:
    """The report in one format, as printed on stdout."""
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif_log(report), indent=2) + "\n"
    if fmt == "text":
        return text(report)
    if fmt == "github":
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        md = markdown(report)
        if summary:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(md)
            return github(report)
        return github(report) + "\n" + md
    return markdown(report)


def write_all(report: ReviewReport, out: Path) -> list[Path]:
    """report.md, report.txt, report.json, report.sarif, annotations.txt (+ trace-<recipe>.json when traced) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "report.md": markdown(report),
        "report.txt": text(report),
        "report.json": report.model_dump_json(indent=2) + "\n",
        "report.sarif": json.dumps(sarif_log(report), indent=2) + "\n",
        "annotations.txt": github(report),
    }
    for r in report.recipes:
        trace = (r.hard or {}).get("trace")
        if trace:
            files[f"trace-{r.name}.json"] = json.dumps(trace, indent=2) + "\n"
    written = []
    for name, body in files.items():
        path = out / name
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written
