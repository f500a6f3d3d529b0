"""Parse Python files of a recipe once, without importing them."""

from __future__ import annotations

import ast
import io
import tokenize
import warnings
from dataclasses import dataclass, field

from model_compile.discover.tree import SourceTree, read_text


@dataclass
class PyModule:
    """A parsed file: tree, lines and comments (line -> text after '#'; only
    collected from files that mention model-compile, the one note read)."""

    path: str
    text: str
    tree: ast.Module
    lines: list[str]
    comments: dict[int, str] = field(default_factory=dict)

    def line(self, lineno: int) -> str:
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1].strip()
        return ""

    def segment(self, node: ast.AST) -> str:
        """One-line source text of a node (first line, trimmed)."""
        seg = self._segment(node)
        seg = " ".join(part.strip() for part in seg.splitlines())
        return seg if len(seg) <= 160 else seg[:157] + "..."

    def _segment(self, node: ast.AST) -> str:
        """Source of a node from the split lines (ast.get_source_segment re-splits the file each call)."""
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if start is None or end is None or not (1 <= start <= end <= len(self.lines)):
            return ""
        c0, c1 = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        rows = [ln.encode("utf-8") for ln in self.lines[start - 1 : end]]
        if len(rows) == 1:
            return rows[0][c0:c1].decode("utf-8", "replace")
        rows[0], rows[-1] = rows[0][c0:], rows[-1][:c1]
        return "\n".join(r.decode("utf-8", "replace") for r in rows)


@dataclass
class ParseFailure:
    """A file that could not be parsed: reported as MC000."""

    path: str
    line: int
    message: str


def _tokenized_comments(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string[1:].strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _comments(text: str, module: ast.Module, lines: list[str]) -> dict[int, str]:
    """Line -> comment body, as the tokenizer finds them, without tokenizing the whole file.

    The parsed module says which lines a multi-line string touches; on every
    other line a `#` with no quote before it starts a comment, and a line
    with quotes before its `#` is tokenized alone. A `#` on a line a
    multi-line string touches falls back to tokenizing the file.
    """
    out: dict[int, str] = {}
    if "model-compile" not in text:  # only `# model-compile:` notes are read from comments
        return out
    # Only a triple-quoted string, or a backslash-newline inside a string, can hold a line break;
    # implicitly joined pieces (`("a"` newline `"b")`) are whole strings on each line. Without
    # either, no line starts inside a string and the tree need not be walked.
    spans: list[tuple[int, int]] = []
    if "'''" in text or '"""' in text or "\\\n" in text:
        spans = [
            (n.lineno, n.end_lineno or n.lineno)
            for n in ast.walk(module)
            if isinstance(n, (ast.Constant, ast.JoinedStr)) and (n.end_lineno or n.lineno) != n.lineno
        ]
    touched = {i for a, b in spans for i in range(a, b + 1)}
    for i, line in enumerate(lines, 1):
        hash_at = line.find("#")
        if hash_at < 0:
            continue
        if i in touched:
            return _tokenized_comments(text)
        head = line[:hash_at]
        if "'" not in head and '"' not in head:
            out[i] = line[hash_at + 1 :].strip()
            continue
        found = _tokenized_comments(line + "\n")
        if found:
            out[i] = found[1]
    return out


def parse_module(tree: SourceTree, path: str) -> PyModule | ParseFailure | None:
    """Parse one file; None when it does not exist."""
    text, problem = read_text(tree, path)
    if text is None:
        return None if problem == "missing" else ParseFailure(path, 1, f"cannot read {path}: {problem}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = ast.parse(text, filename=path)
    except SyntaxError as exc:
        return ParseFailure(path, exc.lineno or 1, f"{path} does not parse: {exc.msg}")
    except (ValueError, RecursionError) as exc:
        return ParseFailure(path, 1, f"{path} does not parse: {exc}")
    lines = text.splitlines()
    return PyModule(path, text, module, lines, _comments(text, module, lines))


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for Name/Attribute chains, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None
