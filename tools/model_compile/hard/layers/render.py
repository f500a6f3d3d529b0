"""Text and Markdown views of a HardReport (JSON is the pydantic dump)."""

from __future__ import annotations

from model_compile.hard.models import Environment, HardReport


def cpu_note(report: HardReport) -> str:
    """What a CPU-only run measured, naming only what it did: the runtime layers that ran, and which of
    tracing, graph breaks/recompiles (the runtime record) and parity (impact tests) came back."""
    ran = [layer.name for layer in report.layers if layer.started]
    if not ran:
        return (
            "CPU-only machine: no runtime layer ran here, so nothing was measured; "
            "rerun the commands below on an accelerator."
        )
    measured = []
    if any(t.ranks for t in report.traces.values()):
        measured.append("tracing")
    if report.runtime is not None:
        measured.append("graph breaks and recompiles")
    if any(layer.name.startswith("impact") and layer.status == "passed" for layer in report.layers):
        measured.append("parity on CPU")
    facts = report.rehearsal
    if facts is not None and facts.steps:
        measured.append(
            f"the rehearsal's parity, keys, graph breaks and recompiles over {len(facts.steps)} optimizer steps of the "
            f"recipe's own training loop on a tiny model"
        )
    what = f"{', '.join(ran)}" + (
        f"; measured: {', '.join(measured)}" if measured else "; nothing measured beyond pass/fail"
    )
    return (
        f"CPU-only machine: these are CPU-only runtime checks ({what}). They say nothing about compiled speed "
        "or numerics on GPUs/NPUs; rerun the commands below on an accelerator."
    )


def _wiring_lines(report: HardReport) -> list[str]:
    w = report.wiring
    if w.compile_path is None:
        return []
    lines = [f"compile path: {w.compile_path}; target: {', '.join(w.compiled_target) or '-'}"]
    if w.placement:
        lines.append(f"placement: {w.placement}")
    lines += [f"documented: {d}" for d in w.documented]
    return lines


def _runtime_lines(report: HardReport) -> list[str]:
    rt = report.runtime_record if report.runtime else None
    if rt is None:
        smoke = next((layer for layer in report.layers if layer.name == "smoke"), None)
        if smoke is None:
            return ["runtime: no runtime JSON (no smoke layer ran)"]
        if smoke.started:
            return [f"runtime: no runtime JSON: the smoke run ({smoke.status}) did not reach setup with compile on"]
        return [f"runtime: no runtime JSON: the smoke layer was not started ({smoke.status})"]
    t = rt.timing
    lim = rt.recompile_limit
    ex = rt.executed
    return [
        f"runtime [{report.environment.label}] torch {rt.environment.torch}:",
        f"  compiled modules: {rt.compiled_module_count} "
        f"({', '.join((m.name or '<model>') for m in rt.compiled_modules[:4])})",
        f"  graph breaks: {rt.graph_breaks.total}  unique graphs: {rt.unique_graphs}  "
        f"recompiles: {rt.recompiles.count}  recompile limit {lim.limit} hit: {lim.hit}",
        f"  compiled region executed: {ex.compiled_region_events} region calls in step {ex.step}",
        f"  first step {t.first_step_s} s vs steady state {t.steady_state_s} s (x{t.first_over_steady})",
        f"  '_orig_mod.' keys: {rt.orig_mod_key_count}",
        *[f"  violation: {v}" for v in rt.violations],
    ]


def _trace_lines(report: HardReport) -> list[str]:
    """Per layer and rank: compiles, compile time, graph breaks, recompiles (failed guard), limit hits."""
    out: list[str] = []
    for name, tr in report.traces.items():
        if not tr.ranks:
            out.append(f"trace [{name}]: {tr.note or 'no compile recorded'}")
            continue
        out.append(
            f"trace [{name}] {tr.directory} ({tr.reader}" + (f", {tr.index_html}" if tr.index_html else "") + ")"
        )
        for r in tr.ranks:
            out.append(
                f"  {r.rank}: {r.compiles} frame compiles, {r.compile_time_s} s compiling; "
                f"graph breaks {sum(int(b.split('x ', 1)[0]) for b in r.graph_breaks)}; recompiles {len(r.recompiles)}; "
                f"recompile-limit hits {len(r.recompile_limit_hits)}"
            )
            out += [f"    break: {b}" for b in r.graph_breaks[:5]]
            out += [f"    recompile: {x}" for x in r.recompiles[:5]]
            out += [f"    LIMIT HIT: {x}" for x in r.recompile_limit_hits[:5]]
            slow = sorted((f for f in r.frames if f.time_s), key=lambda f: -(f.time_s or 0))[:3]
            out += [f"    compile {f.compile_id} {f.function}: {f.time_s} s" for f in slow]
        if tr.note:
            out.append(f"  ({tr.note})")
    return out


