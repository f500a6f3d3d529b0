"""The rehearsal in words: the text `rehearse` prints, and the lines the review report's gaps section shows.

Every figure is printed from the facts the judge read; a count says what it counts (recompiles are new
compiled variants, graph breaks come from rank 0's trace), and the parity line prints both errors, the
compiled twin's and the eager twin's, against the same reference.
"""

from __future__ import annotations

from model_compile.hard.models import Fix, RehearsalFacts
from model_compile.hard.rehearsal.reading.fixes import readable_guard, shorten
from model_compile.hard.rehearsal.seen.lines import summary_lines as seen_summary
from model_compile.hard.rehearsal.seen.lines import text_lines as seen_text

__all__ = ["backend_line", "instead_of_inductor", "readable_guard", "summary_lines", "text"]


def _e(value: float | None) -> str:
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.1e}"


def _worst(facts: RehearsalFacts, attr: str) -> float | None:
    values = [getattr(s, attr) for s in facts.steps if getattr(s, attr) is not None]
    return max(values) if values else None


def parity_line(facts: RehearsalFacts) -> str:
    if not facts.steps or facts.parity_rule is None:
        return "parity: not measured"
    eager = ""
    if _worst(facts, "grad_err_eager") is not None:
        eager = f" (eager twin: {_e(_worst(facts, 'grad_err_eager'))}, {_e(_worst(facts, 'loss_err_eager'))})"
    return (
        f"parity over {len(facts.steps)} optimizer steps, worst relative error to the reference: gradients "
        f"{_e(_worst(facts, 'grad_err'))}, loss {_e(_worst(facts, 'loss_err'))}{eager}; rule: {facts.parity_rule}"
        + (f"; inconclusive: {facts.parity_inconclusive}" if facts.parity_inconclusive else "")
    )


def timing_line(facts: RehearsalFacts) -> str | None:
    if facts.first_step_s is None:
        return None
    if facts.steady_step_s is None:
        steady = "never reached (every optimizer step compiled something)"
    else:
        n = facts.steady_steps or 0
        steady = f"{facts.steady_step_s} s (median of {n} optimizer step(s) that compiled nothing new"
        steady += ", fewer than 5)" if n < 5 else ")"
        if facts.limit_hits:
            steady += ", partly eager: the recompile limit was hit before"
    text = f"first optimizer step {facts.first_step_s} s vs steady step {steady}; eager step {facts.eager_step_s} s"
    if facts.trace_compile_s is not None:
        text += f"; compile time in the trace {facts.trace_compile_s} s"
    return text + f" ({facts.backend}; {facts.label}: no speedup is claimed from these)"


def instead_of_inductor(facts: RehearsalFacts) -> bool:
    """The stage compiles with inductor, and the rehearsal ran another backend in its place."""
    return bool(facts.backend_reason and facts.backend_reason.startswith("the stage's backend is inductor"))


def backend_line(facts: RehearsalFacts) -> str:
    if instead_of_inductor(facts):
        return (
            f"backend {facts.backend}, not the stage's inductor: graph breaks and guards are the same, numerics and "
            "compile time are not; inductor was not exercised (`--backend inductor` rehearses with it)"
        )
    return f"backend {facts.backend} ({facts.backend_reason})"


def _depth(facts: RehearsalFacts) -> str:
    if not facts.depth:
        return "depth: as the recipe's builder makes it"
    parts = ", ".join(f"{k} {v}" for k, v in facts.depth.items())
    return f"depth: {parts}" + ("" if facts.depth_known else " (real depth unknown)")


def _graph_breaks(facts: RehearsalFacts, pairs: bool = False) -> str:
    """The graph-break headline; `pairs`: say how many (site, reason) lines follow when a site has several."""
    if not facts.graph_break_sites:
        return "graph breaks: none in the trace (rank 0)"
    count = len(facts.graph_break_sites)
    more = f" in {count} site and reason pair(s)" if pairs and count != facts.graph_break_site_count else ""
    return f"graph breaks: {facts.graph_break_count} at {facts.graph_break_site_count} site(s){more} (rank 0's trace)"


