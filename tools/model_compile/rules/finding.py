"""A finding: what a rule reports at a file and line."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, Field

from model_compile.vocabulary import Severity

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


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

    @property
    def fingerprint(self) -> str:
        """Identity that survives line shifts: rule, recipe, file and the code text."""
        key = "\0".join([self.rule, self.recipe or "", self.file, self.code or self.message])
        return hashlib.sha1(key.encode()).hexdigest()[:16]