def _device(env: Environment) -> str:
    """'cuda x2 (NVIDIA H200)' or 'cpu (no accelerator)'."""
    if env.cpu_only or not env.device_count:
        return (
            f"{env.device_type} (no accelerator"
            + (f": {env.device_check}" if env.device_check not in ("", "torch") else "")
            + ")"
        )
    return f"{env.device_type} x{env.device_count}" + (f" ({env.accelerator})" if env.accelerator else "")


def to_text(report: HardReport) -> str:
    env = report.environment
    out = [
        f"model-compile validate --hard: {report.recipe} ({report.kind})",
        f"interpreter: {env.executable} - {env.interpreter_reason}",
        f"environment: python {env.python}, pytest {env.pytest}, torch {env.torch}, {_device(env)} [{env.label}]",
    ]
    out.extend(f"preflight: {p}" for p in report.preflight)
    if report.probe:
        out.append(
            f"probe: {report.probe} first on the tests' PYTHONPATH (model_compile.runtime for the recipe's asserts; "
            "nothing installed in the repository). Commands whose tests import it carry PYTHONPATH=<probe>: "
            "elsewhere, copy that folder or install model-compile"
        )
    if env.cpu_only:
        out.append(cpu_note(report))
    out.extend(_wiring_lines(report))
    for layer in report.layers:
        counts = ""
        if layer.counts:
            c = layer.counts
            counts = f" tests {c.tests}: {c.passed} passed, {c.failures} failed, {c.errors} errors, {c.skipped} skipped"
        out.append(f"[{layer.status:>11}] {layer.name} ({layer.label}, {layer.duration_s:.1f} s){counts}")
        if layer.where and layer.label != "static":
            out.append(f"    where: {layer.where}")
        if layer.command:
            out.append(f"    $ cd {layer.cwd} && {layer.command}" if layer.cwd else f"    $ {layer.command}")
        out.extend(f"    option: {n}" for n in layer.options_note)
        if layer.reason:
            out.extend("    " + ln for ln in layer.reason.splitlines()[:12])
        if layer.next_step:
            out.append(f"    next: {layer.next_step}")
    out.extend(_runtime_lines(report))
    out.extend(_trace_lines(report))
    if report.gaps:
        out.append("gaps:")
        out.extend(f"  - {g}" for g in report.gaps)
    out.append(f"verdict: {report.verdict.upper()}: {report.summary}")
    out.append(f"logs: {report.out_dir}")
    return "\n".join(out) + "\n"


def to_markdown(report: HardReport) -> str:
    env = report.environment
    out = [
        f"# model-compile validate --hard: `{report.recipe}`",
        "",
        f"**{report.kind}** on python {env.python}, torch {env.torch}, {_device(env)} — label `{env.label}`",
        "",
        f"Interpreter: `{env.executable}` ({env.interpreter_reason})",
        "",
        *[f"- preflight: {p}" for p in report.preflight],
    ]
    if env.cpu_only:
        out += [f"> {cpu_note(report)}", ""]
    out += ["## Compile wiring", "", *[f"- {line.strip()}" for line in _wiring_lines(report)], ""]
    out += ["## Validation", "", "| layer | status | label | tests | time | command |", "|---|---|---|---|---|---|"]
    for layer in report.layers:
        c = layer.counts
        tests = f"{c.passed}/{c.tests} passed" if c else ""
        cmd = (
            f"`cd {layer.cwd} && {layer.command}`"
            if layer.command and layer.cwd
            else (f"`{layer.command}`" if layer.command else "")
        )
        out.append(f"| {layer.name} | {layer.status} | {layer.label} | {tests} | {layer.duration_s:.1f} s | {cmd} |")
    out.append("")
    for layer in report.layers:
        if layer.reason or layer.next_step:
            out.append(f"**{layer.name}** ({layer.status}):")
            if layer.reason:
                out += ["```", layer.reason.strip()[:2000], "```"]
            if layer.next_step:
                out.append(f"Next: `{layer.next_step}`")
            out.append("")
    out += ["## Runtime", "", "```", *_runtime_lines(report), "```", ""]
    if report.traces:
        out += ["## Trace", "", "```", *_trace_lines(report), "```", ""]
    if report.gaps:
        out += ["## Gaps", "", *[f"- {g}" for g in report.gaps], ""]
    out.append(f"**Verdict: {report.verdict}** — {report.summary}")
    return "\n".join(out) + "\n"


def emit(report: HardReport, fmt: str) -> str:
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    if fmt == "markdown":
        return to_markdown(report)
    return to_text(report)
