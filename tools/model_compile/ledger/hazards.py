"""The repository's code that runs inside compiled targets, and the compile hazards in it that show statically.

Starting from the `forward` of each class a target compiles (the target and the modules inside it, from the
model's module tree), `callgraph.walk` follows what that code calls - through the repository's code and the
transformers of its environment, honouring the module attributes prepare_model()'s patches replace. Of the
functions reached, those of the repository (its own files, not an installed package) are listed with the compile
hazards dynamo meets in them:

* `.item()`, `.tolist()`: a tensor's value read into Python - a graph break (dynamo cannot trace it without
  `capture_scalar_outputs`), and where the value sizes a loop or a shape, a new graph per value (recompiles);
* a data-dependent Python branch or loop: an `if`/`while` test or a `for` range built from such a value (or
  `.any()`, `.all()`, `.nonzero()`): a graph break and a guard per outcome;
* `print(...)`: a graph break;
* a call into code marked `torch.compiler.disable` (or `torch._dynamo.disable`): a graph break by design.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from model_compile.ledger.callgraph import Finder, Fn, Walk, module_patches, walk
from model_compile.ledger.models import Ledger
from model_compile.parse.model_source import parse_file
from model_compile.parse.model_tree import ModelTree

_READS = ("item", "tolist")
_PREDICATES = ("any", "all", "nonzero")
_DISABLE = ("torch.compiler.disable", "torch._dynamo.disable", "compiler.disable", "_dynamo.disable")


@dataclass(frozen=True)
class Hazard:
    file: str  # repository-relative
    line: int
    what: str  # `.item()`, `a Python loop over a value read from a tensor`, `print(...)`

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.what}"


@dataclass
class Patched:
    """A patch prepare_model() applies whose code runs inside a target."""

    patch: str  # the patch call (`apply_packed_fa2_patch`)
    replaces: str  # `modeling_flash_attention_utils._get_unpad_data`
    where: str  # file:line of the replacement
    target: str  # the target it runs inside (its first)
    via: str  # `PanguEmbeddedAttention.forward -> flash_attention_forward -> ... -> _upad_input`


@dataclass
class Inside:
    """What runs inside the targets that the repository wrote, and the hazards in it."""

    patched: list[Patched] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)  # the repository's functions reached (`file:line name`)
    hazards: list[Hazard] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # patches whose code the walk did not reach from any target


def _attr_call(node: ast.AST, names: tuple[str, ...]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names


def _tainted(fn: Fn) -> set[str]:
    """Names the function assigns from a value read out of a tensor (`n = int(x.max().item())`)."""
    out: set[str] = set()
    for node in ast.walk(fn.node):
        if isinstance(node, ast.Assign) and any(_attr_call(n, _READS + _PREDICATES) for n in ast.walk(node.value)):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def scan(fn: Fn, rel: str) -> list[Hazard]:
    """The compile hazards in one function's own body (nested functions scan as their own)."""
    tainted = _tainted(fn)
    out: list[Hazard] = []
    nested = {
        id(n) for d in ast.walk(fn.node) if d is not fn.node and isinstance(d, ast.FunctionDef) for n in ast.walk(d)
    }

    def data(expr: ast.AST) -> bool:
        return any(
            _attr_call(n, _READS + _PREDICATES) or (isinstance(n, ast.Name) and n.id in tainted) for n in ast.walk(expr)
        )

    for node in ast.walk(fn.node):
        if id(node) in nested:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _READS:
            out.append(
                Hazard(rel, node.lineno, f"`.{node.func.attr}()`: a tensor value read into Python (graph break)")
            )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            out.append(Hazard(rel, node.lineno, "`print(...)` (graph break)"))
        elif isinstance(node, (ast.If, ast.While)) and data(node.test):
            kind = "branch" if isinstance(node, ast.If) else "loop"
            out.append(
                Hazard(
                    rel,
                    node.lineno,
                    f"a Python {kind} on a value read from a tensor (graph break, a guard per outcome)",
                )
            )
        elif isinstance(node, ast.For) and data(node.iter):
            out.append(
                Hazard(
                    rel,
                    node.lineno,
                    "a Python loop over a count read from a tensor (graph break; a new graph per count)",
                )
            )
    for deco in fn.node.decorator_list:
        text = ast.unparse(deco.func if isinstance(deco, ast.Call) else deco)
        if text.endswith(_DISABLE):
            out.append(Hazard(rel, deco.lineno, f"marked `{text}`: every call is a graph break"))
    return sorted(set(out), key=lambda h: h.line)


def _rel(root: Path, file: Path) -> str | None:
    """The repository-relative path of the repository's own file; None for an installed package's."""
    try:
        rel = file.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return None if "site-packages" in rel.parts or rel.parts[:1] in ((".venv",), ("venv",)) else rel.as_posix()


