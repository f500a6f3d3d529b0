"""The rehearsal in words: a short text table, and the lines the review report's gaps section shows."""

from __future__ import annotations

import re

from model_compile.hard.models import RehearsalFacts


def _e(value: float | None) -> str:
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.1e}"


def _worst(facts: RehearsalFacts, attr: str) -> float | None:
    values = [getattr(s, attr) for s in facts.steps if getattr(s, attr) is not None]
    return max(values) if values else None


def _logits(facts: RehearsalFacts) -> str:
    worst = _worst(facts, "logits_rel_err")
    if worst is None:
        return "not captured (the output has none outside compiled code, e.g. a chunked loss)"
    return _e(worst)


def parity_line(facts: RehearsalFacts) -> str:
    if not facts.steps:
        return "parity: not measured"
    tol = {s.tolerance_class: s.tolerance for s in facts.steps if s.tolerance_class}
    tols = ", ".join(f"{t:.2g} ({c})" for c, t in tol.items() if t is not None)
    return (
        f"parity over {len(facts.steps)} steps (worst relative error): loss {_e(_worst(facts, 'loss_rel_err'))}, "
        f"logits {_logits(facts)}, gradients {_e(_worst(facts, 'grad_rel_err'))}; tolerance {tols}"
    )


def timing_line(facts: RehearsalFacts) -> str | None:
    if facts.first_step_s is None:
        return None
    if facts.steady_step_s is None:
        steady = "never reached (every step compiled something)"
    else:
        n = facts.steady_steps
        steady = f"{facts.steady_step_s} s" + (f" (median of {n} step(s) that compiled nothing new)" if n else "")
        if facts.limit_hits:
            steady += ", partly eager: the recompile limit was hit before"
    text = f"first compiled step {facts.first_step_s} s vs steady compiled step {steady}; eager step {facts.eager_step_s} s"
    if facts.trace_compile_s is not None:
        text += f"; compile time in the trace {facts.trace_compile_s} s"
    return text + f" ({facts.backend}; {facts.label}: no speedup is claimed from these)"


def instead_of_inductor(facts: RehearsalFacts) -> bool:
    """The stage compiles with inductor, and the rehearsal ran another backend in its place."""
    return bool(facts.backend_reason and facts.backend_reason.startswith("the stage's backend is inductor"))


def backend_line(facts: RehearsalFacts) -> str:
    """Which backend ran, and what that leaves unexercised."""
    if instead_of_inductor(facts):
        return (
            f"backend {facts.backend}, not the stage's inductor: graph breaks and guards are the same, numerics and "
            "compile time are not; inductor was not exercised (`--backend inductor` rehearses with it)"
        )
    return f"backend {facts.backend} ({facts.backend_reason})"


_SIZE_GUARD = re.compile(r"tensor '(.*?)' size mismatch at index (\d+)\. expected (\d+), actual (\d+)")
ADVICE = (
    "advice: a frame that recompiles per shape runs eager after the limit; compiling per block "
    "(`model-compile generate RECIPE --path regional --switch --target <blocks> --reason ...`) keeps the "
    "code around the blocks (loss, rope index, vision preprocessing) eager and usually settles across "
    "shapes; rehearse again after the change to see whether it does"
)


def readable_guard(text: str) -> str:
    """`tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69` -> `input_ids dim 1 changed 52 -> 69`."""

    def repl(m: re.Match[str]) -> str:
        names = re.findall(r"\['([A-Za-z_]\w*)'\]", m.group(1)) or re.findall(r"^([A-Za-z_]\w*)$", m.group(1))
        what = names[-1] if names else "an input tensor"
        return f"{what} dim {m.group(2)} changed {m.group(3)} -> {m.group(4)}"

    return _SIZE_GUARD.sub(repl, re.sub(r"(^|last reason: )\d+/\d+: ", r"\1", text.strip()))


def recompiles_by_frame(facts: RehearsalFacts) -> list[tuple[str, int, str]]:
    """(frame, count, its last failed guard made readable), most recompiles first."""
    counts: dict[str, list[str]] = {}
    for step in facts.steps:
        for entry in step.recompiles:
            frame, sep, guard = entry.partition("): ")
            counts.setdefault(frame + (")" if sep else ""), []).append(guard or entry)
    ranked = sorted(counts.items(), key=lambda kv: -len(kv[1]))
    return [(frame, len(guards), readable_guard(guards[-1])) for frame, guards in ranked]


