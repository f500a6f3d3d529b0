"""The package's data flows one way: discover -> parse -> ledger -> rules ->
findings -> render, with the commands on top. Read from the imports (every
`import`, also those inside functions), each unit may import only units on a
lower layer, and the units' import graph has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tools" / "model_compile"

# Lowest layer first. A unit is a subpackage (discover/) or a top-level module (analyze.py).
LAYERS: list[set[str]] = [
    {"errors", "vocabulary", "runtime", "workers", "_templates", "_skill", "__init__"},
    {"settings"},
    {"templating", "skillpack"},
    {"recipe_tests"},
    {"discover"},
    {"parse"},
    {"ledger"},
    {"rules"},
    {"findings"},
    {"analyze", "render"},
    {"generate", "review", "hard"},
    {"report"},
    {"commands", "api"},
    {"cli"},
]
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """`model_compile.ledger.builder` -> `ledger`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _absolute(path: Path, node: ast.ImportFrom) -> str | None:
    """The module an `ImportFrom` reads from, relative imports resolved against `path`'s package."""
    if node.level == 0:
        return node.module
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    if node.level > 1:
        package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _imports(path: Path) -> set[str]:
    """Every module of the package `path` imports, at the top or inside a function: `from pkg import mod` is an
    arrow to `pkg.mod` when `mod` is a module (else to `pkg`), relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("model_compile"))
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node)
            if not module or not module.startswith("model_compile"):
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                out.add(sub if sub in _MODULES else module)
    return out


_MODULES = {_module_name(p) for p in PACKAGE.rglob("*.py")}


def _unit_graph() -> dict[str, dict[str, set[str]]]:
    """{unit: {imported unit: {importing file, ...}}}."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _unit(_module_name(path))
        for target in _imports(path):
            dst = _unit(target)
            if dst != src and target != "model_compile":
                graph.setdefault(src, {}).setdefault(dst, set()).add(str(path.relative_to(PACKAGE)))
    return graph


def test_every_unit_has_a_layer():
    units = {_unit(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert units - set(LAYER_OF) == set(), "add the new unit to LAYERS (and to CONTRIBUTING.md)"


def test_no_import_from_a_later_stage():
    backwards = []
    for src, targets in _unit_graph().items():
        for dst, files in targets.items():
            if LAYER_OF[dst] >= LAYER_OF[src]:
                backwards.append(
                    f"{src} (layer {LAYER_OF[src]}) imports {dst} (layer {LAYER_OF[dst]}) in {sorted(files)}"
                )
    assert not backwards, "\n".join(backwards)


def test_no_import_cycle_between_units():
    graph = {src: set(targets) for src, targets in _unit_graph().items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt) :] + [node, nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, stack + [node]):
                return True
        state[node] = 2
        return False

    for unit in sorted(graph):
        if state.get(unit) is None and visit(unit, []):
            break
    assert not cycle, " -> ".join(cycle)


def _module_graph() -> dict[str, set[str]]:
    """{module: {imported module of the package}} (a package import names its __init__)."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _module_name(path)
        for target in _imports(path):
            if target in modules and target != src:
                graph.setdefault(src, set()).add(target)
    return graph


def test_no_import_cycle_between_modules():
    graph = _module_graph()
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt) :] + [node, nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, stack + [node]):
                return True
        state[node] = 2
        return False

    for module in sorted(graph):
        if state.get(module) is None and visit(module, []):
            break
    assert not cycle, " -> ".join(cycle)


# The rooms of hard/, lowest first: its shared models, the repository's environment, the rehearsal, the layer
# pipeline (which runs the rehearsal as one of its layers).
HARD_ROOMS = ["shared", "env", "rehearsal", "layers"]


def _hard_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["model_compile", "hard"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in HARD_ROOMS else "shared"


def test_hard_rooms_import_one_way():
    backwards = []
    for src, targets in _module_graph().items():
        a = _hard_room(src)
        for dst in targets:
            b = _hard_room(dst)
            if a and b and a != b and HARD_ROOMS.index(b) > HARD_ROOMS.index(a):
                backwards.append(f"{src} ({a}) imports {dst} ({b})")
    assert not backwards, "\n".join(backwards)


def test_no_folder_holds_more_than_twelve_modules():
    crowded = []
    for folder in sorted({p.parent for p in PACKAGE.rglob("*.py")}):
        modules = [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
        if len(modules) > 12:
            crowded.append(f"{folder.relative_to(PACKAGE)}: {len(modules)} modules")
    assert not crowded, "\n".join(crowded)


def test_no_module_is_over_450_lines():
    long = [
        f"{p.relative_to(PACKAGE)}: {n} lines"
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450
    ]
    assert not long, "split along its seams:\n" + "\n".join(long)


def test_only_tests_are_named_like_tests():
    """A product module named test_* is collected, edited and read as a test."""
    named = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("test_*.py")]
    assert not named, named
