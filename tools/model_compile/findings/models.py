"""Findings and the report: the JSON contract every command emits."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, Field

from model_compile.ledger.models import CompilePath, Documentation, Ledger

Severity = Literal["error", "warning", "info"]

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


class FieldFact(BaseModel):
    """One `model.compile.<field>` as the schema declares it."""

    present: bool = False
    annotation: str | None = None
    default: Any = None
    default_text: str | None = None
    allowed: list[Any] | None = Field(
        default=None, description="Literal values, when the annotation is a Literal"
    )
    line: int | None = None


class SchemaFacts(BaseModel):
    """What `configs/schema.py` says about `model.compile`."""

    file: str | None = None
    root_class: str | None = None
    model_class: str | None = None
    compile_class: str | None = None
    compile_field_line: int | None = None
    fields: dict[str, FieldFact] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


class StageFacts(BaseModel):
    """The `model.compile` block of one stage YAML."""

    file: str
    name: str
    has_compile: bool = False
    values: dict[str, Any] = Field(default_factory=dict)
    lines: dict[str, int] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


class ConfigFacts(BaseModel):
    """Schema defaults plus every stage YAML."""

    schema_: SchemaFacts = Field(default_factory=SchemaFacts, alias="schema")
    stages: list[StageFacts] = Field(default_factory=list)

    model_config = {"populate_by_name": True}


class RecipeReport(BaseModel):
    """Everything the tools know about one recipe."""

    name: str
    path: str = Field(description="recipe folder relative to the analysed PATH")
    compile_path: CompilePath = "none"
    compiled_target: list[str] = Field(default_factory=list)
    placement: str = Field(default="", description="one line: where compile sits among the steps")
    ledger: list[Ledger] = Field(default_factory=list)
    config: ConfigFacts = Field(default_factory=ConfigFacts)
    documentation: list[Documentation] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]


class KitFacts(BaseModel):
    """Where the repository's model kit defines `apply_model_compile`."""

    file: str
    line: int
    class_name: str
    in_place: bool = Field(description="compiles with module.compile() (keys unchanged)")
    disables: list[str] = Field(default_factory=list, description="regions it wraps in compiler.disable")


class Report(BaseModel):
    """Top-level JSON object of `inspect` and `validate --soft`."""

    tool: str = "model-compile"
    version: str
    root: str = Field(description="the analysed PATH as given")
    kit: list[KitFacts] = Field(default_factory=list)
    recipes: list[RecipeReport] = Field(default_factory=list)
    findings: list[Finding] = Field(
        default_factory=list, description="findings outside any recipe (the shared kit)"
    )

    def all_findings(self) -> list[Finding]:
        out = list(self.findings)
        for r in self.recipes:
            out.extend(r.findings)
        return out

    @property
    def exit_code(self) -> int:
        """0: no error-severity finding; 1: at least one."""
        return 1 if any(f.severity == "error" for f in self.all_findings()) else 0
