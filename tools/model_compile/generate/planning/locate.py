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


# Hugging Face classes whose module tree is known (checked before the generic VLM hint): the class, the
# targets each path takes, and the model's modules to the second level (relative to the model, complete).
KNOWN_LAYOUTS = [
    (  # transformers >= 5 (4.x nested the blocks as `vit.encoder.layer`)
        r"ViTForImageClassification",
        {"submodule": "vit", "regional": "vit.layers"},
        ("vit", "vit.embeddings", "vit.layers", "vit.layernorm", "classifier"),
    ),
    (
        r"(?:Llama|Qwen2|Qwen3|Mistral)ForCausalLM",
        {"submodule": "model", "regional": "model.layers"},
        ("model", "model.embed_tokens", "model.layers", "model.norm", "model.rotary_emb", "lm_head"),
    ),
]
VLM_HINT = re.compile(r"Qwen\d?(?:_\d)?_?VL|VisionTransformer|\.visual\b|vision_tower|ForConditionalGeneration")
# A Qwen-style VLM (transformers >= 4.52 layout): what the hint implies, not a complete tree.
VLM_LAYOUT = {
    "submodule": "model.language_model",
    "graph-break": "model.visual",
    "regional": "model.language_model.layers",
}
VLM_MODULES = ("model", "model.visual", "model.visual.blocks", "model.language_model", "model.language_model.layers")


@dataclass
class ModelLayout:
    """What the recipe's model code says about the model's module tree, statically."""

    name: str  # the class, or "Qwen-style VLM"
    why: str
    targets: dict[str, str]  # generate path -> target relative to the model
    modules: tuple[str, ...]  # module paths relative to the model
    exact: bool  # a known class (its tree is complete to the second level) or only a family hint

    def has(self, rel: str) -> bool | None:
        """Whether the model has the module `rel` (relative to the model); None: cannot tell."""
        if rel in self.modules or any(m.startswith(rel + ".") for m in self.modules):
            return True
        return False if self.exact else None


# Checkpoints a stage YAML names (`Qwen/Qwen3-8B-Base`, `./pretrained/Qwen3-VL-8B-...`): the class a hub loader
# builds from them, for a recipe whose code names no model class (it builds through a kit's AutoModel call).
HUB_VLM = re.compile(r"Qwen(?:2|2\.5|3)-VL", re.I)
HUB_CAUSAL_LM = re.compile(r"\b(?:Qwen(?:2|2\.5|3)|Llama-?\d|Mistral)-(?!VL)[\w.-]*", re.I)
_PRETRAINED = re.compile(
    r"^\s*(?:pretrained_model_name_or_path|model_name_or_path|pretrained):\s*[\"']?([^\"'#\s]+)", re.M
)


def model_layout(files: RecipeFiles) -> ModelLayout | None:
    """The layout of the model the recipe builds, from the class names its model code uses, else from the
    checkpoint its stage YAMLs name."""
    text = "\n".join(_read(p) for p in sorted(files.recipe.rglob("*.py")) if "tests" not in p.parts)
    for pattern, targets, modules in KNOWN_LAYOUTS:
        m = re.search(pattern, text)
        if m:
            return ModelLayout(
                m.group(0), f"known layout of {m.group(0)} in the recipe's model code", targets, modules, True
            )
    if VLM_HINT.search(text):
        return ModelLayout(
            "Qwen-style VLM", "Qwen-style VLM layout found in the recipe's model code", VLM_LAYOUT, VLM_MODULES, False
        )
    for stage in files.stages:
        for checkpoint in _PRETRAINED.findall(_read(stage)):
            if HUB_VLM.search(checkpoint):
                why = f"Qwen-style VLM checkpoint `{checkpoint}` in {stage.name}"
                return ModelLayout("Qwen-style VLM", why, VLM_LAYOUT, VLM_MODULES, False)
            if HUB_CAUSAL_LM.search(checkpoint):
                _, targets, modules = KNOWN_LAYOUTS[1]
                why = f"causal LM checkpoint `{checkpoint}` in {stage.name} (a Hugging Face *ForCausalLM)"
                return ModelLayout("causal LM", why, targets, modules, True)
    return None


ModelKind = Literal["vision-language", "text", "vision"]
_VISION_WORDS = re.compile(r"pixel_values|image_grid_thw|\bimages?\b|vision", re.I)


def model_kind(files: RecipeFiles) -> tuple[ModelKind, str]:
    """What the recipe's model takes in, statically: a vision-language model, a text model, or an image model;
    with why. A model whose code and configs name no vision part is a text model."""
    layout = model_layout(files)
    if layout is not None:
        if layout.name == "Qwen-style VLM":
            return "vision-language", layout.why
        if "ForCausalLM" in layout.name or layout.name == "causal LM":
            return "text", layout.why
        return "vision", layout.why
    paths = [p for p in sorted(files.recipe.rglob("*.py")) if "tests" not in p.parts] + list(files.stages)
    for path in paths:
        m = _VISION_WORDS.search(_read(path))
        if m:
            return "vision-language", f"`{m.group(0)}` in {files.rel(path)}"
    return "text", "its model code and stage YAMLs name no image or vision input"


@dataclass
class TargetChoice:
    target: str
    inferred: bool
    why: str


def infer_target(files: RecipeFiles, path: str, model_var: str, wrapped_var: str | None) -> TargetChoice | None:
    """A sensible default --target, read statically from the recipe's model code."""
    if path == "kit":
        return TargetChoice(target=model_var, inferred=True, why="the kit compiles the whole model")
    if path == "post-wrap":
        name = wrapped_var or model_var
        return TargetChoice(target=name, inferred=True, why="the module returned by the distributed wrapper")
    layout = model_layout(files)
    if layout is not None and path in layout.targets:
        return TargetChoice(target=f"{model_var}.{layout.targets[path]}", inferred=True, why=layout.why)
    text = "\n".join(_read(p) for p in sorted(files.recipe.rglob("*.py")) if "tests" not in p.parts)
    blocks = _module_lists(text)
    if path == "regional" and blocks:
        return TargetChoice(
            target=f"{model_var}.{blocks[0]}",
            inferred=True,
            why=f"first nn.ModuleList attribute '{blocks[0]}' in the model code",
        )
    return None


def _module_lists(text: str) -> list[str]:
    return re.findall(r"self\.(\w+)\s*=\s*(?:nn\.|torch\.nn\.)?ModuleList\(", text)
