"""The review as a pull request shows it: every command relative to the repository root.

A Markdown comment or a GitHub step summary is read on another machine: the
paths of the reviewer's checkout (`cd /home/me/repo && ...`, `/home/me/repo/recipes/x`)
and of the interpreter that ran the review are no command there. The copy made
here names files from the repository root and the interpreter as `python`
(one inside the repository keeps its relative path, e.g. `.venv/bin/python`).
The text and JSON formats keep this machine's paths: they are read where they
were made.
"""

from __future__ import annotations

import re
from pathlib import Path

from model_compile.report.models import LayerRow, ReviewReport

# An absolute interpreter at the start of a command or after `&&`: `/opt/venv/bin/python3 -m pytest ...`.
_PYTHON = re.compile(r"(^|&&\s*|\s|`)(/[^\s`'\"]*/python[0-9.]*)(?=\s|$)")


def portable(report: ReviewReport) -> ReviewReport:
    """A copy of the report whose commands, paths and notes are relative to the repository root."""
    root = report.scope.root
    if not root:
        return report
    out = report.model_copy(deep=True)
    fix = _Relativize(root)
    out.scope.path = fix(out.scope.path)
    out.scope.notes = [fix(n) for n in out.scope.notes]
    out.notes = [fix(n) for n in out.notes]
    out.verdict_reason = fix(out.verdict_reason)
    for recipe in out.recipes:
        recipe.verdict_reason = fix(recipe.verdict_reason)
        recipe.validation = [_row(row, fix) for row in recipe.validation]
        # "here" meant the reviewer's machine; in a pull request the command runs from the repository root
        recipe.performance.advice = [
            fix(a).replace("(here: ", "(from the repository root: ") for a in recipe.performance.advice
        ]
        recipe.performance.unvalidated = [fix(u) for u in recipe.performance.unvalidated]
    return out


def _row(row: LayerRow, fix: _Relativize) -> LayerRow:
    row.command = fix(row.command) if row.command else row.command
    row.commands = [fix(c) for c in row.commands]
    row.reason = fix(row.reason) if row.reason else row.reason
    row.prerequisites = [fix(p) for p in row.prerequisites]
    return row


class _Relativize:
    """`cd <root> && X` -> `X`; `<root>/a/b` -> `a/b`; `<root>` -> `.`; an interpreter outside it -> `python`."""

    def __init__(self, root: str):
        self.roots = sorted({root.rstrip("/"), str(Path(root).resolve())}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for root in self.roots:
            text = re.sub(rf"(^|\s|`)cd {re.escape(root)} && ", r"\1", text)
            text = re.sub(rf"{re.escape(root)}/", "", text)
            text = re.sub(rf"{re.escape(root)}(?=[\s`'\"),;:]|$)", ".", text)
        return _PYTHON.sub(lambda m: f"{m.group(1)}python", text)
