"""The change's own lines: did the rehearsal run them, how often, and inside a compiled graph or as Python.

The child counts each changed line's executions as Python in the eager and the compiled twin, and, in the
compiled twin, the runs of every graph whose operators come from a changed line
(runtime/rehearsal/measure/lines.py). Here they are grouped into the change's hunks. A hunk no run reached
says so: parity and the coverage map then say nothing about it, and where the rehearsal shrank a size the
hunk may depend on (a sequence length, a width), the sizes are named.
"""

from __future__ import annotations

import ast
import os
from typing import Any

from model_compile.hard.models import ChangedLines, RehearsalFacts


def _hunks(lines: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][-1] + 1:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def _phase(recs: dict[str, list[dict[str, Any]]], twin: str) -> dict[str, Any]:
    return (((recs.get(twin) or [{}])[0].get("phases") or {}).get("lines")) or {}


def _by_rel(counts: dict[str, dict[str, int]], root: str) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    real = os.path.realpath(root)
    for path, lines in counts.items():
        for base in (root, real):
            if path.startswith(base.rstrip("/") + "/"):
                rel = path[len(base.rstrip("/")) + 1 :]
                cell = out.setdefault(rel, {})
                for n, c in lines.items():
                    cell[int(n)] = max(cell.get(int(n), 0), int(c))
                break
    return out


def read(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], spec: dict[str, Any]) -> None:
    changed: dict[str, list[int]] = spec.get("changed_lines") or {}
    if not changed:
        return
    root = str(spec["repo_root"])
    compiled, eager = _phase(recs, "compiled"), _phase(recs, "eager")
    if not compiled and not eager:
        facts.changed_note = "the change's lines were not counted: the runs did not get that far"
        return
    py = _by_rel(compiled.get("counts") or {}, root)
    twin = _by_rel(eager.get("counts") or {}, root)
    in_graphs: dict[str, dict[int, int]] = {}
    for graph in compiled.get("graphs") or []:
        for path, line in graph.get("lines") or []:
            for rel, ran in _by_rel({path: {str(line): int(graph.get("calls") or 0)}}, root).items():
                cell = in_graphs.setdefault(rel, {})
                for n, c in ran.items():
                    cell[n] = cell.get(n, 0) + c
    imported = set(_by_rel({p: {} for p in (compiled.get("imported") or []) + (eager.get("imported") or [])}, root))
    skipped = []
    for rel, numbers in sorted(changed.items()):
        facts.changed_imported[rel] = rel in imported
        if rel not in imported:
            skipped.append(rel)
            continue
        text = _read(os.path.join(root, rel))
        tree = _parse(text)
        spans, calls = _statements(tree), _signatures(tree)
        for hunk in _hunks(_code_lines(text, numbers)):
            # per line: (in graphs, as Python in the compiled twin, in the eager twin); a line of a function's
            # signature or decorators runs when the function is defined (at import): it counts as run when the
            # function's body does, that is, when it is called
            counted = {n: tuple(_ran(c, rel, spans, calls.get(n, n)) for c in (in_graphs, py, twin)) for n in hunk}
            facts.changed_lines.append(
                ChangedLines(
                    file=rel,
                    lines=hunk,
                    ran_compiled=max(r[0] for r in counted.values()),
                    ran_eager=max(r[1] for r in counted.values()),
                    ran_eager_twin=max(r[2] for r in counted.values()),
                    not_reached=[n for n in hunk if not any(counted[n])],
                )
            )
    if facts.changed_lines:
        note = f"counted with {compiled.get('how') or eager.get('how') or '?'}"
    elif imported & set(changed):
        note = "none to count: the changed lines of the files the run imports are comments, docstrings or blank lines"
    else:
        note = "none to count"
    facts.changed_note = note + (
        f"; {len(skipped)} changed Python file(s) the run does not import ({', '.join(skipped[:3])})" if skipped else ""
    )
    dark = [h for h in facts.changed_lines if h.not_reached]
    if dark:
        sizes = [s for s in facts.shrunk] + [o for o in facts.overrides if o.split("=", 1)[0].endswith(_SIZES)]
        context = f" (the rehearsal changed these sizes: {'; '.join(sizes[:4])})" if sizes else ""
        where = ", ".join(f"{h.file}:{_span(h.not_reached)}" for h in dark[:4])
        facts.notes.append(
            f"the change's lines {where} did not run in any twin: parity and the coverage map say nothing about "
            f"them{context}"
        )


def _ran(counts: dict[str, dict[int, int]], rel: str, spans: dict[int, tuple[int, ...]], n: int) -> int:
    """How often line `n` of `rel` ran: a line of a statement written over several lines runs when its statement
    does (Python reports the statement on one of its lines: a call's closing `)` has no event of its own)."""
    cell = counts.get(rel, {})
    return max((cell.get(m, 0) for m in spans.get(n, (n,))), default=0)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _parse(text: str | None) -> ast.Module | None:
    """The file's syntax tree (parsed, never imported); None when it does not parse."""
    try:
        return ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None


def _statements(tree: ast.Module | None) -> dict[int, tuple[int, ...]]:
    """Each line of the file -> the lines of the innermost statement (a compound one's header) that holds it;
    {} when the file does not parse."""
    out: dict[int, tuple[int, ...]] = {}
    for node in ast.walk(tree) if tree is not None else []:
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        body = getattr(node, "body", None)
        end = max(node.lineno, body[0].lineno - 1) if isinstance(body, list) and body else node.end_lineno
        lines = tuple(range(node.lineno, end + 1))
        for n in lines:
            if n not in out or len(lines) < len(out[n]):
                out[n] = lines
    return out


def _signatures(tree: ast.Module | None) -> dict[int, int]:
    """Each line of a function's decorators and signature -> the first line of its body that runs when it is called
    (a docstring runs no code); {} when the file does not parse."""
    out: dict[int, int] = {}
    for node in ast.walk(tree) if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            body = node.body
            doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
            first = body[1] if doc and len(body) > 1 else body[0]
            top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            for n in range(top, body[0].lineno):
                out[n] = first.lineno
    return out


def _code_lines(text: str | None, numbers: list[int]) -> list[int]:
    """The changed lines that hold code: a blank line or a comment never runs, so it is never "not reached"."""
    if text is None:
        return numbers
    lines = text.splitlines()
    return [
        n for n in numbers if 0 < n <= len(lines) and lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")
    ]


_SIZES = ("max_seq_len", "seq_len", "max_length", "chunk_size", "batch_size", "micro_batch_size", "max_pixels")


def _span(lines: list[int]) -> str:
    return f"{lines[0]}-{lines[-1]}" if len(lines) > 1 else str(lines[0])
