"""Soft validation of the recipe after writing, or of the planned files on a dry run."""

from __future__ import annotations

from pathlib import Path

from model_compile.analyze import review_recipe


def soft_validate(recipe: Path, planned: dict[Path, str] | None = None) -> dict:
    """Review the recipe; with `planned` (path -> new text), review what the edit would leave."""
    report = review_recipe(recipe, overlay=planned)
    findings = [
        {"rule": f.rule, "severity": f.severity, "file": f.file, "line": f.line, "message": f.message}
        for f in report.findings
    ]
    errors = sum(1 for f in findings if f["severity"] == "error")
    warnings = sum(1 for f in findings if f["severity"] == "warning")
    return {
        "available": True,
        "planned": planned is not None,
        "compile_path": report.compile_path,
        "errors": errors,
        "warnings": warnings,
        "summary": ("after this edit, " if planned is not None else "")
        + f"compile path {report.compile_path}: {errors} error(s), {warnings} warning(s)",
        "findings": findings,
    }