def inside(
    finder: Finder,
    root: Path,
    starts: dict[str, list[Fn]],
    patches: list[tuple[str, Fn]],
    attn: str | None,
) -> Inside:
    """What of the repository's code runs inside the targets (`starts`: target -> the forwards it compiles), with
    the hazards in it; `patches`: (patch call, its function) for each patch prepare_model() applies."""
    patched: dict[tuple[Path, str], Fn] = {}
    owner: dict[Fn, str] = {}
    for call, fn in patches:
        for key, replacement in module_patches(finder, fn).items():
            patched[key] = replacement
            owner[replacement] = call
    out = Inside()
    seen: set[Fn] = set()
    for target, forwards in starts.items():
        w: Walk = walk(finder, forwards, patched, attn)
        for replacement, attribute in w.patches.items():
            if replacement in seen:
                continue
            rel = _rel(root, replacement.file) or replacement.file.name
            via = " -> ".join(f.name for f in w.chain(replacement)[:-1])
            out.patched.append(
                Patched(owner.get(replacement, "?"), attribute, f"{rel}:{replacement.node.lineno}", target, via)
            )
        for fn in w.reached:
            mine = _rel(root, fn.file)
            if fn in seen or mine is None:
                continue
            seen.add(fn)
            out.helpers.append(f"{mine}:{fn.node.lineno} {fn.name}")
            out.hazards += scan(fn, mine)
    out.hazards.sort(key=lambda h: (h.file, h.line))
    reached = {p.patch for p in out.patched}
    out.outside = sorted(
        {call for call, _ in patches if call not in reached and any(owner.get(r) == call for r in owner)}
    )
    return out


def _class_forward(finder: Finder, model_files: list[Path], name: str) -> Fn | None:
    for file in model_files:
        if f"class {name}" in (file.read_text(encoding="utf-8", errors="replace") if file.is_file() else ""):
            found = finder.method(file, name, "forward")
            if found is not None:
                return found
    ref = finder.resolver.transformers_class(name)
    return finder.method(ref.file, name, "forward") if ref is not None else None


def target_starts(
    finder: Finder, tree: ModelTree, model_files: list[Path], targets: list[str], exclude: list[str] | None = None
) -> dict[str, list[Fn]]:
    """{target (relative to the model, `*` for each block): the `forward` of each class it compiles - its own and
    every module's inside it, less the regions in `exclude` (kept eager)}."""
    out: dict[str, list[Fn]] = {}
    skip = [f"{x}." for x in exclude or []]
    for target in targets:
        prefix = f"{target}." if target else ""
        classes = [
            n.cls.rsplit(".", 1)[-1]
            for p, n in tree.nodes.items()
            if (p == target or p.startswith(prefix)) and n.cls and not any(f"{p}.".startswith(x) for x in skip)
        ]
        forwards = [
            f
            for name in dict.fromkeys(classes)
            if not name.startswith(("nn.", "torch.")) and (f := _class_forward(finder, model_files, name))
        ]
        out[target] = forwards
    return out


def patch_functions(finder: Finder, root: Path, ledgers: list[Ledger]) -> list[tuple[str, Fn]]:
    """(patch call, its function) for each patch prepare_model() reaches: the function called, and the functions it
    is handed by name (`apply_model_patches(model, [patch_attention])`)."""
    out: list[tuple[str, Fn]] = []
    for lg in ledgers:
        for e in lg.of("patch"):
            if not e.reachable:
                continue
            file = root / lg.file if (root / lg.file).is_file() else None
            tree = parse_file(file) if file is not None else None
            call = (
                next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == e.line), None)
                if tree
                else None
            )
            if call is None or file is None:
                continue
            names = [ast.unparse(call.func).rsplit(".", 1)[-1]] + [
                n.id for a in call.args for n in ast.walk(a) if isinstance(n, ast.Name)
            ]
            for name in names:
                resolved = finder.function(file, name)
                node = _defs_fn(*resolved) if resolved is not None else None
                if resolved is not None and node is not None:
                    out.append((name, Fn(resolved[0], node)))
    return out


def _defs_fn(file: Path, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    tree = parse_file(file)
    for node in tree.body if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def describe(ins: Inside, model_var: str, attn: str | None) -> list[str]:
    """The lines generate prints (stderr) and writes (README) about what runs inside the targets."""
    out = []
    with_attn = f", attn_implementation {attn}" if attn else ""
    for p in ins.patched:
        target = f"{model_var}.{p.target}" if p.target else model_var
        out.append(f"`{p.replaces}`, replaced by {p.patch} ({p.where}), runs inside `{target}` ({p.via}{with_attn})")
    if ins.hazards:
        shown = "; ".join(str(h) for h in ins.hazards[:8]) + (
            f"; +{len(ins.hazards) - 8} more" if len(ins.hazards) > 8 else ""
        )
        out.append(f"compile hazards in the repository's code the targets run: {shown}")
    elif ins.helpers:
        out.append(
            f"the repository's code the targets run ({len(ins.helpers)} function(s), e.g. {ins.helpers[0]}): no "
            "compile hazard seen statically (`.item()`, `.tolist()`, data-dependent branches and loops, print, "
            "torch.compiler.disable)"
        )
    elif not ins.patched:
        outside = f"; the repository's patches {', '.join(ins.outside)} run outside them" if ins.outside else ""
        out.append(
            "none of the repository's own code seen running inside them (a static walk of their forwards through "
            f"the model's code and transformers{with_attn}){outside}"
        )
    return out
