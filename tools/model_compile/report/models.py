"""The review report: one JSON contract behind `model-compile review` (Markdown, SARIF, GitHub views).

Per recipe it answers the four questions a reviewer asks: (1) compile path,
(2) compiled target and placement, (3) validation done and where, (4)
performance and runtime gaps; then the findings. One verdict line sits on
top: ready / needs changes / not validated (and why).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from model_compile.review.models import ImportedChange
from model_compile.rules.finding import Finding

Verdict = Literal["ready", "needs changes", "not validated", "nothing to review"]
FindingStatus = Literal["new", "existing", "fixed", "superseded"]
# Layer status as the report shows it: the hard runner's statuses plus "not reached" (a layer after a
# failure) and "not run" (no --hard, or no compile to validate).
LayerStatus = Literal[
    "passed", "failed", "timeout", "missing", "not-run", "unavailable", "skipped", "not-reached", "tool-error"
]


class Scope(BaseModel):
    """What was reviewed: a change (base .. head) or the whole tree under PATH."""

    kind: Literal["change", "tree"]
    path: str = Field(description="PATH as given")
    root: str | None = Field(
        default=None, description="the repository root (the folder holding recipes/): Markdown names paths from it"
    )
    base: str | None = Field(default=None, description="change: base revision (and commit)")
    head: str | None = Field(default=None, description="change: head revision ('working tree' for uncommitted files)")
    kit_changed: bool = Field(
        default=False,
        description="change: a kit class's apply_model_compile changed (the recipes that call that class are in scope)",
    )
    kit_classes: list[str] = Field(default_factory=list, description="change: the kit classes whose compile changed")
    kit_changes: list[str] = Field(default_factory=list, description="change: what changed in apply_model_compile")
    changed_files: int = Field(default=0, description="change: number of changed files")
    recipes: list[str] = Field(default_factory=list, description="recipes in scope")
    reasons: dict[str, list[str]] = Field(
        default_factory=dict,
        description="change: why each recipe is in scope, in words (its files changed; its compile calls a kit "
        "class whose apply_model_compile changed; `<file> is imported by recipes/<name> through <import path>`)",
    )
    notes: list[str] = Field(default_factory=list)


class CompilePathSection(BaseModel):
    """Question 1: kit, or which fallback and its documented reason."""

    path: str = Field(description="kit, fallback:<kind>, direct or none")
    summary: str = Field(description="one sentence")
    documented: list[str] = Field(default_factory=list, description="'kind (comment|readme file:line): reason'")


class Stage(BaseModel):
    """One ledger event of prepare_model(), as the report lists and draws it."""

    kind: str
    call: str
    file: str
    line: int
    condition: list[str] = Field(default_factory=list)
    target: str | None = None
    engine: str = Field(default="", description="engine class whose prepare_model() this is")
    misplaced: bool = Field(default=False, description="a placement finding points at this stage")


class PlacementSection(BaseModel):
    """Question 2: compiled target(s) and where compile sits among the stages."""

    targets: list[str] = Field(default_factory=list)
    summary: str = Field(default="", description="one line: what runs before and after compile")
    stages: list[Stage] = Field(default_factory=list)
    misplaced: list[str] = Field(default_factory=list, description="placement findings, one line each")
    mermaid: str = Field(
        default="", description="Mermaid flowchart of the stages (compile highlighted, misplacement red)"
    )
    before: str | None = Field(default=None, description="change: compile path and placement before the change")
    after: str | None = Field(default=None, description="change: compile path and placement after the change")
    changes: list[str] = Field(default_factory=list, description="change: ledger and config changes in words")


class LayerRow(BaseModel):
    """Question 3: one validation layer."""

    name: str = Field(description="soft, structure, smoke, impact[:file]")
    status: LayerStatus
    where: str = Field(description="static, cpu-only, accelerator:<name>, or '-' when it did not run")
    duration_s: float | None = None
    command: str | None = Field(default=None, description="the exact command (for a layer not run: the one to run)")
    reason: str | None = None
    started: bool = Field(default=False, description="the layer ran (or was started) on this machine")
    commands: list[str] = Field(
        default_factory=list,
        description="smoke: one command per stage for a machine with GPUs/NPUs (when the layer did not run here)",
    )
    prerequisites: list[str] = Field(
        default_factory=list, description="what those commands need that this machine lacks (model, data paths)"
    )
    existing: bool | None = Field(
        default=None,
        description="a failed layer run on the change's base too: true when it fails there as well (not the change's)",
    )
    stopped_by: str | None = Field(default=None, description="the failed layer that made this one meaningless")


class Measure(BaseModel):
    """A measured count and its budget."""

    value: int | None = None
    budget: int | None = None
    budget_source: str = Field(default="", description="where the budget comes from")
    enforced: bool = Field(
        default=False,
        description="a check fails above the budget (the skill asserts' constants, or the smoke run's record); "
        "false: the budget is only the default `model-compile generate` writes for the compile path",
    )
    top: list[str] = Field(default_factory=list, description="top reasons, most frequent first")


class PerformanceSection(BaseModel):
    """Question 4: runtime costs measured (never assumed) and what remains unvalidated."""

    measured: bool = False
    where: str | None = Field(default=None, description="where the numbers come from (cpu-only / accelerator:<name>)")
    first_step_s: float | None = None
    steady_state_s: float | None = None
    first_over_steady: float | None = None
    graph_breaks: Measure = Field(default_factory=Measure)
    recompiles: Measure = Field(default_factory=Measure)
    recompile_limit: int | None = None
    recompile_limit_hit: bool | None = None
    orig_mod_keys: int | None = Field(default=None, description="'_orig_mod.' state_dict keys at runtime (keys check)")
    compiled_modules: int | None = None
    rehearsal: list[str] = Field(
        default_factory=list,
        description="the rehearsal's figures (tiny model of the recipe's architecture, eager twin vs compiled), one line each",
    )
    unvalidated: list[str] = Field(default_factory=list)
    advice: list[str] = Field(default_factory=list)


class ReportFinding(Finding):
    """A finding with its place in the review."""

    status: FindingStatus | None = Field(
        default=None, description="change: new, existing, fixed or superseded; tree: null"
    )
    superseded_by: str | None = Field(default=None, description="superseded: the rule of the finding that replaced it")


class RecipeSection(BaseModel):
    name: str
    path: str
    change: str | None = Field(
        default=None,
        description="change: added, modified, renamed, deleted, kit, imports (untouched itself: its run imports a "
        "changed Python file), or untouched (given explicitly, not touched by the change: reviewed whole)",
    )
    imports: list[ImportedChange] = Field(
        default_factory=list,
        description="change: the changed Python files outside its folder that its run imports, each with the import "
        "path (why it is in scope)",
    )
    changed_lines: dict[str, list[int]] = Field(
        default_factory=dict,
        description="change: every changed Python file its run imports (its own included) whose code changed -> "
        "head-side changed line numbers, sorted, paths repository-relative (what the rehearsal's `changed_lines` "
        "accounts for; comment/docstring-only and deleted files left out)",
    )
    code_changed: bool | None = Field(
        default=None,
        description="change: false when every change that reaches it is comments, blank lines or docstrings in "
        "Python files (nothing new to validate); null outside a change",
    )
    both_sides: bool = Field(default=False, description="change reviewed as a merge: the target changed it too")
    conflicts: list[str] = Field(default_factory=list, description="change reviewed as a merge: its conflicting files")
    verdict: Verdict
    verdict_reason: str
    compile_path: CompilePathSection
    placement: PlacementSection
    validation: list[LayerRow] = Field(default_factory=list)
    performance: PerformanceSection = Field(default_factory=PerformanceSection)
    findings: list[ReportFinding] = Field(default_factory=list)
    kit_findings: list[ReportFinding] = Field(
        default_factory=list,
        description="findings of the kit class its compile calls (listed once under `findings` of the report): they "
        "count in its soft layer, verdict and errors",
    )
    kits: list[str] = Field(default_factory=list, description="kit classes its compile calls")
    hard: dict[str, Any] | None = Field(default=None, description="the hard-validation report, when --hard ran")


class ReviewReport(BaseModel):
    """Top-level JSON object of `model-compile review`."""

    tool: str = "model-compile"
    version: str
    command: str = "review"
    verdict: Verdict
    verdict_reason: str
    scope: Scope
    hard: bool = Field(default=False, description="hard (runtime) validation was requested")
    validation: str = Field(default="", description="what validation this review did, in one line")
    recipes: list[RecipeSection] = Field(default_factory=list)
    findings: list[ReportFinding] = Field(default_factory=list, description="findings outside any recipe (the kit)")
    fixed: list[ReportFinding] = Field(default_factory=list, description="change: findings the change fixes")
    superseded: list[ReportFinding] = Field(
        default_factory=list,
        description="change: base findings that no longer apply because a stronger one replaced them (not fixed)",
    )
    notes: list[str] = Field(default_factory=list)
    exit_code: int = Field(default=0, description="1: the change introduces error findings, or a hard layer failed")

    def all_findings(self) -> list[ReportFinding]:
        """Every current finding (kit first, then per recipe); fixed ones excluded."""
        out = list(self.findings)
        for r in self.recipes:
            out.extend(r.findings)
        return out