def summary_lines(facts: RehearsalFacts) -> list[str]:
    """What the report's gaps section says about a rehearsal that ran: the failure and its fix first."""
    out: list[str] = []
    where = f"[rehearsal, {facts.label}, {facts.backend}]"
    if facts.status == "not-run":
        return [f"rehearsal not run: {facts.reason}"]
    out += [f"FAILED: {readable_guard(p)[:400]} {where}" for p in facts.problems]
    if facts.limit_hits:
        out.append(ADVICE)
    model = facts.model_class or facts.family or "the recipe's model"
    size = f" ({facts.parameters:,} parameters)" if facts.parameters else ""
    out.append(
        f"stage {facts.stage} on a tiny {model}{size}, architecture from {facts.family_source}; "
        f"steps through {facts.path or '-'}"
    )
    out.append(backend_line(facts))
    out.append(f"{parity_line(facts)} {where}")
    if facts.keys:
        out.append("keys: " + "; ".join(f"{k} {v}" for k, v in facts.keys.items()) + f" {where}")
    frames = recompiles_by_frame(facts)
    if frames:
        top = "; ".join(f"{n}x {frame} (last: {guard[:120]})" for frame, n, guard in frames[:3])
        out.append(f"{sum(n for _, n, _ in frames)} recompile(s) in {len(frames)} frame(s), most first: {top} {where}")
    user = [g for g in facts.graph_break_sites if not g.site.startswith("library")]
    lib = [g for g in facts.graph_break_sites if g.site.startswith("library")]
    if facts.graph_break_sites:
        sites = {g.site for g in facts.graph_break_sites}
        own = {g.site for g in user}
        top = "; ".join(f"{g.site} ({g.count}x: {g.reason[:80]})" for g in (user + lib)[:4])
        total = sum(g.count for g in facts.graph_break_sites)
        out.append(
            f"{total} graph break(s) at {len(sites)} site(s), {len(own)} in the repository's code: {top} {where}"
        )
    timing = timing_line(facts)
    if timing:
        out.append(timing)
    out.append(f"the rehearsal ran a tiny model; {facts.limits}")
    if facts.record:
        out.append(f"every step, shape and guard: {facts.record} (its log and TORCH_TRACE beside it)")
    return out


def text(facts: RehearsalFacts, command: str) -> str:
    reason = readable_guard(facts.reason) if facts.reason else ""
    lines = [f"rehearsal: {facts.status}" + (f" - {reason}" if reason else "") + f"  [{facts.label}]"]
    if facts.stage:
        lines.append(f"stage: {facts.stage} ({facts.stage_reason})")
    if facts.backend:
        lines.append(f"backend: {facts.backend}, mode {facts.mode} ({facts.backend_reason})")
    if facts.family_source:
        model = facts.model_class or facts.family or "?"
        size = f", {facts.parameters:,} parameters" if facts.parameters else ""
        lines.append(f"model: {model}{size}; architecture from {facts.family_source}")
    if facts.returned:
        lines.append(
            f"prepare_model() returned {facts.returned}; forward/loss path: {facts.path or '-'}"
            + ("; packed batches" if facts.packed else "; padded batches" if facts.packed is False else "")
        )
    if facts.compiled_module_count is not None:
        lines.append(
            f"compiled: {facts.compiled_module_count} module(s) ({', '.join(facts.compiled_modules[:4]) or 'none'})"
        )
    for check in facts.target_checks + [f"FAILED {t}" for t in facts.target_failures]:
        lines.append(f"  target {check}")
    if facts.keys:
        lines.append("keys: " + "; ".join(f"{k} {v}" for k, v in facts.keys.items()))
    if facts.steps:
        lines.append(parity_line(facts))
        lines.append(
            f"  {'step':>4}  {'shape':<44} {'loss':>7} {'logits':>7} {'grads':>7} {'recomp':>6} {'breaks':>6} {'eager_s':>8} {'comp_s':>8}"
        )
        for s in facts.steps:
            lines.append(
                f"  {s.step:>4}  {s.shape[:44]:<44} {_e(s.loss_rel_err):>7} {_e(s.logits_rel_err):>7} {_e(s.grad_rel_err):>7} "
                f"{len(s.recompiles):>6} {s.graph_breaks:>6} {s.eager_s if s.eager_s is not None else '-':>8} "
                f"{s.compiled_s if s.compiled_s is not None else '-':>8}" + (f"  ERROR {s.error}" if s.error else "")
            )
    if facts.graph_break_sites:
        lines.append(
            f"graph breaks: {sum(g.count for g in facts.graph_break_sites)} at {len(facts.graph_break_sites)} site(s)"
        )
        for g in facts.graph_break_sites[:12]:
            lines.append(f"  {g.count:>3}x {g.site}: {g.reason[:110]}")
    elif facts.steps:
        lines.append("graph breaks: none in the trace")
    if facts.steps:
        frames = recompiles_by_frame(facts)
        lines.append(f"recompiles: {sum(n for _, n, _ in frames)}" + (f" in {len(frames)} frame(s):" if frames else ""))
        lines += [f"  {n:>3}x {frame} (last: {guard[:140]})" for frame, n, guard in frames[:6]]
        hits = facts.limit_hits
        lines.append("recompile-limit hits: " + ("; ".join(h[:200] for h in hits[:3]) if hits else "none"))
    timing = timing_line(facts)
    if timing:
        lines.append(f"time: {timing}")
    if facts.wall_s:
        lines.append(
            f"wall {facts.wall_s} s ({facts.cpu_s} CPU s in the child), peak RSS {facts.peak_rss_mb} MB (torch {facts.torch})"
        )
    for problem in facts.problems[1:6]:
        lines.append(f"also: {readable_guard(problem)}")
    for note in facts.notes:
        lines.append(f"note: {note}")
    if facts.overrides:
        lines.append("overrides: " + " ".join(facts.overrides))
    lines.append(f"cannot show: {facts.limits}")
    if facts.detail and facts.status in ("failed", "not-run"):
        lines.append("child traceback (tail):")
        lines += ["  " + ln for ln in facts.detail.strip().splitlines()[-6:]]
    if facts.log:
        lines.append(f"log: {facts.log}")
    lines.append(f"rerun: {command}")
    return "\n".join(lines) + "\n"
