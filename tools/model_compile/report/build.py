"""Assemble a ReviewReport from the soft report, the diff report and hard-validation reports.

Pure: takes results, runs nothing. `report.run` decides what to run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_compile import __version__
from model_compile.findings.models import RecipeReport, Report
from model_compile.parse.models import config_key
from model_compile.report.hardfacts import HardFacts, planned_layers, read_hard
from model_compile.report.models import (
    FindingStatus,
    LayerRow,
    RecipeSection,
    ReportFinding,
    ReviewReport,
    Scope,
    Verdict,
)
from model_compile.report.sections import (
    compile_path_section,
    imports_as_run,
    imports_lead,
    neutral_lead,
    performance_section,
    placement_section,
    scope_reasons,
)
from model_compile.review.models import DiffReport, RecipeDiff
from model_compile.rules import finding_order
from model_compile.rules.base import kit_subject
from model_compile.rules.finding import Finding

NOT_FAILED_MISSING = ("not-run", "missing", "skipped", "unavailable", "not-reached", "tool-error")


def to_report_finding(f: Finding, status: FindingStatus | None = None) -> ReportFinding:
    """A Finding in the report's terms (suppression kept as the rule stage set it)."""
    return ReportFinding(**f.model_dump(), status=status)


def _sorted(findings: list[ReportFinding]) -> list[ReportFinding]:
    order = {"new": 0, "existing": 1, None: 1, "fixed": 2, "superseded": 2}
    return sorted(findings, key=lambda f: (order.get(f.status, 1), *finding_order(f)))


def soft_row(recipe_dir: Path, errors: int, seconds: float | None, kit_errors: int = 0, kits: str = "") -> LayerRow:
    """The soft layer as it ran in this review (static, in-process); the errors of the kit it calls count."""
    reason = None
    if errors and kit_errors:
        reason = f"{errors + kit_errors} error finding(s), {kit_errors} of them in the kit it calls ({kits})"
    elif kit_errors:
        reason = f"{kit_errors} error finding(s) in the kit it calls ({kits})"
    elif errors:
        reason = f"{errors} error finding(s)"
    return LayerRow(
        name="soft",
        status="failed" if errors or kit_errors else "passed",
        where="static",
        duration_s=round(seconds, 3) if seconds is not None else None,
        command=f"model-compile validate --soft {recipe_dir}",
        reason=reason,
    )


FLAT_ON = f"{config_key('flat', 'enabled')}=true"
SECTION_ON = f"{config_key('section', 'enabled')}=true"


def _in_form(row: LayerRow, form: str | None) -> LayerRow:
    """A planned command's compile switch as the recipe's config spells it: `model.compile=true` in the older flat
    form (hard/ plans `model.compile.enabled=true`, which a bool `compile` does not take)."""
    if form == "flat":
        row.command = row.command.replace(SECTION_ON, FLAT_ON) if row.command else row.command
        row.commands = [c.replace(SECTION_ON, FLAT_ON) for c in row.commands]
    return row


def kit_findings_of(kits: list[str], findings: list[ReportFinding]) -> list[ReportFinding]:
    """The shared kit's findings on the classes a recipe's compile calls (every kit's when one is unknown, `?`)."""
    if not kits:
        return []
    prefixes = tuple(kit_subject(k) for k in kits if k != "?")
    return [f for f in findings if f.recipe is None and ("?" in kits or f.subject.startswith(prefixes))]


def _errors(findings: list[ReportFinding]) -> list[ReportFinding]:
    return [f for f in findings if f.severity == "error" and not f.suppressed and f.status != "fixed"]