def _pct(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0%}" if value in (0.0, 1.0) or 0.01 <= value <= 0.99 else f"{value:.1%}"


def coverage_line(facts: RehearsalFacts) -> str | None:
    """One line: the compiled share of the forward work, then the largest eager regions with their causes."""
    if not facts.coverage:
        return f"compiled: {facts.coverage_note}" if facts.coverage_note else None
    candidates = [e for e in facts.coverage if e.module != "(model)" and e.compiled < 0.95 and e.eager_causes]
    # the innermost eager modules: an entry whose blocks or members are listed too says less than they do
    inner = [e for e in candidates if not any(o.module.startswith(e.module + ".") for o in candidates)]
    eager = sorted(inner, key=lambda e: -(1 - e.compiled) * e.work)
    parts = []
    for e in eager[:3]:
        blocks = f"{e.count} blocks, " if e.count > 1 else ""
        cause = e.eager_causes[0]
        # outside what the recipe compiles: that is why first; the cause inside it says how it runs eager
        where = "outside the compile targets; " if e.role == "outside the targets" else ""
        parts.append(
            f"{e.module} ({blocks}{_pct(e.compiled)} compiled: {where}{shorten(cause.cause, 90)} at {cause.site})"
        )
    bw = f", backward {_pct(facts.backward_compiled_share)}" if facts.backward_compiled_share is not None else ""
    head = f"compiled: {_pct(facts.compiled_share)} of the forward work{bw}"
    return head + ("; eager: " + "; ".join(parts) if parts else "; nothing of the model ran eager")


def coverage_rows(facts: RehearsalFacts) -> list[str]:
    """The coverage map, a line a module: compiled share, share of the model's work, role, main eager cause."""
    rows = []
    for e in facts.coverage:
        blocks = f" x{e.count}" if e.count > 1 else ""
        base = f" (base {_pct(e.base_compiled)})" if e.base_compiled is not None else ""
        cause = ""
        if e.eager_causes:
            c = e.eager_causes[0]
            more = f" (+{len(e.eager_causes) - 1} more cause(s))" if len(e.eager_causes) > 1 else ""
            cause = f" - eager: {shorten(c.cause, 120)} at {c.site}{more}"
        role = "" if e.role == "target" else f" [{e.role}]"
        rows.append(f"{_pct(e.compiled):>5} compiled{base}, {_pct(e.work):>5} of work  {e.module}{blocks}{role}{cause}")
    return rows


def changed_rows(facts: RehearsalFacts) -> list[str]:
    """Each hunk of the change the run imports: how often it ran in a compiled graph, as Python, in the eager twin."""
    rows = []
    for h in facts.changed_lines:
        span = f"{h.lines[0]}-{h.lines[-1]}" if len(h.lines) > 1 else str(h.lines[0])
        text = (
            f"{h.file}:{span}: {h.ran_compiled}x in a compiled graph, {h.ran_eager}x as Python with compile on, "
            f"{h.ran_eager_twin}x in the eager twin"
        )
        if h.not_reached:
            text += f"; never reached: line(s) {', '.join(map(str, h.not_reached[:6]))}"
        rows.append(text)
    return rows


def changed_line(facts: RehearsalFacts) -> str | None:
    """One line for the report: the change's hunks that ran eager with compile on, or not at all."""
    if not facts.changed_lines:
        return None
    hunks = facts.changed_lines
    kinds = [
        ("ran inside a compiled graph", [h for h in hunks if h.ran_compiled]),
        ("ran as Python with compile on, never in a graph", [h for h in hunks if not h.ran_compiled and h.ran_eager]),
        (
            "ran in the eager twin only",
            [h for h in hunks if not h.ran_compiled and not h.ran_eager and h.ran_eager_twin],
        ),
        ("no run reached", [h for h in hunks if not (h.ran_compiled or h.ran_eager or h.ran_eager_twin)]),
    ]
    shown = [f"{len(group)} {what} ({group[0].file}:{group[0].lines[0]})" for what, group in kinds if group]
    text = f"the change's lines: {len(hunks)} hunk(s) in files the run imports: " + ", ".join(shown)
    partly = [h for h in hunks if h.not_reached and (h.ran_compiled or h.ran_eager or h.ran_eager_twin)]
    if partly:
        text += (
            f"; {len(partly)} of those that ran have lines no run reached ({partly[0].file}:{partly[0].not_reached[0]})"
        )
    if any(h.not_reached for h in hunks):
        text += ": untested here"
    return text


