"""Repository-wide facts read outside the recipes: the kit's compile and
whether the repository's wrapper shards block by block (FSDP2)."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from model_compile.discover.tree import SourceTree, decode_text
from model_compile.ledger.aliases import getattr_as_attribute
from model_compile.ledger.classify import classify_call
from model_compile.parse.python import dotted, unparse, walk


class KitFacts(BaseModel):
    """Where the repository's model kit defines `apply_model_compile`."""

    file: str
    line: int
    class_name: str
    in_place: bool = Field(description="compiles with module.compile() (keys unchanged)")
    disables: list[str] = Field(default_factory=list, description="regions it wraps in compiler.disable")
    found_by: dict[str, str] = Field(
        default_factory=dict,
        description="region -> the condition the kit tests before disabling it, e.g. hasattr(model, 'model')",
    )
    model_param: str = Field(
        default="model", description="the name of its model parameter (what `disables` start with)"
    )
    end_line: int = Field(default=0, description="last line of the method")
    call_line: int | None = Field(default=None, description="line of its compile call (`torch.compile`, `.compile`)")
    call: str = Field(default="", description="its compile call, one line of source")
    options: dict[str, str] = Field(
        default_factory=dict, description="keyword arguments of its compile call, as source text"
    )
    params: list[str] = Field(default_factory=list, description="the method's parameters (self excluded)")
    digest: str = Field(default="", description="hash of the method's code (comments and layout excluded)")


@dataclass(frozen=True)
class KeyReader:
    """A place in the shared code that reads a model's parameter names: a save, an unwrap, a DCP state dict."""

    kind: str  # "module-save": `<x>.module.state_dict()`; "unwrap": `getattr(x, "_orig_mod", x)`; "dcp"
    file: str
    line: int
    text: str


@dataclass
class RepoFacts:
    """Repository-wide facts: the kit's compile, wrappers that shard per block, code that reads parameter names."""

    kit: list[KitFacts] = field(default_factory=list)
    per_block_wrappers: set[str] = field(default_factory=set)
    key_readers: list[KeyReader] = field(default_factory=list)


# What reads the names an OptimizedModule prefixes with `_orig_mod.`: a DDP-style save of the wrapped module's
# state_dict, an unwrap that looks at the outermost module only, and DCP's get_model_state_dict (which drops it).
_READERS = (
    ("module-save", re.compile(r"\.module\.state_dict\(\s*\)")),
    ("unwrap", re.compile(r"getattr\(\s*[\w.]+\s*,\s*[\"']_orig_mod[\"']")),
    ("dcp", re.compile(r"\bget_model_state_dict\(")),
)


def _key_readers(path: str, text: str) -> list[KeyReader]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        for kind, pattern in _READERS:
            if pattern.search(code):
                out.append(KeyReader(kind, path, number, " ".join(code.split())))
    return out


def _path_of(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """`model.model.visual` for `visual` (an alias), `getattr(getattr(model, "model"), "visual")` or the attribute chain."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    attribute = node if isinstance(node, ast.Attribute) else getattr_as_attribute(node)
    if attribute is not None:
        base = _path_of(attribute.value, aliases)
        return f"{base}.{attribute.attr}" if base else None
    return None


def _aliases(fn: ast.AST) -> dict[str, str]:
    """Local names bound once to a module path inside the kit method (`visual = model.model.visual`)."""
    out: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found = _path_of(node.value, out)
            if found and "." in found:
                out[node.targets[0].id] = found
    return out


def _kit_facts(path: str, module: ast.Module) -> list[KitFacts]:
    out = []
    for cls in [n for n in walk(module) if isinstance(n, ast.ClassDef)]:
        for fn in cls.body:
            if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "apply_model_compile"):
                continue
            in_place, wrapper, disables = False, False, []
            call: ast.Call | None = None
            found_by: dict[str, str] = {}
            guards = {
                id(n): unparse(branch.test)
                for branch in ast.walk(fn)
                if isinstance(branch, ast.If)
                for stmt in branch.body
                for n in ast.walk(stmt)
            }
            aliases = _aliases(fn)
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                kind, facts = classify_call(node)
                if kind == "compile" and (call is None or node.lineno < call.lineno):
                    call = node
                if kind == "compile" and facts.get("style") == "torch.compile":
                    arg = node.args[0] if node.args else None
                    if not (isinstance(arg, ast.Attribute) and arg.attr == "forward"):
                        wrapper = True
                elif kind == "compile" and facts.get("style") == "inplace":
                    in_place = True
                elif kind == "graph_break" and node.args:
                    target = _path_of(node.args[0], aliases) or unparse(node.args[0])
                    region = target[: -len(".forward")] if target.endswith(".forward") else target
                    disables.append(region)
                    if id(node) in guards:
                        found_by[region] = guards[id(node)]
            params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
            out.append(
                KitFacts(
                    file=path,
                    line=fn.lineno,
                    class_name=cls.name,
                    in_place=in_place and not wrapper,
                    disables=disables,
                    found_by=found_by,
                    model_param=params[0] if params else "model",
                    end_line=getattr(fn, "end_lineno", None) or fn.lineno,
                    call_line=call.lineno if call is not None else None,
                    call=" ".join(unparse(call).split()) if call is not None else "",
                    options={k.arg: unparse(k.value) for k in call.keywords if k.arg} if call is not None else {},
                    params=params,
                    digest=hashlib.sha1(unparse(fn).encode()).hexdigest()[:16],
                )
            )
    return out


def _shards_per_block(module: ast.Module) -> bool:
    """`fully_shard(...)` called inside a loop somewhere in the file (one walk, each node once)."""
    todo: list[tuple[ast.AST, bool]] = [(module, False)]
    while todo:
        node, in_loop = todo.pop()
        if in_loop and isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "fully_shard":
            return True
        inner = in_loop or isinstance(node, (ast.For, ast.While))
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
    return False


def repo_facts(tree: SourceTree) -> RepoFacts:
    """Scan Python files outside recipes/ (cheap text test before parsing)."""
    facts = RepoFacts()
    per_block = False
    for path in tree.files():
        if not path.endswith(".py") or path.startswith("recipes/"):
            continue
        data = tree.read_bytes(path) or b""
        readers = b"state_dict(" in data or b"_orig_mod" in data
        if b"apply_model_compile" not in data and b"fully_shard" not in data and not readers:
            continue
        text, _ = decode_text(data)
        if text is None:
            continue
        if readers:
            facts.key_readers.extend(_key_readers(path, text))
        wants_kit = "def apply_model_compile" in text
        wants_shards = not per_block and "fully_shard" in text
        if not (wants_kit or wants_shards):
            continue
        try:
            module = ast.parse(text)  # once for both questions
        except (SyntaxError, ValueError, RecursionError):
            continue
        if wants_kit:
            facts.kit.extend(_kit_facts(path, module))
        if wants_shards and _shards_per_block(module):
            per_block = True
    if per_block:
        facts.per_block_wrappers = {"parallelize_model", "fully_shard", "apply_fsdp", "apply_fsdp2", "shard_model"}
    return facts