def _verdict(
    recipe: RecipeReport,
    findings: list[ReportFinding],
    rows: list[LayerRow],
    hard: HardFacts | None,
    hard_note: str,
    diff: RecipeDiff | None = None,
) -> tuple[Verdict, str]:
    errors = _errors(findings)
    neutral = diff is not None and not diff.code_changed
    existing = ""
    if errors and neutral and not any(f.status == "new" for f in errors):
        # a change that reaches no code brings nothing new: its existing errors are the tree's, not the change's
        first = errors[0]
        existing = (
            f"; {len(errors)} existing error finding(s), not introduced by this change "
            f"(first {first.rule} at {first.file}:{first.line})"
        )
        errors = []
    introduced_first = [
        r for r in rows if r.status in ("failed", "timeout") and r.existing is not True and r.name != "soft"
    ]
    if errors and diff is not None and introduced_first and not any(f.status == "new" for f in errors):
        # the change's own failure leads; the error findings the base already has follow, said as such
        r, first = introduced_first[0], errors[0]
        return "needs changes", (
            f"layer {r.name} {r.status}" + (f": {r.reason}" if r.reason else "") + f"; also {len(errors)} existing "
            f"error finding(s), not introduced by this change (first {first.rule} at {first.file}:{first.line})"
        )
    if errors:
        new = [f for f in errors if f.status == "new"]
        first = (new or errors)[0]
        what = f"{len(new)} new error finding(s)" if new else f"{len(errors)} error finding(s)"
        if new and len(errors) > len(new):
            what += f" (+{len(errors) - len(new)} existing)"
        elif not new and first.status == "existing":
            what += " (existing, not introduced by this change)"
        kit = sum(1 for f in errors if f.recipe is None)
        if kit:
            what += f" ({'all' if kit == len(errors) else kit} in the kit it calls: {', '.join(recipe.kits)})"
        message = first.message if len(first.message) <= 140 else first.message[:139] + "…"
        return "needs changes", f"{what}, first {first.rule} at {first.file}:{first.line}: {message}"
    # the soft layer's existing errors of a change that reaches no code are said once, below
    failed = [r for r in rows if r.status in ("failed", "timeout") and not (existing and r.name == "soft")]
    introduced = [r for r in failed if r.existing is not True]
    if introduced:
        r = introduced[0]
        return "needs changes", f"layer {r.name} {r.status}" + (f": {r.reason}" if r.reason else "")
    lead = _unvalidated(recipe, rows, hard, hard_note)
    if diff is not None and hard is None and not hard_note and recipe.compile_path != "none":
        if neutral:
            lead = neutral_lead(diff)
        elif diff.status == "imports":
            lead = imports_lead(diff)
    if lead and existing:
        lead += existing
    if failed:  # every failure is existing (on the change's base too, or with compile off): nothing is validated
        r = failed[0]
        # the reason says why it is existing ("existing: it failed on the base ..." / "not caused by compile: ...")
        old = f"layer {r.name} {r.status}" + (f": {r.reason}" if r.reason else " (existing)")
        # what the change itself still lacks leads; a failure it did not cause comes after
        return "not validated", f"{lead}; also {old}" if lead else old
    if lead:
        return "not validated", lead
    assert hard is not None  # _unvalidated has a reason whenever the runtime layers did not run
    return "ready", f"no error finding; every layer passed on {hard.where}"


def _unvalidated(recipe: RecipeReport, rows: list[LayerRow], hard: HardFacts | None, hard_note: str) -> str | None:
    """Why the change is not validated, short of a failure: no compile, no runtime layers, a gap, CPU only."""
    if recipe.compile_path == "none":
        return "the recipe does not compile: nothing to validate (MC100 lists it as a target)"
    if hard is None:
        return hard_note or "soft review only: the runtime layers did not run (add --hard)"
    gaps = [r for r in rows if r.status in NOT_FAILED_MISSING]
    if gaps:
        r = gaps[0]
        more = f" (also not validated: {', '.join(f'{g.name} {g.status}' for g in gaps[1:])})" if len(gaps) > 1 else ""
        return f"{r.name} {r.status}" + (f": {r.reason}" if r.reason else "") + more
    if hard.cpu_only:  # CPU results are never reported as runtime compile validation
        return (
            "no error finding and every layer passed, but on CPU only: runtime compile validation needs an "
            "accelerator (run the smoke command there)"
        )
    return None


def touched_stages(d: RecipeDiff) -> list[str]:
    """The stage configs (`configs/<stage>.yaml`) among a recipe's changed files: each gets a smoke command."""
    out = []
    for f in d.files:
        p = Path(f.path)
        if p.parent.name == "configs" and p.suffix in (".yaml", ".yml") and f.change != "deleted":
            out.append(p.stem)
    return out


