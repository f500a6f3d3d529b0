"""The fast `unparse` writes exactly what `ast.unparse` writes, on every expression of real files."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_compile.parse.python import _simple, literal_of, literal_value, unparse

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted(
    p
    for base in (ROOT / "tools", ROOT / "tests", ROOT / "examples", ROOT / "bench")
    for p in base.rglob("*.py")
    if "__pycache__" not in p.parts
)


def _corpus_nodes() -> Iterator[tuple[Path, ast.AST]]:
    """Every node of every corpus file that parses (some fixtures do not, on purpose)."""
    for path in CORPUS:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            yield path, node


SHAPES = [
    "a",
    "a.b.c",
    "not a.b",
    "not (a and b)",
    "(1).real",
    "x[0]",
    "x[-1]",
    "x['k']",
    'x["it\'s"]',
    "x[a, b]",
    "x[(a, b)]",
    "x[a,]",
    "Literal['a', 'b-c']",
    "x[a, *b]",
    "x[1:2]",
    "f()",
    "f(a, b=c.d)",
    "f(*a, **k)",
    "f(x for x in y)",
    "a.b(c)(d).e[f]",
    "None",
    "True",
    "1.5",
    "1e400",
    "u'x'",
    "'tab\\there'",
    "'é'",
    "b'x'",
    "not not a",
    "-a",
    "a if b else c",
    "f(lambda: 1)",
    "f(a=1, b='x')",
]


@pytest.mark.parametrize("src", SHAPES)
def test_shape_matches_ast_unparse(src: str) -> None:
    node = ast.parse(src, mode="eval").body
    assert unparse(node) == ast.unparse(node)


def test_every_expression_of_the_corpus_matches_ast_unparse() -> None:
    checked = 0
    for path, node in _corpus_nodes():
        if isinstance(node, ast.expr) and (_simple(node) is not None or isinstance(node, ast.UnaryOp)):
            assert unparse(node) == ast.unparse(node), f"{path}:{node.lineno}"
            checked += 1
    assert checked > 10_000


def test_walk_visits_nodes_in_ast_walk_order() -> None:
    """walk stands in for ast.walk: a schema field's type is the first class name found in its annotation."""
    from model_compile.parse.python import walk

    checked = 0
    for path, node in _corpus_nodes():
        if isinstance(node, (ast.AnnAssign, ast.Module)):  # annotations (schema), whole modules (rules, kit)
            target = node.annotation if isinstance(node, ast.AnnAssign) else node
            assert walk(target) == list(ast.walk(target)), f"{path}:{getattr(node, 'lineno', 0)}"
            checked += 1
    assert checked > 500


LITERALS = [
    "1",
    "-1",
    "+1.5",
    "-(1)",
    "--1",
    "'x'",
    "b'x'",
    "None",
    "[1, (2, 3)]",
    "{1: 'a', 'b': [None]}",
    "{1, 2}",
    "set()",
    "set([1])",
    "1+2j",
    "-1-2j",
    "1+2",
    "True + 1j",
    "{**a}",
    "x",
    "f()",
    "-'x'",
    "{[1]}",
    "...",
    "(1, [2, {3: (4,)}])",
]


def _outcome(fn, node):
    try:
        value = fn(node)
    except (ValueError, TypeError, SyntaxError) as exc:
        return type(exc).__name__ if not isinstance(exc, ValueError) else "ValueError"
    return (type(value).__name__, repr(value))


@pytest.mark.parametrize("src", LITERALS)
def test_literal_value_matches_literal_eval(src: str) -> None:
    node = ast.parse(src, mode="eval").body
    assert _outcome(literal_value, node) == _outcome(ast.literal_eval, node)
    assert _outcome(literal_of, src) == _outcome(ast.literal_eval, src)


@pytest.mark.parametrize(
    "src",
    [
        "model = build(cfg.path)\n",
        "name = 'é'; model = build(cfg.path)\n",
        "model = build(\n    'ü', x)\n",
        "model = build(cfg.path,\tx)\n",
        "model = build(cfg.path, '\x0c', '\u2028')\n",
        "model = build(\n    cfg.path,  # note\n    x,\n)\n",
    ],
)
def test_segment_is_the_source_text_of_a_node(src: str) -> None:
    from model_compile.discover.tree import MemoryTree
    from model_compile.parse.python import PyModule, parse_module

    mod = parse_module(MemoryTree({"m.py": src}), "m.py")
    assert isinstance(mod, PyModule)
    call = next(n for n in ast.walk(mod.tree) if isinstance(n, ast.Call))
    expected = " ".join(part.strip() for part in (ast.get_source_segment(src, call) or "").splitlines())
    assert mod.segment(call) == expected


@pytest.mark.parametrize("brk", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\u2029"])
def test_module_lines_are_numbered_as_python_numbers_them(brk: str) -> None:
    """A form feed (a `^L` page break line) or a Unicode separator does not end a Python line."""
    from model_compile.discover.tree import MemoryTree
    from model_compile.parse.python import PyModule, parse_module, source_lines

    page = brk if brk == "\x0c" else f"# a{brk}b"  # a form feed may stand alone; the rest only in a comment or string
    src = f"import torch\n{page}\nx = '{brk}'\r\nmodel = build(cfg)\rmodel.compile(backend='eager')\n"
    mod = parse_module(MemoryTree({"m.py": src}), "m.py")
    assert isinstance(mod, PyModule)
    assert len(mod.lines) == len(source_lines(src)) == 5
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Call):
            assert mod.segment(node) in mod.line(node.lineno)
    assert mod.line(5) == "model.compile(backend='eager')"


def test_yaml_lines_break_where_yaml_does() -> None:
    """YAML also ends lines at NEL, LS and PS, never at a form feed or vertical tab."""
    import yaml

    from model_compile.parse.documentation import yaml_lines

    assert yaml_lines("a: 1\x85b: 2\u2028c: 3\r\nd: 4\n") == ["a: 1", "b: 2", "c: 3", "d: 4"]
    assert yaml_lines("a: 1 # x\x0cy\nb: 2\n") == ["a: 1 # x\x0cy", "b: 2"]
    text = "a: 1\x85b: 2\u2028c: [3\r\n  ]\n"
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    marks = [v.start_mark.line for _, v in node.value]
    assert [yaml_lines(text)[m].split(":")[0] for m in marks] == ["a", "b", "c"]


def test_a_recipe_that_warns_when_parsed_prints_nothing() -> None:
    """An invalid escape in a recipe warns at parse time; the review keeps quiet, in one parse and in many."""
    import warnings

    from model_compile.analyze import analyze_tree
    from model_compile.discover.tree import MemoryTree
    from model_compile.parse.python import PyModule, parse_module

    src = 'import re\nPATTERN = re.compile("\\d+")\n'
    tree = MemoryTree({"recipes/r/engine/e.py": src, "recipes/r/configs/schema.py": src})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert isinstance(parse_module(tree, "recipes/r/engine/e.py"), PyModule)
        assert analyze_tree(tree).recipes[0].name == "r"
        assert seen == [], [str(w.message) for w in seen]
        warnings.warn("after the review", UserWarning, stacklevel=1)  # the filters are the caller's again
    assert [str(w.message) for w in seen] == ["after the review"]
