"""Keys across the change: what a checkpoint is keyed by at the head against the base, and what that breaks.

Compiled against eager (judge._keys) says whether compile changes the keys. A change can rename them without
compile: a checkpoint wrapper around a block (`..._checkpoint_wrapped_module.q_proj.weight`), a module moved.
The compiled twin records, on rank 0, the keys of each form a checkpoint takes: `parameters` (named_parameters),
`state_dict`, `dcp` (get_model_state_dict) and, after its optimizer steps, `optimizer` (get_optimizer_state_dict's
state) and `optimizer_by_name` (the parameters holding optimizer state, by name). Head and base lists are
compared here; the first differences are paired (base name -> head name), and the repository's own save and
resume calls of that form (read statically from the files the recipe's run imports) say which path breaks: a
checkpoint saved before the change does not resume after it.

A rename is needs changes unless the change documents it: a `# model-compile: keys - <reason>` comment in a file
the change touches.
"""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path
from typing import Any

FORMS = {
    "parameters": "parameter names",
    "state_dict": "state_dict keys",
    "dcp": "distributed-checkpoint keys (get_model_state_dict)",
    "optimizer": "optimizer-state keys (get_optimizer_state_dict)",
    "optimizer_by_name": "optimizer-state entries by parameter name",
}
# which of the repository's checkpoint code each form feeds: `by_name` is code that matches saved state to the
# model by `named_parameters()` names inside a module that saves or resumes checkpoints
_CALLS_OF = {
    "parameters": ("by_name",),
    "optimizer": ("optimizer",),
    "optimizer_by_name": ("by_name",),
    "state_dict": ("state_dict",),
    "dcp": ("dcp",),
}
# torch's checkpoint calls: name -> (what it keys, save or resume)
_API = {
    "get_optimizer_state_dict": ("optimizer", "reads"),
    "set_optimizer_state_dict": ("optimizer", "loads"),
    "get_model_state_dict": ("dcp", "reads"),
    "set_model_state_dict": ("dcp", "loads"),
    "get_state_dict": ("dcp", "reads"),
    "set_state_dict": ("dcp", "loads"),
}
_DOC = re.compile(r"#\s*model-compile:\s*keys\s*[-\u2013\u2014:]+\s*(?P<reason>\S.*)$", re.I)


def lists(recs: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """The key lists of the compiled twin's rank 0 (the eager twin's when the compiled one did not get there)."""
    for twin in ("compiled", "eager"):
        phases = ((recs.get(twin) or [{}])[0].get("phases") or {}) if recs.get(twin) else {}
        model = (phases.get("model") or {}).get("keys") or {}
        after = phases.get("keys") or {}
        found = {k: model.get(k) for k in ("parameters", "state_dict", "dcp")}
        found.update({k: after.get(k) for k in ("optimizer", "optimizer_by_name")})
        out = {k: [str(x) for x in v] for k, v in found.items() if isinstance(v, list)}
        if out:
            return out
    return {}


def _pairs(gone: list[str], new: list[str], limit: int = 3) -> list[str]:
    """The first renames: each base name with the head name closest to it."""
    out = []
    left = list(new)
    for name in gone[:limit]:
        best = difflib.get_close_matches(name, left, n=1, cutoff=0.5)
        out.append(f"{name!r} -> {best[0]!r}" if best else f"{name!r} -> (none)")
        if best:
            left.remove(best[0])
    return out


def across(head: dict[str, list[str]], base: dict[str, list[str]]) -> dict[str, str]:
    """{form: how its keys differ from the base's} for each form measured on both sides that differs."""
    out: dict[str, str] = {}
    for form, words in FORMS.items():
        h, b = head.get(form), base.get(form)
        if h is None or b is None or set(h) == set(b):
            continue
        gone, new = sorted(set(b) - set(h)), sorted(set(h) - set(b))
        text = f"{words}: {len(b)} at the base, {len(h)} at the head; {len(gone)} of the base's are gone"
        text += f", {len(new)} new" if new else ""
        if gone:
            text += f" (first: {'; '.join(_pairs(gone, new))})"
        elif new:
            text += f" (first new: {', '.join(repr(n) for n in new[:3])})"
        out[form] = text
    return out


def _callee(node: ast.Call) -> tuple[str, str]:
    """(name called, the name of what it is called on) of a call: `dcp.save(...)` -> ('save', 'dcp')."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id, ""
    if isinstance(func, ast.Attribute):
        value = func.value
        owner = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else ""
        return func.attr, owner
    return "", ""


def _kind_of(node: ast.Call) -> tuple[str, str] | None:
    """(form, saves/resumes) of a checkpoint call of torch's, or None."""
    name, owner = _callee(node)
    if name in _API:
        return _API[name]
    if name in ("save", "load") and (owner == "dcp" or owner.endswith("checkpoint")):
        return "dcp", "saves" if name == "save" else "loads"
    low = owner.lower()
    if name == "load_state_dict" and "optim" in low:
        return "optimizer", "loads"
    if name == "load_state_dict" and ("model" in low or "module" in low):
        return "state_dict", "loads"
    if name == "save" and owner == "torch" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Call) and _callee(arg)[0] == "state_dict":
            target = _callee(arg)[1].lower()
            return ("optimizer" if "optim" in target else "state_dict"), "saves"
    return None


