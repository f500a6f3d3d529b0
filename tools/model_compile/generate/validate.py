"""Soft validation of the recipe after writing (the lead's static review)."""

from __future__ import annotations

from pathlib import Path


def soft_validate(recipe: Path) -> dict:
    try:
        from model_compile.api import review_recipe
    except ImportError:
        return {"available": False, "errors": 0, "summary": "not available in this build (model_compile.api missing)", "findings": []}
    report = review_recipe(recipe)
    findings = [
        {"rule": f.rule, "severity": f.severity, "file": f.file, "line": f.line, "message": f.message}
        for f in report.findings
    ]
    errors = sum(1 for f in findings if f["severity"] == "error")
    warnings = sum(1 for f in findings if f["severity"] == "warning")
    return {
        "available": True,
        "compile_path": report.compile_path,
        "errors": errors,
        "warnings": warnings,
        "summary": f"compile path {report.compile_path}: {errors} error(s), {warnings} warning(s)",
        "findings": findings,
    }
