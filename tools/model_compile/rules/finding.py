"""A finding: what a rule reports at a file and line."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, Field

from model_compile.vocabulary import Severity

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class Suppressed(BaseModel):
    """Why a finding is not counted: an inline `# model-compile: ignore[...] - <reason>`."""

    kind: str = Field(default="inSource", description="SARIF suppression kind")
    justification: str = Field(description="the reason written after the rule ids")
    file: str
    line: int = Field(description="line of the ignore comment")


class Finding(BaseModel):
    """One rule violation (or note) at a file and line."""

    rule: str = Field(description="rule id, e.g. MC404")
    severity: Severity
    file: str = Field(description="path relative to the analysed PATH")
    line: int
    message: str
    fix: str = Field(description="how to fix it")
    recipe: str | None = None
    code: str = Field(default="", description="the source line the finding points at, stripped")
    subject: str = Field(
        default="",
        description="what the finding is about (a config field, a call, a stage), independent of its line and text",
    )
    suppressed: Suppressed | None = Field(
        default=None, description="set when an inline ignore comment suppresses it: kept in JSON/SARIF, not counted"
    )

    @property
    def fingerprint(self) -> str:
        """Identity that survives edits of the line and line shifts: rule, recipe, file and subject."""
        key = "\0".join([self.rule, self.recipe or "", self.file, self.subject or self.code or self.message])
        return hashlib.sha1(key.encode()).hexdigest()[:16]


def active(findings: list[Finding]) -> list[Finding]:
    """The findings that count (not suppressed inline)."""
    return [f for f in findings if f.suppressed is None]
