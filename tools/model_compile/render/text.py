"""Plain-text and Markdown renderings of a report."""

from __future__ import annotations

from model_compile.findings.models import RecipeReport, Report
from model_compile.parse.models import FLAT_FIELDS, StageFacts
from model_compile.rules.finding import Finding, active


def _finding_line(f: Finding) -> str:
    return f"  {f.file}:{f.line}: {f.rule} {f.severity}: {f.message}\n      fix: {f.fix}"


def _counts(findings: list[Finding]) -> str:
    by = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    return f"{by['error']} error(s), {by['warning']} warning(s), {by['info']} info"


def _summary(r: RecipeReport) -> str:
    target = ", ".join(r.compiled_target) or "-"
    return f"path: {r.compile_path}; target: {target}" + (f"; placement: {r.placement}" if r.placement else "")


def report_text(report: Report) -> str:
    out: list[str] = []
    for f in active(report.findings):
        out.append(_finding_line(f))
    for r in report.recipes:
        out.append(f"{r.name} ({r.path}): {_summary(r)}")
        out.extend(_finding_line(f) for f in active(r.findings))
    all_f = report.all_findings()
    quiet = len(all_f) - len(active(all_f))
    extra = f", {quiet} suppressed by ignore comments (listed in --format json/sarif)" if quiet else ""
    out.append(
        f"{len(report.recipes)} recipe(s): {_counts(active(all_f))}{extra} (static review only; nothing was run)"
    )
    return "\n".join(out) + "\n"


def report_markdown(report: Report, title: str) -> str:
    out = [
        f"## {title}",
        "",
        "| recipe | compile path | compiled target | errors | warnings |",
        "|---|---|---|---|---|",
    ]
    for r in report.recipes:
        e = sum(1 for f in active(r.findings) if f.severity == "error")
        w = sum(1 for f in active(r.findings) if f.severity == "warning")
        out.append(
            f"| {r.name} | `{r.compile_path}` | {', '.join(f'`{t}`' for t in r.compiled_target) or '-'} | {e} | {w} |"
        )
    out.append("")
    findings = active(report.all_findings())
    if findings:
        out += ["| rule | severity | location | message | fix |", "|---|---|---|---|---|"]
        for f in findings:
            msg = f.message.replace("|", "\\|")
            out.append(
                f"| {f.rule} | {f.severity} | `{f.file}:{f.line}` | {msg} | {f.fix.replace('|', chr(92) + '|')} |"
            )
    else:
        out.append("No findings.")
    out += ["", "_Static (soft) validation: no code was imported or run._", ""]
    return "\n".join(out)


def inspect_text(report: Report) -> str:
    out: list[str] = []
    for kit in report.kit:
        how = "in place" if kit.in_place else "WRAPPER (keys change)"
        dis = f"; disables {', '.join(kit.disables)}" if kit.disables else ""
        out.append(f"kit: {kit.class_name}.apply_model_compile at {kit.file}:{kit.line} ({how}{dis})")
    for r in report.recipes:
        out.append(f"\n{r.name} ({r.path})")
        out.append(f"  {_summary(r)}")
        out.append(f"  scope: {r.scope.summary}")
        out.extend(f"  eager: {e}" for e in (r.scope.eager if r.scope.parts else []))
        for ledger in r.ledger:
            out.append(f"  {ledger.engine_class}.prepare_model ({ledger.file}:{ledger.line})")
            for e in ledger.events:
                flags = []
                if e.condition:
                    flags.append("if " + " and ".join(e.condition))
                if e.via:
                    flags.append("via " + " -> ".join(e.via))
                if not e.reachable:
                    flags.append("UNREACHABLE")
                if e.compile_style:
                    flags.append(e.compile_style)
                tgt = f" [{e.target}]" if e.target and e.kind != "return" else ""
                extra = f"  ({'; '.join(flags)})" if flags else ""
                out.append(f"    {e.line:>5} {e.kind:<13} {e.call}{tgt}{extra}")
            for note in ledger.notes:
                out.append(f"    note: {note}")
        s = r.config.schema_
        fields = ", ".join(
            f"{_key(s.form, k)}={v.default!r}" + (f" in {v.allowed}" if v.allowed else f" ({v.annotation})")
            for k, v in s.fields.items()
            if v.present
        )
        if s.compile_class:
            out.append(f"  schema: {s.root_class}.model.compile -> {s.compile_class}: {fields}")
        elif s.form == "flat":
            out.append(f"  schema: {s.root_class}.model.compile is `{s.compile_type}` (the older flat form): {fields}")
        else:
            out.append("  schema: no model.compile section" + (f" ({'; '.join(s.problems)})" if s.problems else ""))
        for st in r.config.stages:
            vals = (
                ", ".join(_stage_value(st, _key(st.form, k), k, v) for k, v in st.values.items())
                if st.has_compile
                else "no compile block"
            )
            out.append(f"  stage {st.name}{' (flat form)' if st.form == 'flat' else ''}: {vals}")
        for d in r.documentation:
            out.append(f"  documented {d.kind} ({d.source} {d.file}:{d.line}): {d.reason}")
    return "\n".join(out).lstrip("\n") + "\n"


def _key(form: str | None, name: str) -> str:
    """A compile field as the config names it: `backend` in a section, `compile_backend` in the flat form."""
    return FLAT_FIELDS[name] if form == "flat" else name


def _stage_value(stage: StageFacts, label: str, key: str, value: object) -> str:
    """`backend='inductor'`, or for an interpolation what is known before run time."""
    if key not in stage.dynamic:
        return f"{label}={value!r}"
    default = f", default {stage.defaults[key]!r}" if key in stage.defaults else ", no default"
    return f"{label}={value!r} (dynamic: resolved at run time{default})"
