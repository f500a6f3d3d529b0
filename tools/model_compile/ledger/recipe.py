"""Everything the rules read about one recipe, parsed once."""

from __future__ import annotations

import ast
import posixpath
from dataclasses import dataclass, field

from model_compile.discover.recipes import RecipeLocation
from model_compile.discover.tree import SourceTree, read_text, unlisted_of
from model_compile.ledger.builder import Callable_, LedgerBuilder, Resolver
from model_compile.ledger.models import Ledger
from model_compile.ledger.repo import RepoFacts
from model_compile.parse.documentation import (
    comment_docs,
    comment_only_lines,
    documented_at,
    ignore_comments,
    readme_docs,
    yaml_comments,
    yaml_lines,
)
from model_compile.parse.models import (
    ConfigFacts,
    Documentation,
    SchemaFacts,
    StageFacts,
    Suppression,
)
from model_compile.parse.python import ParseFailure, PyModule, dotted, parse_module
from model_compile.parse.schema import schema_facts
from model_compile.parse.stages import stage_facts


@dataclass
class RecipeContext:
    """Parsed recipe: modules, ledgers, config, documentation."""

    loc: RecipeLocation
    modules: dict[str, PyModule] = field(default_factory=dict)
    failures: list[ParseFailure] = field(default_factory=list)
    ledgers: list[Ledger] = field(default_factory=list)
    engine_classes: dict[str, tuple[ast.ClassDef, PyModule]] = field(default_factory=dict)
    config: ConfigFacts = field(default_factory=ConfigFacts)
    schema_module: PyModule | None = None
    stage_texts: dict[str, str] = field(default_factory=dict)
    docs: list[Documentation] = field(default_factory=list)
    suppressions: list[Suppression] = field(default_factory=list)
    readme: str | None = None
    repo: RepoFacts = field(default_factory=RepoFacts)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    memo: dict[object, object] = field(default_factory=dict, repr=False)  # what is derived once per recipe

    def documented(self, kind: str, path: str | None, line: int | None) -> Documentation | None:
        """The `# model-compile: <kind>` comment covering `path:line`, if any."""
        if not path or not line or not any(d.source == "comment" and d.file == path for d in self.docs):
            return None  # no note in that file: its comment lines need not be found
        key = ("comment_lines", path)
        if key not in self.memo:
            mod = self.modules.get(path)
            self.memo[key] = comment_only_lines(mod.lines if mod else yaml_lines(self.stage_texts.get(path, "")))
        return documented_at(self.docs, kind, path, line, self.memo[key])  # type: ignore[arg-type]

    def readme_documents(self, kind: str) -> bool:
        """A README Compile section names this kind with a reason."""
        return any(d.source == "readme" and d.kind == kind for d in self.docs)


class _Resolver:
    """Find recipe-local functions by name from a module's own defs and imports.

    A class rather than a recursive closure: a closure that calls itself is a
    reference cycle, which would keep every recipe's trees alive until the
    garbage collector's next full pass.
    """

    def __init__(self, ctx: RecipeContext):
        self.ctx = ctx
        self.cache: dict[tuple[str, str], Callable_ | None] = {}

    def module_for(self, importer: PyModule, level: int, module: str | None) -> PyModule | None:
        ctx = self.ctx
        if level:
            base = posixpath.dirname(importer.path)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
        else:
            if not module:
                return None
            parts = module.split(".")
            if ctx.loc.prefix:
                if "/".join(parts[:2]) != ctx.loc.prefix:
                    return None
                parts = parts[2:]
            else:
                if ctx.loc.name not in parts:
                    return None
                parts = parts[parts.index(ctx.loc.name) + 1 :]
            base = ctx.loc.prefix
            module = ".".join(parts)
        rel = "/".join(p for p in [base, *(module.split(".") if module else [])] if p)
        for cand in (f"{rel}.py", f"{rel}/__init__.py"):
            if cand in ctx.modules:
                return ctx.modules[cand]
        return None

    def __call__(self, mod: PyModule, name: str, hops: int = 0) -> Callable_ | None:
        key = (mod.path, name)
        if key in self.cache:
            return self.cache[key]
        self.cache[key] = None
        found = None
        for node in mod.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                found = Callable_(node, mod, is_method=False)
        if found is None and hops < 3:
            for node in mod.tree.body:
                if isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        if (alias.asname or alias.name) == name:
                            target = self.module_for(mod, node.level, node.module)
                            if target is not None:
                                found = self(target, alias.name, hops + 1)
        self.cache[key] = found
        return found


