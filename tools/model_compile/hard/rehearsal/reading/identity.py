"""Sites by code identity: a `file:line` of the repository named by the statement there, not its line number.

A change that moves a statement (lines added above it, a block moved down) changes its line number but not
what runs there. Each rehearsal names every repository `file:line` its sites mention (graph breaks,
recompile-limit frames, recompiled frames and their guards, skipped frames; dynamo's resume functions carry a
line in their name, `torch_dynamo_resume_in_forward_at_384`) by the statement that holds the line: its file,
the functions and classes around it, its text with whitespace collapsed, and which of the equal statements in
that scope it is. Head and base sites are compared by that identity, read on each side's own files when its
rehearsal ran: a statement that only moved is the same site; one whose text changed is another.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

# `recipes/x/model.py:12`, `pkg/kit/loss.py:3` (relative to the repository: library frames are named
# `library ...` or `<site-packages>/...` and stay as they are)
_REF = re.compile(r"(?<![\w/.<>-])((?:[\w.-]+/)*[\w.-]+\.py):(\d+)")
_RESUME = re.compile(r"(torch_dynamo_resume_in_\w+?_at_)(\d+)")


def _file_ids(text: str, path: str) -> dict[int, str]:
    """{line: identity} of every line that a statement's head covers."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    lines = text.splitlines()
    scopes: list[tuple[int, int, str, str]] = []

    def walk(body: list[ast.stmt], qual: str) -> None:
        for node in body:
            if node.end_lineno is None:
                continue
            inner = getattr(node, "body", None)
            head_end = max(node.lineno, inner[0].lineno - 1) if isinstance(inner, list) and inner else node.end_lineno
            code = [
                ln.split("  #", 1)[0] for ln in lines[node.lineno - 1 : head_end] if not ln.lstrip().startswith("#")
            ]
            head = " ".join(" ".join(code).split())
            own = (
                f"{qual}.{node.name}".lstrip(".")
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else qual
            )
            scopes.append((node.lineno, head_end, own, head))
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    walk([child], own)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    walk([c for c in child.body if isinstance(c, ast.stmt)], own)

    walk(tree.body, "")
    seen: dict[tuple[str, str], int] = {}
    out: dict[int, str] = {}
    for first, last, qual, head in scopes:  # in source order: the k-th equal statement of a scope is #k
        k = seen.get((qual, head), 0)
        seen[(qual, head)] = k + 1
        digest = hashlib.sha1(head.encode()).hexdigest()[:10]
        ident = f"{path}@{qual or '<module>'}#{digest}.{k}"
        for n in range(first, last + 1):
            out.setdefault(n, ident)  # the outer statement's head wins on its own lines; inner ones start later
    return out


def refs(texts: Iterable[str]) -> set[tuple[str, int]]:
    """Every repository `file:line` the texts mention, and the lines of resume functions named after them."""
    found: set[tuple[str, int]] = set()
    for text in texts:
        paths = [(m.group(1), int(m.group(2))) for m in _REF.finditer(text)]
        found.update(paths)
        if paths:
            found.update((paths[0][0], int(m.group(2))) for m in _RESUME.finditer(text))
    return found


def identities(texts: Iterable[str], repo_root: Path) -> dict[str, str]:
    """{'file:line': identity} for the repository files the texts mention (read from `repo_root`); a line no
    statement covers, or a file that does not read, is left out (compared by its line)."""
    by_file: dict[str, set[int]] = {}
    for path, line in refs(texts):
        by_file.setdefault(path, set()).add(line)
    out: dict[str, str] = {}
    for path, lines in by_file.items():
        file = repo_root / path
        try:
            text = file.read_text(encoding="utf-8", errors="replace") if file.is_file() else None
        except OSError:
            text = None
        if text is None:
            continue
        ids = _file_ids(text, path)
        for line in lines:
            if line in ids:
                out[f"{path}:{line}"] = ids[line]
    return out


def canon(text: str, ids: dict[str, str]) -> str:
    """`text` with every `file:line` it mentions replaced by its identity (and a resume function's line too)."""
    if not ids:
        return text
    first = _REF.search(text)
    if first is not None:
        path = first.group(1)
        text = _RESUME.sub(lambda m: m.group(1) + ids.get(f"{path}:{m.group(2)}", m.group(2)), text)
    return _REF.sub(lambda m: ids.get(f"{m.group(1)}:{m.group(2)}", m.group(0)), text)