def _functions(tree: ast.Module) -> list[tuple[int, int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
            out.append((node.lineno, node.end_lineno, node.name))
    return out


def checkpoint_calls(repo_root: Path, recipe_root: Path) -> list[dict[str, Any]]:
    """The repository's own save and resume calls (torch's checkpoint APIs) in the files the recipe's run
    imports, read statically: {form, does (saves, reads, loads, matches), site ('file:line'), function, call};
    `by_name` (matches) is a `named_parameters()` call in a module that saves or loads checkpoints."""
    tree, closure = run_closure(repo_root, recipe_root)
    out = []
    for path in closure:
        data = tree.read_bytes(path)
        if data is None or b"state_dict" not in data and b"checkpoint" not in data:
            continue
        try:
            parsed = ast.parse(data)
        except (SyntaxError, ValueError):
            continue
        functions = _functions(parsed)
        mine: list[dict[str, Any]] = []
        by_name: list[dict[str, Any]] = []
        for node in ast.walk(parsed):
            if not isinstance(node, ast.Call):
                continue
            inside = [f for f in functions if f[0] <= node.lineno <= f[1]]
            function = min(inside, key=lambda f: f[1] - f[0])[2] if inside else "<module>"
            found = _kind_of(node)
            if found is not None:
                site = f"{path}:{node.lineno}"
                mine.append({"form": found[0], "does": found[1], "site": site, "function": function})
                mine[-1]["call"] = _callee(node)[0]
            elif _callee(node)[0] == "named_parameters":
                site = f"{path}:{node.lineno}"
                by_name.append({"form": "by_name", "does": "matches", "site": site, "function": function})
                by_name[-1]["call"] = "named_parameters"
        out += mine + (by_name if mine else [])  # by name only in a module that saves or resumes checkpoints
    return out


def run_closure(repo_root: Path, recipe_root: Path) -> tuple[Any, list[str]]:
    """(the repository's tracked files, the Python files the recipe's run imports, read statically from its own
    non-test files: sorted paths from `repo_root`); no files when the recipe lies outside `repo_root`."""
    from model_compile.parse.imports import ImportGraph

    tree = _Tracked(repo_root)
    try:
        rel = recipe_root.resolve().relative_to(repo_root.resolve()).as_posix()
    except ValueError:
        return tree, []
    graph = ImportGraph(tree)
    roots = [p for p in graph.py if p.startswith(rel + "/") and "/tests/" not in p]
    return tree, sorted(graph.closure(roots))


class _Tracked:
    """The repository's files as git tracks them (no walk through environments or data), read from disk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        if self._files is None:
            import subprocess

            done = subprocess.run(
                ["git", "-C", str(self.root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            if done.returncode == 0:
                self._files = sorted(p for p in done.stdout.split("\0") if p)
            else:
                from model_compile.discover.tree import DiskTree

                self._files = DiskTree(self.root).files()
        return self._files

    def read_bytes(self, path: str) -> bytes | None:
        from model_compile.discover.tree import read_regular

        data, _ = read_regular(self.root / path, self.root, max_bytes=None)
        return data


def breaks(form: str, calls: list[dict[str, Any]]) -> str:
    """Which of the repository's save/resume paths a difference in `form` breaks, in words ('' when none)."""
    wanted = _CALLS_OF.get(form, ())
    mine = [c for c in calls if c["form"] in wanted]
    if not mine:
        return ""
    saves = [c for c in mine if c["does"] in ("saves", "reads")][:2]
    resumes = [c for c in mine if c["does"] == "loads"][:2]
    matches = [c for c in mine if c["does"] == "matches"][:2]
    said = [f"{c['site']} ({c['function']}) {c['does']} it with {c['call']}" for c in saves + resumes]
    said += [f"{c['site']} ({c['function']}) matches saved state to parameters by name" for c in matches]
    return "a checkpoint saved before the change does not resume after it as saved: " + "; ".join(said)


def documented(repo_root: Path, files: list[str]) -> str | None:
    """`file:line: reason` of a `# model-compile: keys - <reason>` comment in the files the change touches."""
    for rel in sorted(files):
        try:
            text = (repo_root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            m = _DOC.search(line)
            if m and len(m.group("reason").split()) >= 3:
                return f"{rel}:{number}: {m.group('reason').strip()}"
    return None