def fix_line(fix: Fix) -> str:
    """A fix with what its rerun showed: proven or disproven (its figures), or not tried (why)."""
    if fix.tried == "proven":
        return f"fix (proven by a rerun: {fix.reason}): {fix.fix}"
    if fix.tried == "disproven":
        return f"tried, did not help ({fix.reason}): {fix.fix}"
    why = (fix.reason or "").removeprefix("not tried: ").removeprefix("not tried ")
    return f"fix, not tried{f' ({why})' if why else ''}: {fix.fix}"


def base_line(facts: RehearsalFacts) -> str:
    """The base's rehearsal beside the head's, in one line: what is new with the change first."""
    groups: dict[str, list[str]] = {"new with the change": [], "already there": [], "gone with the change": []}
    other = []
    for line in facts.versus_base:
        what, _, mark = line.rpartition(" - ")
        if mark in groups:
            groups[mark].append(what)
        else:
            other.append(line)
    parts = [f"{mark}: {'; '.join(items)}" for mark, items in groups.items() if items] + other
    return f"against the base {str(facts.base_rev)[:12]}: " + " | ".join(parts)


def summary_lines(facts: RehearsalFacts) -> list[str]:
    """What the report's gaps section says about a rehearsal that ran: the failure and its fix first."""
    where = f"[rehearsal, {facts.label}, {facts.backend}, {facts.world_size} rank(s)]"
    if facts.status == "not-run":
        return [f"rehearsal not run: {facts.reason}"]
    if facts.status == "tool-error":
        return [f"rehearsal did not run (a model-compile fault, not the recipe's): {facts.reason}"]
    # on a change, what is new with it comes first: a reader of the first lines must not blame the change for
    # a failure its base has too
    out = [base_line(facts)] if facts.versus_base else []
    out += [f"FAILED: {readable_guard(p, 400)} {where}" for p in facts.problems]
    out += [line.strip() for line in attribution_lines(facts, limit=2) if line.startswith("whose:")]
    out += [f"near the recompile limit: {n}" for n in facts.near_limit]
    for fix in facts.fixes:
        out.append(fix_line(fix))
        if fix.command and fix.tried != "disproven":
            out.append(f"fix command: `{fix.command}`")
    model = f"a tiny {facts.model_class}" if facts.model_class else "the recipe's model, tiny"
    size = f" ({facts.parameters:,} parameters)" if facts.parameters else ""
    # the facts a reader needs first lead each line (the text view cuts a long line at its end)
    out.append(
        f"stage {facts.stage} on {model}{size}; {_depth(facts)}; wrap: {facts.wrap}; "
        f"precision: {facts.precision}; model: {facts.model_source}"
    )
    source, _, seen = str(facts.batches).partition("; seen: ")
    out.append(f"batches: seen {seen}; from {source}" if seen else f"batches: {source}")
    out.append(backend_line(facts))
    cov = coverage_line(facts)
    if cov:
        out.append(f"{cov} {where}")
    changed = changed_line(facts)
    if changed:
        out.append(f"{changed} {where}")
    out.append(f"{parity_line(facts)} {where}")
    if facts.keys:
        out.append("keys: " + "; ".join(f"{k} {v}" for k, v in facts.keys.items()) + f" {where}")
    if facts.recompile_frames:
        out.append(
            f"{facts.recompile_count} recompile(s) (new compiled variants), most first: "
            + "; ".join(facts.recompile_frames[:3])
            + f" {where}"
        )
    elif facts.steps:
        hit = "hit" if facts.limit_hits else "not hit"
        out.append(f"0 recompiles (new compiled variants) over {len(facts.steps)} optimizer steps; limit {hit} {where}")
    if facts.graph_break_sites:
        top = "; ".join(f"{g.site} ({g.count}x: {shorten(g.reason, 80)})" for g in facts.graph_break_sites[:3])
        if len(facts.graph_break_sites) > 3:
            top += f"; {len(facts.graph_break_sites) - 3} more site and reason pair(s) (--format json)"
        out.append(f"{_graph_breaks(facts)}: {top} {where}")
    if facts.sync:
        out.append(f"gradient sync: {facts.sync}")
    timing = timing_line(facts)
    if timing:
        out.append(timing)
    out += seen_summary(facts)
    out.append(f"the rehearsal ran a tiny model; {facts.limits}")
    if facts.record:
        out.append(f"every step, shape and guard: {facts.record} (records, logs and the trace)")
    return out


