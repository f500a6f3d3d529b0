"""`review --format text`: the report compact enough for a terminal or an agent's answer.

Per recipe, about 25 lines at most: the verdict, compile path, target and placement (before -> after for a
change) one line each, one line per layer with where it ran, one line per finding (`file:line RULE message`,
new ones first), what the commands need, the commands to run, and the gaps. Everything else (the stage list,
the Mermaid chart, fixes) is in `--format markdown` / `json`.
"""

from __future__ import annotations

from model_compile.report.models import LayerRow, Measure, RecipeSection, ReportFinding, ReviewReport

MAX_FINDINGS = 6
MAX_GAPS = 3
MAX_IMPORTS = 3
# a passing rehearsal's lines: model and depth, wrap, backend, parity, keys, recompiles, graph breaks, sync, time
REHEARSAL_LINES = 12
WIDTH = 160
# findings, wiring, layers, measures, rehearsal lines and gaps: one line each, never cut where their point is
LONG = 800


CUT = " … (cut here; the whole line: --format markdown or json)"


def _clip(line: str, width: int) -> str:
    """`line` as it is, or cut at a word before `width` and saying so (never mid-word, unless one word is huge)."""
    if len(line) <= width:
        return line
    head = line[: width - len(CUT)]
    space = head.rfind(" ")
    if space > width // 2:  # a word boundary not too far back; else one very long word is cut
        head = head[:space]
    return head.rstrip(" ,;:") + CUT


def _cut(text: str, width: int = WIDTH) -> str:
    """One line: inner whitespace collapsed (the indent kept), clipped at `width`."""
    text = str(text)
    indent = text[: len(text) - len(text.lstrip())]
    return _clip(indent + " ".join(text.split()), width)


def _finding(f: ReportFinding) -> str:
    status = f"{f.status} " if f.status else ""
    quiet = " (suppressed)" if f.suppressed else ""
    return _cut(f"  {status}{f.severity} {f.file}:{f.line} {f.rule} {f.message}{quiet}", LONG)


def _layer(row: LayerRow, width: int) -> str:
    where = row.where if row.duration_s is None else f"{row.where} ({row.duration_s:.2f} s)"
    why = f"  {' '.join(row.reason.split())}" if row.reason else ""  # a passed layer's reason: what it skipped
    return _clip(f"    {row.name:<{width}}  {row.status:<11} {where}{why}", LONG)


def _commands(rows: list[LayerRow]) -> list[str]:
    out: list[str] = []
    for row in rows:
        if row.status == "passed" or row.name == "soft" or not row.command:
            continue
        if row.prerequisites:
            out.append(f"  {row.name} needs first (missing here):")
            out += [_cut(f"    - {item}", LONG) for item in row.prerequisites[:4]]
            if len(row.prerequisites) > 4:
                out.append(f"    (+{len(row.prerequisites) - 4} more)")
        if row.commands:
            out.append(f"  {row.name}: {row.command}")
            out.extend(f"    {c}" for c in row.commands)
        else:
            out.append(f"  {row.name}: {row.command}")
    return out


def _budget(m: Measure) -> str:
    if m.budget is None:
        return "no budget"
    return (
        f"budget {m.budget}"
        if m.enforced
        else f"no budget enforced; reference for this path (tiny-model measurements with headroom): at most {m.budget}"
    )


