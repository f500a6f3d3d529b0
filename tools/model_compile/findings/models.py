"""Findings and the report: the JSON contract every command emits."""

from __future__ import annotations

from pydantic import BaseModel, Field

from model_compile.ledger.compiled_scope import CompiledScope
from model_compile.ledger.models import Ledger
from model_compile.ledger.repo import KitFacts
from model_compile.parse.models import ConfigFacts, Documentation
from model_compile.rules.finding import Finding, active
from model_compile.vocabulary import CompilePath


class RecipeReport(BaseModel):
    """Everything the tools know about one recipe."""

    name: str
    path: str = Field(description="recipe folder relative to the analysed PATH")
    compile_path: CompilePath = "none"
    compiled_target: list[str] = Field(default_factory=list)
    placement: str = Field(default="", description="one line: where compile sits among the steps")
    kits: list[str] = Field(
        default_factory=list,
        description="kit classes whose apply_model_compile its compile calls (`?`: a receiver whose class is not known)",
    )
    scope: CompiledScope = Field(
        default_factory=CompiledScope, description="what compile covers in module terms, and what stays eager"
    )
    ledger: list[Ledger] = Field(default_factory=list)
    config: ConfigFacts = Field(default_factory=ConfigFacts)
    documentation: list[Documentation] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        """Error findings not suppressed by an ignore comment."""
        return [f for f in active(self.findings) if f.severity == "error"]


class Report(BaseModel):
    """Top-level JSON object of `inspect` and `validate --soft`."""

    tool: str = "model-compile"
    version: str
    root: str = Field(description="the analysed PATH as given")
    kit: list[KitFacts] = Field(default_factory=list)
    recipes: list[RecipeReport] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list, description="findings outside any recipe (the shared kit)")

    def all_findings(self) -> list[Finding]:
        """Kit findings then every recipe's, suppressed ones included."""
        out = list(self.findings)
        for r in self.recipes:
            out.extend(r.findings)
        return out

    @property
    def exit_code(self) -> int:
        """0: no error-severity finding (suppressed ones do not count); 1: at least one."""
        return 1 if any(f.severity == "error" for f in active(self.all_findings())) else 0
