"""Parse Python files of a recipe once, without importing them."""

from __future__ import annotations

import ast
import hashlib
import io
import tokenize
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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
        seg = seg.strip() if seg.isprintable() else " ".join(part.strip() for part in seg.splitlines())
        return seg if len(seg) <= 160 else seg[:157] + "..."

    def _segment(self, node: ast.AST) -> str:
        """Source of a node from the split lines (ast.get_source_segment re-splits the file each call)."""
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if start is None or end is None or not (1 <= start <= end <= len(self.lines)):
            return ""
        c0, c1 = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        if start == end and self.lines[start - 1].isascii():  # offsets are bytes; in ASCII, characters
            return self.lines[start - 1][c0:c1]
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


def _multiline_strings(module: ast.Module) -> list[tuple[int, int]]:
    """(first, last) line of every string constant that spans lines.

    Walks only into nodes that span lines themselves: a node on one line
    cannot hold a string that spans several.
    """
    spans: list[tuple[int, int]] = []
    todo: list[ast.AST] = list(module.body)
    while todo:
        node = todo.pop()
        start = getattr(node, "lineno", None)
        end = getattr(node, "end_lineno", None)
        if start is not None and end is not None and start == end:
            continue
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            if start is not None and end is not None:
                spans.append((start, end))
            if isinstance(node, ast.Constant):
                continue
        todo.extend(ast.iter_child_nodes(node))
    return spans


def _comments(text: str, module: ast.Module, lines: list[str]) -> dict[int, str]:
    """Line -> comment body, as the tokenizer finds them, without tokenizing the whole file.

    The parsed module says which lines a multi-line string touches; on every
    other line a `#` with no quote before it starts a comment, and a line
    with quotes before its `#` is tokenized alone. A `#` on a line a
    multi-line string touches falls back to tokenizing the file.
    """
    out: dict[int, str] = {}
    if not mentions_note(text):  # only `# model-compile:` notes are read from comments
        return out
    # Only a triple-quoted string, or a backslash-newline inside a string, can hold a line break;
    # implicitly joined pieces (`("a"` newline `"b")`) are whole strings on each line. Without
    # either, no line starts inside a string and the tree need not be walked.
    spans: list[tuple[int, int]] = []
    if "'''" in text or '"""' in text or "\\\n" in text:
        spans = _multiline_strings(module)
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


def mentions_note(text: str) -> bool:
    """The text holds `model-compile` in any case: the word every note (`# Model-Compile: ...`) starts with.

    Two substring tests, not a case-blind regex: that scans a file ten times slower.
    """
    return "model-compile" in text or "model-compile" in text.lower()


_quiet = [0]  # how many quiet_parsing() blocks are open


@contextmanager
def quiet_parsing() -> Iterator[None]:
    """Warnings a parse raises (an invalid escape sequence in a recipe) are the recipe's, not ours: ignored.

    One block around many parses spares each its own `catch_warnings`
    (about 6 µs a file).
    """
    _quiet[0] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        _quiet[0] -= 1


def parse_module(tree: SourceTree, path: str) -> PyModule | ParseFailure | None:
    """Parse one file; None when it does not exist."""
    text, problem = read_text(tree, path)
    if text is None:
        return None if problem == "missing" else ParseFailure(path, 1, f"cannot read {path}: {problem}")
    try:
        if _quiet[0]:
            module = ast.parse(text, filename=path)
        else:
            with quiet_parsing():
                module = ast.parse(text, filename=path)
    except SyntaxError as exc:
        return ParseFailure(path, exc.lineno or 1, f"{path} does not parse: {exc.msg}")
    except (ValueError, RecursionError) as exc:
        return ParseFailure(path, 1, f"{path} does not parse: {exc}")
    lines = source_lines(text)
    return PyModule(path, text, module, lines, _comments(text, module, lines))


def source_lines(text: str) -> list[str]:
    """The lines of Python source as Python numbers them: only `\\n`, `\\r\\n` and `\\r` end a line.

    `str.splitlines` also breaks at form feeds, vertical tabs and Unicode line
    separators, which Python takes as characters of the line (a `^L` page
    break line would shift every later line number by one).
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def walk(root: ast.AST) -> list[ast.AST]:
    """`list(ast.walk(root))`, same order, without its nested generators (a third faster on a whole module)."""
    out = [root]
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, ast.AST))
    return out


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for Name/Attribute chains, else None."""
    if isinstance(node, ast.Name):  # the commonest case, first
        return node.id
    if not isinstance(node, ast.Attribute):
        return None
    parts = [node.attr]
    inner = node.value
    while isinstance(inner, ast.Attribute):
        parts.append(inner.attr)
        inner = inner.value
    if isinstance(inner, ast.Name):
        parts.append(inner.id)
        parts.reverse()
        return ".".join(parts)
    return None


def _plain_str(value: str) -> bool:
    """A string `ast.unparse` writes as `repr` writes it: printable, no quote, no backslash."""
    return value.isprintable() and "'" not in value and '"' not in value and "\\" not in value