def attribution_lines(facts: RehearsalFacts, limit: int = 4) -> list[str]:
    """Whose each failure is, with its evidence, control, what is not ruled out and what supplies it."""
    blocks: dict[tuple[str, ...], int] = {}  # failures whose attribution reads the same: one block, counted
    for att in facts.attribution:
        part = f" ({att.part})" if att.part else ""
        lines: list[str] = [f"whose: {att.owner}{part} - {shorten('; '.join(att.evidence[:2]), 400)}"]
        said = {"control": [att.control or ""], "ruled out": att.ruled_out, "not ruled out": att.not_ruled_out}
        said["supply"] = [att.supply or ""]
        lines += [f"  {label}: {shorten('; '.join(items), 300)}" for label, items in said.items() if any(items)]
        blocks[tuple(lines)] = blocks.get(tuple(lines), 0) + 1
    out = []
    for block, count in list(blocks.items())[:limit]:
        first = block[0] + (f" (the same for {count} failures)" if count > 1 else "")
        out += [first, *block[1:]]
    return out


def text(facts: RehearsalFacts, command: str) -> str:
    reason = readable_guard(facts.reason) if facts.reason else ""
    lines = [f"rehearsal: {facts.status}" + (f" - {reason}" if reason else "") + f"  [{facts.label}]"]
    lines += attribution_lines(facts)
    if facts.stage:
        lines.append(f"stage: {facts.stage} ({facts.stage_reason})")
    if facts.model_source:
        model = facts.model_class or "?"
        size = f", {facts.parameters:,} parameters" if facts.parameters else ""
        lines.append(f"model: {model}{size}; {facts.model_source}")
        lines.append(f"  {_depth(facts)}" + (f"; widths shrunk: {', '.join(facts.shrunk[:6])}" if facts.shrunk else ""))
    lines.append(f"ranks: {facts.world_size} ({facts.world_size_reason}); wrap: {facts.wrap}")
    if facts.backend:
        lines.append(f"backend: {facts.backend}, mode {facts.mode} ({facts.backend_reason})")
    if facts.precision or facts.twins:
        lines.append(f"precision: {facts.precision or '?'}; runs: {', '.join(facts.twins) or '-'}")
    if facts.batches:
        lines.append(f"batches: {facts.batches}")
    if facts.accumulation:
        lines.append(f"steps: {facts.steps_planned} optimizer steps, {facts.accumulation}")
    if facts.returned:
        lines.append(f"prepare_model() returned {facts.returned}")
    if facts.compiled_module_count is not None:
        lines.append(
            f"compiled: {facts.compiled_module_count} module(s) ({', '.join(facts.compiled_modules[:4]) or 'none'})"
        )
    for check in facts.target_checks + [f"FAILED {t}" for t in facts.target_failures]:
        lines.append(f"  target {check}")
    cov = coverage_line(facts)
    if cov:
        lines.append(cov)
        lines += [f"  {row}" for row in coverage_rows(facts)]
        if facts.coverage and facts.coverage_note:
            lines.append(f"  ({facts.coverage_note})")
    lines += [f"  {shorten(line, 400)}" for line in facts.coverage_unmeasured[:6]]
    if facts.keys:
        lines.append("keys: " + "; ".join(f"{k} {v}" for k, v in facts.keys.items()))
    if facts.steps:
        lines.append(parity_line(facts))
        lines.append(
            f"  {'step':>4}  {'batches':<46} {'grads':>7} {'eager':>7} {'loss':>7} {'recomp':>6} {'graphs':>6} {'eager_s':>8} {'comp_s':>8}"
        )
        for s in facts.steps:
            lines.append(
                f"  {s.step:>4}  {s.shape[:46]:<46} {_e(s.grad_err):>7} {_e(s.grad_err_eager):>7} {_e(s.loss_err):>7} "
                f"{len(s.recompiles):>6} {s.new_graphs if s.new_graphs is not None else '-':>6} "
                f"{s.eager_s if s.eager_s is not None else '-':>8} {s.compiled_s if s.compiled_s is not None else '-':>8}"
            )
    if facts.steps or facts.graph_break_sites:
        lines.append(_graph_breaks(facts, pairs=True))
        for g in facts.graph_break_sites[:12]:
            lines.append(f"  {g.count:>3}x {g.site}: {shorten(g.reason, 110)}")
        if len(facts.graph_break_sites) > 12:
            lines.append(f"  {len(facts.graph_break_sites) - 12} more site and reason pair(s) (--format json)")
    if facts.steps:
        lines.append(
            f"recompiles: {facts.recompile_count} new compiled variant(s)" + (" in:" if facts.recompile_frames else "")
        )
        lines += [f"  {shorten(frame, 420)}" for frame in facts.recompile_frames[:6]]
        hits = facts.limit_hits
        lines.append(
            "recompile-limit hits: " + ("; ".join(readable_guard(h, 300) for h in hits[:3]) if hits else "none")
        )
        lines += [f"  near the limit: {shorten(n, 300)}" for n in facts.near_limit[:4]]
        lines += [f"  size fixed by: {shorten(s, 300)}" for s in facts.specialized[:4]]
    for rank in facts.ranks:
        lines.append(f"  {rank}")
    if facts.changed_lines:
        lines.append(f"the change's lines ({facts.changed_note}):")
        lines += [f"  {row}" for row in changed_rows(facts)]
    elif facts.changed_note:
        lines.append(f"the change's lines: {facts.changed_note}")
    if facts.sync:
        lines.append(f"gradient sync: {facts.sync}")
    timing = timing_line(facts)
    if timing:
        lines.append(f"time: {timing}")
    if facts.wall_s:
        shared = (
            f", {facts.server_start_s} s of it starting Python and importing torch and transformers once for every twin"
            if facts.server_start_s
            else ""
        )
        lines.append(
            f"wall {facts.wall_s} s{shared} ({facts.cpu_s} CPU s in the children), peak RSS {facts.peak_rss_mb} MB "
            f"(torch {facts.torch})"
        )
    for problem in facts.problems[1:6]:
        lines.append(f"also: {readable_guard(problem)}")
    for fix in facts.fixes:
        lines.append(fix_line(fix))
        if fix.command:
            lines.append(f"  command: {fix.command}")
    for note in facts.notes:
        lines.append(f"note: {note}")
    for line in facts.versus_base:
        lines.append(f"vs base: {line}")
    lines += seen_text(facts)
    if facts.overrides:
        lines.append("overrides: " + " ".join(facts.overrides))
    lines.append(f"cannot show: {facts.limits}")
    if facts.detail and facts.status in ("failed", "not-run", "tool-error"):
        lines.append("child traceback (tail):")
        lines += ["  " + ln for ln in facts.detail.strip().splitlines()[-6:]]
    if facts.record:
        lines.append(f"records, logs, trace: {facts.record}")
    lines.append(f"rerun: {command}")
    return "\n".join(lines) + "\n"