def recipe_section(
    recipe: RecipeReport,
    recipe_dir: Path | None,
    findings: list[ReportFinding],
    hard: Any = None,
    soft_seconds: float | None = None,
    hard_note: str = "",
    diff: RecipeDiff | None = None,
    kit_findings: list[ReportFinding] | None = None,
    merged: tuple[str, set[str]] | None = None,
) -> RecipeSection:
    """One recipe's four answers, findings (and those of the kit it calls) and verdict."""
    kit_findings = kit_findings or []
    facts = read_hard(hard, recipe_dir, recipe.compile_path) if hard is not None else None
    if facts is not None:
        rows = facts.layers
    else:
        errors = len(_errors(findings))
        kit_errors = len(_errors(kit_findings))
        rows = [soft_row(recipe_dir or Path(recipe.path), errors, soft_seconds, kit_errors, ", ".join(recipe.kits))]
        every = _errors(findings + kit_findings)
        if diff is not None and every and not any(f.status == "new" for f in every):
            rows[0].existing = True  # its errors are all on the base too: the soft layer fails there as well
        if recipe_dir is not None and recipe.compile_path != "none":
            stages = touched_stages(diff) if diff is not None else None
            for row in planned_layers(recipe_dir, recipe.compile_path, stages=stages, merged=merged, facts=recipe):
                if row.status == "not-run" and row.reason is None:
                    row.reason = hard_note or "soft review only (add --hard)"
                rows.append(_in_form(row, recipe.config.form))
    placement = placement_section(recipe, findings)
    if diff is not None:
        placement.before = _side(diff.before)
        placement.after = _side(diff.after)
        placement.changes = list(diff.ledger_changes) + [
            f"config {c.where} {c.field}: {c.before!r} -> {c.after!r}" for c in diff.config_changes
        ]
    verdict, reason = _verdict(recipe, _sorted(findings + kit_findings), rows, facts, hard_note, diff)
    raw = None
    if facts is not None:
        raw = dict(facts.raw)
        raw["layers"] = [{k: v for k, v in layer.items() if k != "output_tail"} for layer in raw.get("layers", [])]
    return RecipeSection(
        name=recipe.name,
        path=recipe.path,
        change=diff.status if diff is not None else None,
        imports=imports_as_run(diff, hard),
        changed_lines=dict(diff.changed_lines) if diff is not None else {},
        code_changed=diff.code_changed if diff is not None else None,
        both_sides=diff.both_sides if diff is not None else False,
        conflicts=list(diff.conflicts) if diff is not None else [],
        verdict=verdict,
        verdict_reason=reason,
        compile_path=compile_path_section(recipe),
        placement=placement,
        validation=rows,
        performance=performance_section(recipe, recipe_dir, facts, rows),
        findings=_sorted(findings),
        kit_findings=_sorted(kit_findings),
        kits=list(recipe.kits),
        hard=raw,
    )


def _side(side: Any) -> str | None:
    if side is None:
        return None
    return f"{side.compile_path}" + (f"; {side.placement}" if side.placement else "")


def _overall(report: ReviewReport) -> None:
    kit_errors = _errors(report.findings)
    needs = [r for r in report.recipes if r.verdict == "needs changes"]
    compiling = [r for r in report.recipes if r.compile_path.path != "none" or r.verdict == "needs changes"]
    if kit_errors:
        f = kit_errors[0]
        report.verdict, report.verdict_reason = (
            "needs changes",
            f"the shared kit: {f.rule} at {f.file}:{f.line}: {f.message}",
        )
    elif needs:
        names = ", ".join(r.name for r in needs)
        report.verdict, report.verdict_reason = "needs changes", f"{names}: {needs[0].verdict_reason}"
    elif not report.recipes:  # a green verdict needs something reviewed
        report.verdict = "nothing to review"
        if report.scope.kind == "change":
            report.verdict_reason = (
                "the change touches no recipe, no Python file a recipe's run imports, and not the kit's compile "
                "(give a recipe folder to review it whole)"
            )
        else:
            report.verdict_reason = f"no recipe under {report.scope.path}"
    elif not compiling:
        report.verdict, report.verdict_reason = "not validated", "no recipe in scope compiles: nothing to validate"
    else:
        gaps = [r for r in compiling if r.verdict != "ready"]
        if gaps:
            report.verdict = "not validated"
            report.verdict_reason = f"{gaps[0].name}: {gaps[0].verdict_reason}" + (
                f" (also not validated: {', '.join(g.name for g in gaps[1:])})" if len(gaps) > 1 else ""
            )
        else:
            report.verdict, report.verdict_reason = "ready", compiling[0].verdict_reason
    introduced = [f for f in report.all_findings() if f.severity == "error" and not f.suppressed]
    if report.scope.kind == "change":
        introduced = [f for f in introduced if f.status == "new"]
    layer_failed = any(
        row.status in ("failed", "timeout") and row.name != "soft" and row.existing is not True
        for r in report.recipes
        for row in r.validation
    )
    report.exit_code = 1 if introduced or layer_failed else 0
    report.validation = _validation_line(report)


def _validation_line(report: ReviewReport) -> str:
    """What validation this review did, in one line (the report's 'Validation:' bullet)."""
    if not report.hard:
        return "soft (static) only; runtime layers need `--hard`"
    ran = [r.name for r in report.recipes if r.hard is not None]
    if ran:
        return f"soft (static) and hard (runtime layers) for {', '.join(ran)}"
    if not report.recipes:
        return "soft (static); `--hard`: no recipe in scope, so no runtime layer ran"
    return "soft (static); `--hard`: no runtime layer ran (no recipe in scope compiles, or hard validation was refused)"


