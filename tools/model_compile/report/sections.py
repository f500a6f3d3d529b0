"""The four per-recipe sections: compile path, placement, validation, performance."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from model_compile.findings.models import RecipeReport
from model_compile.recipe_tests import DEFAULT_RECOMPILE_BUDGET, DEST, GRAPH_BREAK_BUDGETS
from model_compile.report.hardfacts import HardFacts
from model_compile.report.mermaid import flowchart
from model_compile.report.models import (
    CompilePathSection,
    LayerRow,
    Measure,
    PerformanceSection,
    PlacementSection,
    Stage,
)
from model_compile.review.models import RecipeDiff
from model_compile.rules.finding import Finding

# Rules whose finding means a stage sits in the wrong place (drawn red).
PLACEMENT_RULES = {"MC301", "MC401", "MC402", "MC403", "MC404", "MC405", "MC408"}


def compile_path_section(recipe: RecipeReport) -> CompilePathSection:
    """Question 1: kit or which fallback, and the documented reason."""
    path = recipe.compile_path
    documented = [
        f"{d.kind} ({d.source} {d.file}:{d.line}): {d.reason}"
        for d in recipe.documentation
        if d.source == "comment" or path == f"fallback:{d.kind}"
    ]
    if path == "kit":
        summary = "kit: the model kit's apply_model_compile (in-place compile; the kit's own graph-break regions)"
    elif path.startswith("fallback:"):
        kind = path.split(":", 1)[1]
        reason = next((d.reason for d in recipe.documentation if d.kind == kind), "")
        summary = f"fallback ({kind}), recipe-local compile" + (f"; documented reason: {reason}" if reason else "")
    elif path == "direct":
        summary = "direct: recipe-local compile outside the kit with no documented fallback kind (MC101)"
    else:
        summary = "none: the recipe does not compile (add it with `model-compile generate RECIPE --path kit --write`)"
    return CompilePathSection(path=path, summary=summary, documented=documented)


def placement_section(recipe: RecipeReport, findings: Sequence[Finding]) -> PlacementSection:
    """Question 2: target(s), the stage ledger (list and Mermaid), misplacements."""
    bad = [f for f in findings if f.rule in PLACEMENT_RULES and f.severity == "error"]
    bad_lines = {(f.file, f.line) for f in bad}
    stages: list[Stage] = []
    for ledger in recipe.ledger:
        for e in ledger.events:
            if e.kind == "return" or (not e.reachable and e.kind != "compile"):
                continue
            stages.append(
                Stage(
                    kind=e.kind,
                    call=e.call,
                    file=e.file,
                    line=e.line,
                    condition=list(e.condition),
                    target=e.target,
                    engine=ledger.engine_class,
                    misplaced=(e.file, e.line) in bad_lines
                    or (e.anchor_line is not None and (e.file, e.anchor_line) in bad_lines),
                )
            )
    if bad and not any(s.misplaced for s in stages):  # a finding on a line no stage sits on: blame the compile
        for s in stages:
            if s.kind == "compile":
                s.misplaced = True
    return PlacementSection(
        targets=list(recipe.compiled_target),
        summary=recipe.placement,
        stages=stages,
        misplaced=[f"{f.rule} {f.file}:{f.line}: {f.message}" for f in bad],
        mermaid=flowchart(stages) if any(s.kind == "compile" for s in stages) else "",
    )


def read_budgets(recipe_dir: Path | None) -> tuple[int | None, int | None, str]:
    """GRAPH_BREAK_BUDGET / RECOMPILE_BUDGET from the recipe's skill asserts, read statically (only when a
    check of the file reads them; otherwise no budget, and the source says why)."""
    if recipe_dir is None:
        return None, None, ""
    path = recipe_dir / DEST / "asserts.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None, None, ""
    # a file of asserts without budget constants: the defaults below apply, and the source says so
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("GRAPH_BREAK_BUDGET", "RECOMPILE_BUDGET") and isinstance(
                node.value, ast.Constant
            ):
                values[node.targets[0].id] = node.value.value
    if not values:
        return None, None, ""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if not used & set(values):  # set, but no check of the file reads them
        return None, None, f"{DEST}/asserts.py sets {' and '.join(sorted(values))} but no check of it reads them"
    gb, rc = values.get("GRAPH_BREAK_BUDGET"), values.get("RECOMPILE_BUDGET")
    # the generated asserts hand the record to model_compile.runtime's violations(), which counts a limit hit
    source = f"{DEST}/asserts.py" + (
        " (it also fails on any recompile-limit hit)" if "violations(" in ast.unparse(tree) else ""
    )
    return (gb if isinstance(gb, int) else None), (rc if isinstance(rc, int) else None), source


def performance_section(
    recipe: RecipeReport, recipe_dir: Path | None, hard: HardFacts | None, rows: list[LayerRow]
) -> PerformanceSection:
    """Question 4: what was measured against which budgets, what is left, and advice from the numbers."""
    gb_budget, rc_budget, source = read_budgets(recipe_dir)
    rt = hard.runtime if hard else {}
    info = rt.get("compile") or {}
    if gb_budget is None and isinstance(info.get("graph_break_budget"), int):
        gb_budget, source = info["graph_break_budget"], "the smoke run's asserts"
    if rc_budget is None and isinstance(info.get("recompile_budget"), int):
        rc_budget = info["recompile_budget"]
    enforced = gb_budget is not None or rc_budget is not None
    if not enforced and recipe.compile_path != "none":
        # Nothing of the recipe's checks a budget: say so, and give the reference for this path (measured, headroom).
        gb_budget = GRAPH_BREAK_BUDGETS.get(recipe.compile_path, 40)
        rc_budget = DEFAULT_RECOMPILE_BUDGET
        has_asserts = recipe_dir is not None and (recipe_dir / DEST / "asserts.py").is_file()
        source = source or (
            f"{DEST}/asserts.py sets no GRAPH_BREAK_BUDGET or RECOMPILE_BUDGET"
            if has_asserts
            else f"the recipe has no {DEST}/asserts.py"
        )
    perf = PerformanceSection(
        graph_breaks=Measure(budget=gb_budget, budget_source=source, enforced=enforced),
        recompiles=Measure(budget=rc_budget, budget_source=source, enforced=enforced),
    )
    if recipe.compile_path == "none":
        perf.unvalidated.append("nothing to measure: the recipe does not compile")
        return perf
    if rt:
        timing = rt.get("timing") or {}
        breaks = rt.get("graph_breaks") or {}
        rec = rt.get("recompiles") or {}
        lim = rt.get("recompile_limit") or {}
        perf.measured = True
        perf.where = rt.get("label") or (hard.where if hard else None)
        perf.first_step_s = timing.get("first_step_s")
        perf.steady_state_s = timing.get("steady_state_s")
        perf.first_over_steady = timing.get("first_over_steady")
        perf.graph_breaks.value = breaks.get("total")
        perf.graph_breaks.top = [
            f"{n}x {r}" for r, n in sorted((breaks.get("by_reason") or {}).items(), key=lambda kv: -kv[1])[:3]
        ]
        perf.recompiles.value = rec.get("count")
        perf.recompiles.top = [_recompile(r) for r in (rec.get("reasons") or [])[:2]]
        perf.recompile_limit = lim.get("limit")
        perf.recompile_limit_hit = lim.get("hit")
        perf.orig_mod_keys = rt.get("orig_mod_key_count")
        perf.compiled_modules = rt.get("compiled_module_count")
    rehearsal = (hard.raw.get("rehearsal") if hard else None) or None
    if rehearsal:
        from model_compile.hard.models import RehearsalFacts
        from model_compile.hard.rehearsal.render import summary_lines

        perf.rehearsal = summary_lines(RehearsalFacts.model_validate(rehearsal))
    perf.unvalidated = _unvalidated(perf, hard, rows)
    perf.advice = _advice(perf, recipe, hard, rows)
    return perf


def _recompile(entry: dict[str, Any]) -> str:
    """'function: first line of the failed guard', whitespace collapsed."""
    reason = str(entry.get("reason") or "").strip().splitlines()
    guard = " ".join(reason[0].split())[:160] if reason else ""
    return f"{entry.get('function', '?')}: {guard}"


def _unvalidated(perf: PerformanceSection, hard: HardFacts | None, rows: list[LayerRow]) -> list[str]:
    out: list[str] = []
    if hard is None:
        not_run = [r.name for r in rows if r.status == "not-run"]
        out.append(
            "soft review only: compile latency, graph breaks, recompiles and keys unmeasured"
            + (f"; not run: {', '.join(not_run)}" if not_run else "")
        )
        rows = [r for r in rows if r.status != "not-run"]
    elif hard.cpu_only:
        out.append("no accelerator: runtime results are CPU-only; compiled speed and GPU/NPU numerics not validated")
    if hard is not None and hard.torch_note:
        out.append(hard.torch_note)
    for row in rows:
        if (
            row.status in ("not-run", "missing", "skipped", "unavailable", "not-reached", "timeout", "tool-error")
            and row.name != "soft"
        ):
            out.append(f"{row.name}: {row.status}" + (f" ({row.reason})" if row.reason else ""))
    note = (hard.trace or {}).get("note") if hard is not None else None
    if note and str(note).startswith("--trace recorded nothing"):
        out.append(str(note))
    if hard is not None and not perf.measured:
        smoke = next((r for r in rows if r.name == "smoke"), None)
        if smoke is not None and smoke.started:
            out.append("no runtime record: the smoke run with compile on did not reach setup")
        elif smoke is not None:
            out.append(f"no runtime record: the smoke run with compile on was not started ({smoke.status})")
    return out


def _advice(perf: PerformanceSection, recipe: RecipeReport, hard: HardFacts | None, rows: list[LayerRow]) -> list[str]:
    out: list[str] = []
    if not perf.measured:
        smoke = next((r for r in rows if r.name == "smoke"), None)
        if smoke is not None and smoke.command and smoke.status != "missing":
            commands = " ; ".join(f"`{c}`" for c in smoke.commands) if smoke.commands else f"`{smoke.command}`"
            if smoke.command.startswith("on a machine"):  # the smoke's helper refuses CPU: that machine's command
                out.append(f"measure before claiming anything: run the smoke layer {smoke.command} {commands}")
            else:  # this machine's paths: the command runs here
                head = f"{smoke.command} " if smoke.commands else ""
                out.append(
                    f"measure before claiming anything: run the smoke layer (here: {head}{commands}); only a run "
                    "on an accelerator is runtime compile validation"
                )
        return out
    gb, rc = perf.graph_breaks, perf.recompiles
    if perf.recompile_limit_hit:
        out.append(
            "the recompile limit was hit, so those frames silently ran eager: pad or bucket input shapes, "
            "or compile regionally (per block) so guards stay stable"
        )
    if gb.value is not None and gb.budget is not None and gb.value > gb.budget:
        out.append(
            f"graph breaks {gb.value} exceed the budget {gb.budget}: look at the top reasons; "
            "wrap data-dependent code in a documented graph-break region or compile per block"
        )
    elif gb.value and gb.budget and gb.value * 2 > gb.budget:
        out.append(f"graph breaks {gb.value} use over half the budget {gb.budget}: watch them when the model changes")
    if rc.value is not None and rc.budget is not None and rc.value > rc.budget:
        out.append(f"recompiles {rc.value} exceed the budget {rc.budget}: see the first recompile reason")
    if perf.first_over_steady and perf.first_over_steady >= 20:
        out.append(
            f"the first step costs x{perf.first_over_steady} a steady step (compile latency): short jobs pay it every "
            "start; a warm TORCHINDUCTOR_CACHE_DIR or regional compile cuts it"
        )
    if perf.orig_mod_keys:
        out.append("'_orig_mod.' keys: checkpoints would not load into eager models; compile in place")
    if hard is not None and hard.cpu_only:
        out.append("CPU timings: no speedup is claimed; rerun the smoke layer on an accelerator to measure it")
    return out


NEUTRAL = "comments, blank lines or docstrings only"


def _shown(paths: list[str], limit: int = 3) -> str:
    return ", ".join(paths[:limit]) + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")


def neutral_lead(diff: RecipeDiff) -> str:
    paths = [f.path for f in diff.files] + [i.path for i in diff.imports]
    return f"no code change reaches it ({_shown(paths)}: {NEUTRAL}): nothing new to validate"


def imports_lead(diff: RecipeDiff) -> str:
    paths = [i.path for i in diff.imports if i.code_changed]
    return (
        f"soft review only: the change reaches it through code its run imports ({_shown(paths)}), which no static "
        "rule judges: the runtime layers do (add --hard)"
    )


def scope_reasons(d: RecipeDiff, kit_classes: list[str]) -> list[str]:
    """Why one recipe is in the scope of a change, in words."""
    out: list[str] = []
    if d.files:
        kinds = ", ".join(sorted({f.kind for f in d.files}))
        what = {"added": "added", "deleted": "deleted", "renamed": f"renamed from {d.old_name}"}.get(d.status)
        out.append(f"recipes/{d.name} {what}" if what else f"{len(d.files)} of its own file(s) changed ({kinds})")
    if d.status == "kit":
        out.append(f"its compile calls a kit class whose apply_model_compile changed ({', '.join(kit_classes)})")
    out.extend(i.reason for i in d.imports)
    if not d.code_changed:
        out.append(f"no code change reaches it: {NEUTRAL}")
    return out


def imports_as_run(diff: RecipeDiff | None, hard: Any) -> list[Any]:
    """The changed files the recipe's run imports (read statically), each with the rehearsal's record of it when
    its run counted the changed files: imported or not."""
    if diff is None:
        return []
    facts = getattr(hard, "rehearsal", None)
    record = getattr(facts, "changed_imported", None) or {}
    out = []
    for item in diff.imports:
        ran = record.get(item.path)
        if ran is None:
            out.append(item)
            continue
        said = "the rehearsal's run imported it" if ran else "the rehearsal's run did not import it"
        out.append(item.model_copy(update={"reason": f"{item.reason} ({said})"}))
    return out