def _recipe(r: RecipeSection) -> list[str]:
    both = f"; changed on both sides, {len(r.conflicts)} file(s) conflict" if r.both_sides else ""
    change = f" ({r.change}{both})" if r.change else ""
    out = [f"== {r.name}{change}: {r.verdict.upper()} - {_cut(r.verdict_reason, LONG)}"]
    out += [_cut(f"  in scope: {i.reason}", LONG) for i in r.imports[:MAX_IMPORTS]]
    if len(r.imports) > MAX_IMPORTS:
        out.append(f"  in scope: (+{len(r.imports) - MAX_IMPORTS} more changed file(s) its run imports: --format json)")
    out.append(_cut(f"  path: {r.compile_path.path} - {r.compile_path.summary}", LONG))
    p = r.placement
    targets = ", ".join(p.targets) or "no compiled target"
    out.append(_cut(f"  target: {targets}" + (f"; placement: {p.summary}" if p.summary else ""), LONG))
    if p.before is not None and p.before == p.after:
        # compile path and placement as before; what else changed (the compiled scope, a config value) follows
        out.append(
            "  wiring: compile path and placement unchanged"
            + ("; changed:" if p.changes else " (nothing else changed)")
        )
    elif p.before is not None or p.after is not None:
        out.append(_cut(f"  before -> after: {p.before or '-'} -> {p.after or '-'}", LONG))
    out += [_cut(f"  change: {c}", LONG) for c in p.changes]
    out += [_cut(f"  misplaced: {m}", LONG) for m in p.misplaced[:2]]
    if r.validation:
        width = max(len(row.name) for row in r.validation)
        out.append("  layers:")
        out += [_layer(row, width) for row in r.validation]
    shown = [f for f in r.findings if not (r.compile_path.path == "none" and f.rule == "MC100")]
    if r.kit_findings:
        out.append(f"  findings of the kit it calls ({', '.join(r.kits)}), listed once under the shared kit above:")
        out += ["  " + _finding(f) for f in r.kit_findings if f.severity == "error" or f.status == "new"]
    if shown:
        out.append("  findings:")
        # every error and every finding the change makes new; the rest only up to MAX_FINDINGS in all
        must = {id(f) for f in shown if f.status == "new" or f.severity == "error"}
        rest = [f for f in shown if id(f) not in must]
        fill = {id(f) for f in rest[: max(0, MAX_FINDINGS - len(must))]}
        out += ["  " + _finding(f) for f in shown if id(f) in must or id(f) in fill]
        left = [f for f in rest if id(f) not in fill]
        if left:
            kinds = sorted({f"{f.status + ' ' if f.status else ''}{f.severity}" for f in left})
            out.append(f"    (+{len(left)} more ({', '.join(kinds)}): --format markdown or json)")
    commands = _commands(r.validation)
    if commands:
        out.append("  to run:")
        out += ["  " + c for c in commands]
    layered = {row.name for row in r.validation}
    gaps = [g for g in r.performance.unvalidated if g.split(":", 1)[0] not in layered]
    if r.performance.measured:
        perf = r.performance
        out.append(
            _cut(
                f"  measured ({perf.where}): first step {perf.first_step_s} s vs steady {perf.steady_state_s} s; "
                f"graph breaks {perf.graph_breaks.value} ({_budget(perf.graph_breaks)}); "
                f"recompiles {perf.recompiles.value} ({_budget(perf.recompiles)}); "
                f"recompile limit hit: {perf.recompile_limit_hit}; _orig_mod. keys: {perf.orig_mod_keys}",
                LONG,
            )
        )
    rehearsal = [ln for ln in r.performance.rehearsal if not ln.startswith("the rehearsal ran a tiny")]
    if rehearsal:
        out.append("  rehearsal (tiny model, eager twin vs compiled; the Markdown and JSON have every line):")
        out += [_cut(f"    - {ln}", LONG) for ln in _first_lines(rehearsal)]
    if gaps:
        out.append("  gaps:")
        out += [_cut(f"    - {g}", LONG) for g in gaps[:MAX_GAPS]]
    return out


# what a reader must see of a rehearsal, first: its failures and fixes, what ran compiled, the change's lines,
# parity and keys; the setting lines (stage, batches, backend) after them
FIRST = ("against the base", "FAILED", "fix", "compiled:", "the change's lines", "parity", "keys")


def _rank(line: str) -> float:
    """Where a rehearsal line stands in FIRST; batches that stood in for a data path that failed come right after
    the failures: every figure comes from them."""
    if line.startswith("batches:") and "synthetic batches" in line and "data path failed" in line:
        return 1.5
    if line.startswith("whose:"):  # whose each failure is, right after the failures
        return 1.6
    if line.startswith(("fix, not tried", "tried, did not help")):  # advice no rerun proved: after the measures
        return len(FIRST) - 0.5
    return next((i for i, p in enumerate(FIRST) if line.startswith(p)), len(FIRST))


def _first_lines(lines: list[str]) -> list[str]:
    """Up to REHEARSAL_LINES of the rehearsal's lines, those in FIRST before the rest, each kept in its order."""
    rank = [_rank(ln) for ln in lines]
    chosen = sorted(sorted(range(len(lines)), key=rank.__getitem__)[:REHEARSAL_LINES])
    return [lines[i] for i in chosen]


def _kits(classes: list[str]) -> str:
    return ", ".join(f"{c}.apply_model_compile" for c in classes)


def text(report: ReviewReport) -> str:
    """The compact report."""
    s = report.scope
    out = [f"model-compile review: {report.verdict.upper()} - {_cut(report.verdict_reason, LONG)}"]
    if s.kind == "change":
        names = f" ({', '.join(s.recipes)})" if s.recipes else ""
        scope = f"scope: the change {s.base} .. {s.head}: {len(s.recipes)} recipe(s){names}"
        if s.kit_changed:
            scope += f"; the shared kit changed: {_kits(s.kit_classes)} (the recipes that call it are in scope)"
        reached = [r.name for r in report.recipes if r.imports]
        if reached:
            scope += f"; {', '.join(reached)}: their run imports a changed Python file"
    else:
        scope = f"scope: {'the recipe' if len(s.recipes) == 1 else 'every recipe under'} {s.path}"
    out.append(scope)
    out.append(f"validation: {report.validation}")
    out += [_cut(f"note: {n}", WIDTH * 2) for n in [*s.notes, *report.notes]]
    for f in report.findings[:MAX_FINDINGS]:
        out.append("shared kit:" + _finding(f)[1:])
    for r in report.recipes:
        out.append("")
        out += _recipe(r)
    if report.fixed:
        out.append("")
        out.append(
            f"no longer reported after this change: {', '.join(f'{f.rule} {f.file}:{f.line}' for f in report.fixed[:MAX_FINDINGS])}"
        )
    out.append("")
    out.append(f"exit {report.exit_code}; the whole report: --format markdown (or json)")
    return "\n".join(out) + "\n"