def _change_scope(diff: DiffReport, path: str, recipes: list[str], notes: list[str]) -> Scope:
    """The scope of a change review: the diff's base and head, kit changes and changed-file count."""
    return Scope(
        kind="change",
        path=path,
        base=_rev(diff.base),
        head=_rev(diff.head),
        kit_changed=diff.kit_changed,
        kit_classes=list(diff.kit_classes),
        kit_changes=list(diff.kit_changes),
        changed_files=len(diff.shared_files) + sum(len(d.files) for d in diff.recipes),
        recipes=recipes,
        reasons={d.name: scope_reasons(d, diff.kit_classes) for d in diff.recipes if d.name in recipes},
        notes=notes,
    )


def as_untouched(report: ReviewReport, diff: DiffReport, path: str, note: str) -> ReviewReport:
    """A whole-tree report of a recipe given explicitly, set in the change that does not touch it:
    the change's base and head, every finding `existing`, the recipe marked `untouched`."""
    report.scope = _change_scope(diff, path, list(report.scope.recipes), [*diff.notes, note, *report.scope.notes])
    for f in report.all_findings():
        f.status = "existing"
    for r in report.recipes:
        r.change = "untouched"
    _overall(report)
    return report


def build_tree(
    soft: Report,
    path: Path,
    hard: dict[str, Any] | None = None,
    soft_seconds: float | None = None,
    hard_notes: dict[str, str] | None = None,
    notes: list[str] | None = None,
    hard_requested: bool = False,
) -> ReviewReport:
    """Whole-tree review: every recipe under PATH."""
    hard = hard or {}
    hard_notes = hard_notes or {}
    report = ReviewReport(
        version=__version__,
        verdict="not validated",
        verdict_reason="",
        scope=Scope(kind="tree", path=str(path), recipes=[r.name for r in soft.recipes], notes=list(notes or [])),
        hard=hard_requested or bool(hard) or bool(hard_notes),
        findings=[to_report_finding(f) for f in soft.findings],
    )
    for recipe in soft.recipes:
        recipe_dir = (path / recipe.path) if recipe.path != "." else path
        report.recipes.append(
            recipe_section(
                recipe,
                recipe_dir,
                [to_report_finding(f) for f in recipe.findings],
                hard.get(recipe.name),
                soft_seconds,
                hard_notes.get(recipe.name, ""),
                kit_findings=kit_findings_of(recipe.kits, report.findings),
            )
        )
    _overall(report)
    return report


def build_change(
    diff: DiffReport,
    head: Report | None,
    repo_root: Path,
    path: str,
    hard: dict[str, Any] | None = None,
    soft_seconds: float | None = None,
    hard_notes: dict[str, str] | None = None,
    only: set[str] | None = None,
    hard_requested: bool = False,
) -> ReviewReport:
    """Change review: the recipes the diff touches, new vs existing findings, before -> after wiring."""
    hard = hard or {}
    hard_notes = hard_notes or {}
    diffs = [d for d in diff.recipes if only is None or d.name in only]
    scope = _change_scope(diff, path, [d.name for d in diffs], list(diff.notes))
    current = [to_report_finding(f, "new") for f in diff.new] + [
        to_report_finding(f, "existing") for f in diff.unchanged
    ]
    report = ReviewReport(
        version=__version__,
        verdict="not validated",
        verdict_reason="",
        scope=scope,
        hard=hard_requested or bool(hard) or bool(hard_notes),
        findings=_sorted([f for f in current if f.recipe is None]),
        fixed=_sorted([to_report_finding(f, "fixed") for f in diff.fixed if only is None or f.recipe in only]),
        superseded=_sorted(
            [to_report_finding(f, "superseded") for f in diff.superseded if only is None or f.recipe in only]
        ),
    )
    heads = {r.name: r for r in (head.recipes if head else [])}
    for d in diffs:
        recipe = heads.get(d.name)
        if recipe is None:  # deleted at head: nothing to review but the note
            report.notes.append(f"recipe {d.name}: {d.status} (not present at head)")
            continue
        findings = [f for f in current if f.recipe == d.name]
        report.recipes.append(
            recipe_section(
                recipe,
                repo_root / recipe.path,
                findings,
                hard.get(d.name),
                soft_seconds,
                hard_notes.get(d.name, ""),
                diff=d,
                kit_findings=kit_findings_of(recipe.kits, report.findings),
                merged=(diff.merge.target, set(diff.merged_files)) if diff.merge is not None else None,
            )
        )
    _overall(report)
    return report


def _rev(r: Any) -> str:
    commit = getattr(r, "commit", None)
    return r.rev if not commit or r.rev.startswith(commit[:7]) else f"{r.rev} ({commit[:12]})"