def _methods(cls: ast.ClassDef, module: PyModule) -> dict[str, Callable_]:
    classes = {n.name: n for n in module.tree.body if isinstance(n, ast.ClassDef)}
    out: dict[str, Callable_] = {}
    chain, seen = [cls], set()
    while chain:
        c = chain.pop(0)
        if c.name in seen:
            continue
        seen.add(c.name)
        for node in c.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in out:
                out[node.name] = Callable_(node, module, is_method=True)
        for base in c.bases:
            name = (dotted(base) or "").split(".")[-1]
            if name in classes:
                chain.append(classes[name])
    return out


def _config_class_name(cls: ast.ClassDef) -> str | None:
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ConfigClass" for t in node.targets
        ):
            return (dotted(node.value) or "").split(".")[-1] or None
    return None


def build_context(
    tree: SourceTree, loc: RecipeLocation, repo: RepoFacts, files: list[str] | None = None
) -> RecipeContext:
    """Parse a recipe's files and walk every engine's prepare_model.

    `files` (the recipe's own paths) saves filtering the whole tree per recipe.
    """
    ctx = RecipeContext(loc=loc, repo=repo)
    if files is None:
        files = [f for f in tree.files() if loc.owns(f)]
    for folder, error in sorted(unlisted_of(tree).items()):
        if folder == loc.prefix or loc.owns(folder):
            ctx.unreadable.append((folder, f"{error} (folder not listed: its files were not reviewed)"))
    for path in files:
        if path.endswith(".py"):
            parsed = parse_module(tree, path)
            if isinstance(parsed, ParseFailure):
                ctx.failures.append(parsed)
            elif parsed is not None:
                ctx.modules[path] = parsed
                ctx.docs.extend(comment_docs(parsed.comments, path))
                ctx.suppressions.extend(ignore_comments(parsed.comments, path))

    resolve: Resolver = _Resolver(ctx)
    root_class = None
    engine_prefix = loc.rel("engine/")
    for path, mod in ctx.modules.items():
        if not path.startswith(engine_prefix):
            continue
        for node in mod.tree.body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name == "prepare_model" for b in node.body
            ):
                ctx.engine_classes[node.name] = (node, mod)
                root_class = root_class or _config_class_name(node)
                try:
                    ctx.ledgers.append(LedgerBuilder(node, mod, _methods(node, mod), resolve).build())
                except RecursionError:
                    ctx.failures.append(
                        ParseFailure(
                            path, node.lineno, f"{path}: {node.name}.prepare_model() is nested too deeply to analyse"
                        )
                    )

    schema_path = loc.rel("configs/schema.py")
    ctx.schema_module = ctx.modules.get(schema_path)
    if ctx.schema_module is not None:
        ctx.config.schema_ = schema_facts(ctx.schema_module, root_class)
    else:
        failed = [f for f in ctx.failures if f.path == schema_path]
        missing = (
            ("cannot be read" if failed[0].message.startswith("cannot read") else "does not parse")
            if failed
            else "is missing"
        )
        ctx.config.schema_ = SchemaFacts(file=schema_path, problems=[f"configs/schema.py {missing}"])

    for path in files:
        if (
            path.startswith(loc.rel("configs/"))
            and path.endswith((".yaml", ".yml"))
            and path.count("/") == loc.rel("configs/x").count("/")
        ):
            text, problem = read_text(tree, path)
            name = posixpath.basename(path).rsplit(".", 1)[0]
            if text is None:
                ctx.config.stages.append(StageFacts(file=path, name=name, problems=[f"cannot be read: {problem}"]))
                continue
            ctx.stage_texts[path] = text
            ctx.config.stages.append(stage_facts(text, path, name))
            comments = yaml_comments(text)
            ctx.docs.extend(comment_docs(comments, path))
            ctx.suppressions.extend(ignore_comments(comments, path))

    readme_path = loc.rel("README.md")
    text, problem = read_text(tree, readme_path)
    if text is not None:
        ctx.readme = text
        ctx.docs.extend(readme_docs(text, readme_path))
    elif problem != "missing":
        ctx.unreadable.append((readme_path, problem or "unreadable"))
    return ctx
