"""Text and Markdown views of a DiffReport (JSON comes straight from pydantic)."""

from __future__ import annotations

from model_compile.review.compare import _placement
from model_compile.review.models import ChangedFile, DiffFinding, DiffReport, RecipeDiff, Revision, ValueChange

MAX_LIST = 50  # bounded output: at most this many findings per section


def _rev(r: Revision) -> str:
    return r.rev if r.commit is None or r.rev.startswith(r.commit[:7]) else f"{r.rev} ({r.commit[:12]})"


def _finding(f: DiffFinding) -> str:
    mark = "*" if f.on_changed_line else "~" if f.near_change else " "
    where = f"{f.file}:{f.line}"
    by = f"  (superseded by {f.superseded_by})" if f.superseded_by else ""
    return f"{mark} {f.severity:<7} {f.rule} {where}  {f.message}{by}"


NEUTRAL = "comments, blank lines or docstrings only"


def _file_tags(f: ChangedFile) -> str:
    tags = (" [binary]" if f.binary else "") + (f" [{f.entry}]" if f.entry != "file" else "")
    tags += f" [{NEUTRAL}]" if f.code_changed is False else ""
    return tags + (f" ({f.note})" if f.note else "")


def importers(report: DiffReport) -> dict[str, list[str]]:
    """Changed file -> the recipes whose run imports it."""
    out: dict[str, list[str]] = {}
    for d in report.recipes:
        for i in d.imports:
            out.setdefault(i.path, []).append(d.name)
    return out


def _value(c: ValueChange) -> str:
    return f"{c.before!r} -> {c.after!r}" + (f" ({c.effect})" if c.effect else "")


def _recipe_lines(d: RecipeDiff) -> list[str]:
    title = d.name if d.status != "renamed" else f"{d.old_name} -> {d.name}"
    label = {"kit": "affected by the kit change", "imports": "its run imports a changed file"}.get(d.status, d.status)
    out = [f"recipe {title} [{label}]" + (f" touches: {', '.join(d.touches)}" if d.touches else "")]
    for f in d.files:
        src = f" (from {f.old_path})" if f.old_path else ""
        out.append(f"    {f.change:<8} {f.kind:<7} {f.path}{src}{_file_tags(f)}")
    for i in d.imports:
        out.append(f"    {i.change:<8} imports {i.reason}")
    if not d.code_changed:
        out.append(f"  no code change reaches it: {NEUTRAL}")
    b, a = d.before, d.after
    if b and a and (b.compile_path != a.compile_path or _placement(b.placement) != _placement(a.placement)):
        path = a.compile_path if a.compile_path == b.compile_path else f"{b.compile_path} -> {a.compile_path}"
        out.append(f"  compile: {path}")
        if b.placement or a.placement:
            out.append(f"    before: {b.placement or '-'}")
            out.append(f"    after:  {a.placement or '-'}")
    elif a:
        out.append(f"  compile: {a.compile_path}" + (f"; {a.placement}" if a.placement else ""))
    elif b:
        out.append(f"  compile (before): {b.compile_path}")
    for c in d.ledger_changes:
        out.append(f"  - {c}")
    for v in d.config_changes:
        out.append(f"  - config {v.where} {v.field}: {_value(v)}")
    sup = f", {d.superseded} superseded" if d.superseded else ""
    out.append(f"  findings: {d.new} new, {d.fixed} fixed{sup}, {d.unchanged} unchanged")
    return out


def _users(users: dict[str, list[str]], path: str) -> str:
    names = users.get(path)
    return f"  (imported by the run of: {', '.join(names)})" if names else ""


