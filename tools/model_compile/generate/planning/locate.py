"""Find, statically, the files of a recipe and the facts the edits depend on.

Nothing here imports the target repo or torch: files are read as text and
parsed with `ast`.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from model_compile.discover.recipes import repo_root_of
from model_compile.discover.tree import read_regular
from model_compile.errors import InputError
from model_compile.ledger.models import Ledger
from model_compile.parse.model_source import Resolver, recipe_model_class
from model_compile.parse.model_tree import ModelTree, build_tree

SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", "site-packages", ".tox"}
KIT_CLASS = "MLLMModelKit"


@dataclass
class RecipeFiles:
    recipe: Path
    root: Path  # repository root (git top level, or the folder above recipes/)
    readme: Path
    engines: list[Path] = field(default_factory=list)
    schema: Path | None = None
    stages: list[Path] = field(default_factory=list)

    def rel(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return path.as_posix()


def repo_root(recipe: Path) -> Path:
    """The recipe's repository (its `recipes/` layout first, then the git top level)."""
    recipe = recipe.resolve()
    found = repo_root_of(recipe)
    if found is not None:
        return found
    for parent in [recipe, *recipe.parents]:
        if (parent / ".git").exists():
            return parent
    return recipe


def find_recipe_files(recipe: Path) -> RecipeFiles:
    recipe = recipe.resolve()
    engine_dir = recipe / "engine"
    candidates = sorted(engine_dir.glob("*.py")) if engine_dir.is_dir() else sorted(recipe.glob("*engine*.py"))
    engines = [p for p in candidates if re.search(r"def\s+prepare_model\s*\(", _read(p))]
    if not engines:
        raise InputError(f"no engine with prepare_model() under {recipe}/engine")
    schema = recipe / "configs" / "schema.py"
    stages = sorted(p for p in (recipe / "configs").glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    return RecipeFiles(
        recipe=recipe,
        root=repo_root(recipe),
        engines=engines,
        schema=schema if schema.is_file() else None,
        stages=stages,
        readme=recipe / "README.md",
    )


def read_text(path: Path) -> str:
    """Text of a regular file within the default size cap, else ""."""
    return _read(path)


def _read(path: Path) -> str:
    """Text of a regular file within the default size cap, else "" (never blocks on a FIFO or device)."""
    data, _ = read_regular(path)
    try:
        return data.decode("utf-8") if data else ""
    except UnicodeDecodeError:
        return ""


def _py_files(root: Path) -> Iterator[Path]:
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(d.iterdir())
        except OSError:
            continue
        for e in entries:
            if e.is_dir() and not e.is_symlink():  # symlinked folders are not followed (no loops)
                if e.name not in SKIP_DIRS and not e.name.startswith("."):
                    stack.append(e)
            elif e.suffix == ".py":
                yield e


@dataclass
class KitImport:
    module: str
    name: str = KIT_CLASS


def find_kit_import(root: Path, kit_class: str = KIT_CLASS) -> KitImport | None:
    """Where recipes import the kit from (most common absolute import), else its defining module."""
    used: Counter[str] = Counter()
    defined: list[str] = []
    pattern = re.compile(rf"\b{kit_class}\b")
    for path in _py_files(root):
        text = _read(path)
        if not pattern.search(text):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == kit_class:
                defined.append(_module_name(root, path))
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if any(a.name == kit_class for a in node.names) and "recipes" in path.relative_to(root).parts:
                    used[node.module] += 1
    if not defined:
        return None
    if used:
        return KitImport(module=used.most_common(1)[0][0], name=kit_class)
    return KitImport(module=defined[0], name=kit_class)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


VLM_HINT = re.compile(r"Qwen\d?(?:_\d)?_?VL|VisionTransformer|\.visual\b|vision_tower|ForConditionalGeneration")
# Checkpoints a stage YAML names (`Qwen/Qwen3-8B-Base`, `./pretrained/Qwen3-VL-8B-...`): what kind of model a hub
# loader builds from them, for a recipe whose code names no model class (only to choose a kit class by its kind).
HUB_VLM = re.compile(r"Qwen(?:2|2\.5|3)-VL", re.I)
HUB_CAUSAL_LM = re.compile(r"\b(?:Qwen(?:2|2\.5|3)|Llama-?\d|Mistral)-(?!VL)[\w.-]*", re.I)
_PRETRAINED = re.compile(
    r"^\s*(?:pretrained_model_name_or_path|model_name_or_path|pretrained):\s*[\"']?([^\"'#\s]+)", re.M
)


@dataclass
class ModelLayout:
    """The recipe's model as its code defines it: the class, where it was read, and its module tree."""

    name: str  # the model's class
    why: str
    tree: ModelTree
    source: str  # where its code was read: the recipe's model code, or `transformers X in ...`

    def has(self, rel: str) -> bool | None:
        """Whether the model has the module `rel` (relative to the model); None: cannot tell."""
        return self.tree.has(rel)

    def block_containers(self, exclude: list[str] | None = None) -> list[str]:
        """The containers of the model's repeated blocks (relative to the model): those of its FSDP units
        (`_no_split_modules`) when it names any, else every container of blocks; less the regions in `exclude`."""
        containers = [
            c
            for c in self.tree.containers()
            if not any(c.path == x or c.path.startswith(x + ".") for x in exclude or [])
        ]
        units = [
            c for c in containers if (e := self.tree.element(c.path)) and e.cls.rsplit(".", 1)[-1] in self.tree.no_split
        ]
        return [c.path for c in (units or containers)]

    def holder(self, container: str) -> str | None:
        """The nearest module above `container` that holds more than it (the stack's model: `model.language_model`)."""
        parts = container.split(".")
        for i in range(len(parts) - 1, 0, -1):
            path = ".".join(parts[:i])
            if len(self.tree.children(path)) > 1:
                return path
        return None


def builder_of(ledgers: list[Ledger]) -> str | None:
    """The call prepare_model() builds its model with (`build_vit_model`, `self.model_kit.build_model`)."""
    built = [e for lg in ledgers for e in lg.of("build") if e.reachable]
    return built[0].call.split("(")[0].split("=")[-1].strip() if built else None


def model_files(files: RecipeFiles) -> list[Path]:
    """The recipe's model code: its Python files outside tests/."""
    return [p for p in sorted(files.recipe.rglob("*.py")) if "tests" not in p.relative_to(files.recipe).parts]


def model_layout(
    files: RecipeFiles, kit_files: list[Path] | None = None, builder: str | None = None, only: list[str] | None = None
) -> ModelLayout | None:
    """The recipe's model class and module tree, read from its model code or the transformers of its environment
    (`parse/model_source.py`); None when neither names a class the tool can read. `kit_files`: the kit modules
    whose `AutoModel*` builder a checkpoint goes through; `builder`: the function prepare_model() builds with;
    `only`: the stages whose checkpoints count (default every stage)."""
    stages = {p.name: _read(p) for p in files.stages if only is None or p.stem in only}
    kits = list(kit_files or [])
    found = recipe_model_class(files.root, model_files(files), stages, kits, builder)
    if found is None and builder is not None:  # a builder the tool could not follow: any class of the model code
        found = recipe_model_class(files.root, model_files(files), stages, kits)
    if found is None:
        return None
    tree = build_tree(Resolver(files.root, found.transformers), found.ref)
    return ModelLayout(found.ref.name, found.why, tree, found.source)


ModelKind = Literal["vision-language", "text", "vision"]
_VISION_WORDS = re.compile(r"pixel_values|image_grid_thw|\bimages?\b|vision", re.I)


def model_kind(files: RecipeFiles) -> tuple[ModelKind, str]:
    """What the recipe's model takes in, statically: a vision-language model, a text model, or an image model;
    with why. A model whose code and configs name no vision part is a text model."""
    text = "\n".join(_read(p) for p in model_files(files))
    m = VLM_HINT.search(text)
    if m:
        return "vision-language", f"`{m.group(0)}` in the recipe's model code"
    for stage in files.stages:
        for checkpoint in _PRETRAINED.findall(_read(stage)):
            if HUB_VLM.search(checkpoint):
                return "vision-language", f"checkpoint `{checkpoint}` in {stage.name}"
            if HUB_CAUSAL_LM.search(checkpoint):
                return "text", f"causal LM checkpoint `{checkpoint}` in {stage.name}"
    causal = re.search(r"\b\w+ForCausalLM\b", text)
    if causal:
        return "text", f"`{causal.group(0)}` in the recipe's model code"
    paths = model_files(files) + list(files.stages)
    for path in paths:
        m = _VISION_WORDS.search(_read(path))
        if m:
            kind: ModelKind = "vision" if re.search(r"ForImageClassification|num_classes", text) else "vision-language"
            return kind, f"`{m.group(0)}` in {files.rel(path)}"
    return "text", "its model code and stage YAMLs name no image or vision input"


@dataclass
class TargetChoice:
    target: str
    inferred: bool
    why: str


def infer_target(
    path: str, model_var: str, wrapped_var: str | None, layout: ModelLayout | None, exclude: list[str] | None = None
) -> TargetChoice | None:
    """A sensible default --target (one or more, comma-joined), read statically from the recipe's model.
    `exclude`: regions (relative to the model) kept eager on purpose (the repository's kit disables them), never
    proposed as blocks."""
    if path == "kit":
        return TargetChoice(target=model_var, inferred=True, why="the kit compiles the whole model")
    if path == "post-wrap":
        name = wrapped_var or model_var
        return TargetChoice(target=name, inferred=True, why="the module returned by the distributed wrapper")
    if layout is None:
        return None
    containers = layout.block_containers(exclude)
    why = f"the repeated blocks of {layout.name}, read as said above"
    if path == "regional" and containers:
        return TargetChoice(",".join(f"{model_var}.{c}" for c in containers), True, why)
    if path == "submodule" and containers and (holder := layout.holder(containers[0])):
        return TargetChoice(f"{model_var}.{holder}", True, f"the module holding {why}")
    if path == "graph-break":
        present = [x for x in exclude or [] if layout.has(x)]
        if present:
            return TargetChoice(f"{model_var}.{present[0]}", True, f"the region the kit keeps eager: {layout.why}")
    return None


def check_exists(target: str, model_var: str, layout: ModelLayout | None, kind: str) -> None:
    """Refuse a target the model's code shows it does not have (one line, the modules it has instead)."""
    if layout is None or kind == "post-wrap" or not target.startswith(model_var + "."):
        return
    rel = target[len(model_var) + 1 :]
    if layout.has(rel) is not False:
        return
    parent = rel.rsplit(".", 1)[0] if "." in rel else ""
    while parent and layout.has(parent) is False:
        parent = parent.rsplit(".", 1)[0] if "." in parent else ""
    have = ", ".join(c.path.rsplit(".", 1)[-1] for c in layout.tree.children(parent)) or "none"
    where = f"`{model_var}.{parent}`" if parent else f"`{model_var}`"
    raise InputError(f"--target {target}: {layout.name} has no module `{rel}` ({layout.why}); {where} has: {have}")