def _simple(node: ast.AST) -> str | None:
    """`ast.unparse` of the shapes a recipe's calls and tests are mostly made of, else None.

    Names and attribute chains, plain constants, subscripts and calls of those:
    none of them ever needs parentheses, so the text is the same at any
    precedence.
    """
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _simple(node.value)
        if base is None or isinstance(node.value, ast.Constant):  # `1 .real` takes a space
            return None
        return f"{base}.{node.attr}"
    if isinstance(node, ast.Constant):
        value = node.value
        if node.kind is not None:  # u"..."
            return None
        if value is None or isinstance(value, bool) or (type(value) is int and value >= 0):
            return repr(value)
        if type(value) is str and _plain_str(value):
            return repr(value)
        return None
    if isinstance(node, ast.Subscript):
        base = _simple(node.value)
        if base is None or isinstance(node.value, ast.Constant):
            return None
        index = node.slice
        if isinstance(index, ast.Tuple) and len(index.elts) >= 2:  # `Literal["a", "b"]`: no parentheses
            items = [_simple(e) for e in index.elts]
            return None if None in items else f"{base}[{', '.join(items)}]"  # type: ignore[arg-type]
        text = _simple(index)
        return None if text is None else f"{base}[{text}]"
    if isinstance(node, ast.Call):
        func = _simple(node.func)
        if func is None or isinstance(node.func, ast.Constant):
            return None
        parts = []
        for arg in node.args:
            text = _simple(arg)
            if text is None:
                return None
            parts.append(text)
        for kw in node.keywords:
            text = _simple(kw.value)
            if text is None or kw.arg is None:
                return None
            parts.append(f"{kw.arg}={text}")
        return f"{func}({', '.join(parts)})"
    return None


def unparse(node: ast.AST) -> str:
    """`ast.unparse(node)`, without its visitor for the common simple shapes (`not` of one included)."""
    text = _simple(node)
    if text is not None:
        return text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        operand = _simple(node.operand)
        if operand is not None:
            return f"not {operand}"
    return ast.unparse(node)


def _signed_number(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = node.operand
        if isinstance(operand, ast.Constant) and type(operand.value) in (int, float, complex):
            value: Any = operand.value
            return +value if isinstance(node.op, ast.UAdd) else -value
    return _MALFORMED


_MALFORMED = object()


def literal_value(node: ast.AST) -> Any:
    """`ast.literal_eval(node)` for a parsed node, without its nested closures.

    `ast.literal_eval` defines recursive helper functions on every call, and
    each is a reference cycle; soft validation pauses the cycle collector, so
    its own code makes none. Raises ValueError on anything that is not a literal.
    """
    if isinstance(node, ast.Expression):
        node = node.body
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(literal_value(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [literal_value(e) for e in node.elts]
    if isinstance(node, ast.Set):
        return {literal_value(e) for e in node.elts}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set":
        if not node.args and not node.keywords:
            return set()
    if isinstance(node, ast.Dict) and None not in node.keys and len(node.keys) == len(node.values):
        return {literal_value(k): literal_value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left, right = _signed_number(node.left), node.right
        if left is not _MALFORMED and isinstance(right, ast.Constant) and type(right.value) is complex:
            if type(left) in (int, float):
                return left + right.value if isinstance(node.op, ast.Add) else left - right.value
    signed = _signed_number(node)
    if signed is not _MALFORMED:
        return signed
    raise ValueError(f"malformed node or string: {node!r}")


def literal_or(node: ast.AST, default: Any) -> Any:
    """`literal_value(node)`, or `default` when the node is no literal (or nests too deep to evaluate)."""
    try:
        return literal_value(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return default


def literal_of(source: str) -> Any:
    """`ast.literal_eval(source)` for a string (SyntaxError when it does not parse, ValueError when not a literal)."""
    return literal_value(ast.parse(source.lstrip(" \t"), mode="eval").body)


_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_STRIPPED: dict[bytes, str | None] = {}


def _stripped(data: bytes) -> str | None:
    """The module's AST without docstrings, dumped (no line numbers, no comments); None when it does not parse."""
    key = hashlib.sha1(data).digest()
    if key in _STRIPPED:
        return _STRIPPED[key]
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        dumped = None
    else:
        for node in ast.walk(tree):
            if isinstance(node, _DOCSTRING_OWNERS) and node.body:
                first = node.body[0]
                if (
                    isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)
                ):
                    node.body = node.body[1:]
        dumped = ast.dump(tree)
    if len(_STRIPPED) > 4096:
        _STRIPPED.clear()
    _STRIPPED[key] = dumped
    return dumped


def code_changed(old: bytes | None, new: bytes | None) -> bool:
    """False when only comments, blank lines or docstrings differ (either side unreadable or unparsable: True)."""
    if old is None or new is None:
        return True
    if old == new:
        return False
    a, b = _stripped(old), _stripped(new)
    return a is None or b is None or a != b