def render_text(report: DiffReport, all_findings: bool = False) -> str:
    """The diff report for a terminal."""
    lines = [f"model-compile diff {_rev(report.base)} .. {_rev(report.head)}"]
    for n in report.notes:
        lines.append(f"note: {n}")
    if report.kit_changed:
        lines.append(
            f"shared kit changed: {', '.join(c + '.apply_model_compile' for c in report.kit_classes)} in "
            f"{', '.join(report.kit_files)} (the recipes that call it are affected)"
        )
    for c in report.kit_changes:
        lines.append(f"  - {c}")
    other = [f for f in report.shared_files if f.kind != "kit"]
    users = importers(report)
    if other:
        lines.append(
            f"shared files changed: {len(other)}"
            + "".join(f"\n    {f.change:<8} {f.path}{_file_tags(f)}{_users(users, f.path)}" for f in other[:20])
        )
    if not report.recipes:
        lines.append("no recipe touched, and no recipe's run imports a changed file")
    for d in report.recipes:
        lines.append("")
        lines.extend(_recipe_lines(d))
    sections = [("new", report.new), ("fixed", report.fixed)]
    if report.superseded:
        sections.append(("superseded", report.superseded))
    if all_findings:
        sections.append(("unchanged", report.unchanged))
    for title, items in sections:
        lines.append("")
        lines.append(
            f"{title} findings: {len(items)}"
            + ("  (* on a changed line, ~ near one)" if title == "new" and items else "")
        )
        for f in items[:MAX_LIST]:
            lines.append("  " + _finding(f))
        if len(items) > MAX_LIST:
            lines.append(f"  ... {len(items) - MAX_LIST} more (use --format json)")
    if not all_findings:
        lines.append(f"unchanged findings: {report.unchanged_count} (--all-findings lists them)")
    lines.append("")
    lines.append("result: " + ("the change introduces error findings" if report.exit_code else "no new error finding"))
    return "\n".join(lines) + "\n"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: DiffReport, all_findings: bool = False) -> str:
    """The diff report for a pull-request comment."""
    out = [f"## model-compile diff `{_rev(report.base)}` .. `{_rev(report.head)}`", ""]
    verdict = ":x: introduces error findings" if report.exit_code else ":white_check_mark: no new error finding"
    sup = f", {len(report.superseded)} superseded" if report.superseded else ""
    out.append(
        f"**{verdict}** - {len(report.new)} new, {len(report.fixed)} fixed{sup}, {report.unchanged_count} unchanged"
    )
    out.append("")
    if report.kit_changed:
        out.append(
            f"Shared kit changed: `{'`, `'.join(c + '.apply_model_compile' for c in report.kit_classes)}` "
            f"(`{'`, `'.join(report.kit_files)}`): the recipes that call it are affected."
        )
        for c in report.kit_changes:
            out.append(f"- {_md_escape(c)}")
        out.append("")
    if report.recipes:
        out.append("| recipe | status | touches | compile path | new | fixed |")
        out.append("|---|---|---|---|---|---|")
        for d in report.recipes:
            b = d.before.compile_path if d.before else "-"
            a = d.after.compile_path if d.after else "-"
            path = a if a == b else f"{b} -> {a}"
            name = d.name if d.status != "renamed" else f"{d.old_name} -> {d.name}"
            out.append(f"| `{name}` | {d.status} | {', '.join(d.touches)} | {path} | {d.new} | {d.fixed} |")
        out.append("")
        for d in report.recipes:
            if d.ledger_changes or d.config_changes or d.imports or not d.code_changed:
                out.append(f"### `{d.name}`")
                for i in d.imports:
                    out.append(f"- in scope: {_md_escape(i.reason)}")
                if not d.code_changed:
                    out.append(f"- no code change reaches it: {NEUTRAL}")
                for c in d.ledger_changes:
                    out.append(f"- {_md_escape(c)}")
                for v in d.config_changes:
                    effect = f" ({_md_escape(v.effect)})" if v.effect else ""
                    out.append(f"- config `{v.where}` `{v.field}`: `{v.before!r}` -> `{v.after!r}`{effect}")
                out.append("")
    else:
        out.append("No recipe touched, and no recipe's run imports a changed file.")
        out.append("")
    sections = [
        ("New findings", report.new),
        ("Fixed findings", report.fixed),
        ("Superseded findings", report.superseded),
    ]
    if all_findings:
        sections.append(("Unchanged findings", report.unchanged))
    for title, items in sections:
        if not items:
            continue
        out.append(f"### {title}")
        out.append("| severity | rule | where | changed line | message |")
        out.append("|---|---|---|---|---|")
        for f in items[:MAX_LIST]:
            out.append(
                f"| {f.severity} | {f.rule} | `{f.file}:{f.line}` | {'yes' if f.on_changed_line else 'near' if f.near_change else ''} | "
                f"{_md_escape(f.message)}{f' (superseded by {f.superseded_by})' if f.superseded_by else ''} |"
            )
        if len(items) > MAX_LIST:
            out.append(f"\n{len(items) - MAX_LIST} more in `--format json`.")
        out.append("")
    for n in report.notes:
        out.append(f"> {n}")
    return "\n".join(out).rstrip() + "\n"
