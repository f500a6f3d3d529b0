"""Where a recipe's model is defined, read as text: the recipe's own model code, or the transformers package of
the repository's environment.

Nothing is imported: a class is found by parsing the files that define it (`Resolver`). transformers is looked
up in the repository's own environment first (`.venv/`, `venv/` at its root: what its runs import), else in
model-compile's own environment (said so: its version may differ from the repository's). The recipe's model
class comes from its model code (a module class it builds: defined in the recipe, or imported from
transformers), else from the checkpoint a stage YAML names, through the `AutoModel*` class the recipe's kit
builds with and that auto class's mapping in transformers' `models/auto/modeling_auto.py`.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from model_compile.discover.tree import read_regular

_VENVS = (".venv", "venv")


@dataclass(frozen=True)
class Transformers:
    """A transformers package found on this machine: its folder, version and whose environment it is."""

    path: Path
    version: str
    own: bool  # the repository's own environment (else model-compile's)

    @property
    def where(self) -> str:
        env = "the repository's environment" if self.own else "model-compile's environment (the repository has none)"
        return f"transformers {self.version} in {env}"


def _text(path: Path) -> str:
    data, _ = read_regular(path, max_bytes=4_000_000)
    try:
        return data.decode("utf-8") if data else ""
    except UnicodeDecodeError:
        return ""


def _version(package: Path) -> str:
    for info in sorted(package.parent.glob("transformers-*.dist-info")):
        return info.name[len("transformers-") : -len(".dist-info")]
    m = re.search(r"^__version__\s*=\s*[\"']([^\"']+)", _text(package / "__init__.py"), re.M)
    return m.group(1) if m else "unknown version"


@functools.lru_cache(maxsize=16)
def find_transformers(root: Path) -> Transformers | None:
    """transformers of the repository's environment, else of model-compile's own; None when neither has it."""
    for venv in _VENVS:
        for site in sorted((root / venv).glob("lib/python3*/site-packages")):
            package = site / "transformers"
            if (package / "__init__.py").is_file():
                return Transformers(package, _version(package), True)
    try:
        spec = importlib.util.find_spec("transformers")  # locates the package; imports nothing
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    return Transformers(package, _version(package), False) if (package / "__init__.py").is_file() else None


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def parse_file(path: Path) -> ast.Module | None:
    """The parsed file (cached by its path, time and size: transformers' modeling files are read once)."""
    return _parse(path, _stamp(path))


@functools.lru_cache(maxsize=512)
def _parse(path: Path, stamp: tuple[int, int]) -> ast.Module | None:
    text = _text(path)
    try:
        return ast.parse(text) if text else None
    except (SyntaxError, ValueError, RecursionError):
        return None


def auto_mappings(package: Path) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """({mapping name: {model_type: class}}, {auto class: mapping name}) from models/auto/modeling_auto.py."""
    path = package / "models" / "auto" / "modeling_auto.py"
    return _auto_mappings(path, _stamp(path))


@functools.lru_cache(maxsize=16)
def _auto_mappings(path: Path, stamp: tuple[int, int]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    tree = parse_file(path)
    names: dict[str, dict[str, str]] = {}
    lazy: dict[str, str] = {}
    autos: dict[str, str] = {}
    for node in tree.body if tree else []:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if name.endswith("_MAPPING_NAMES"):
                pairs = value.args[0] if isinstance(value, ast.Call) and value.args else value
                if isinstance(pairs, (ast.List, ast.Tuple)):
                    names[name] = {
                        e.elts[0].value: e.elts[1].value  # type: ignore[attr-defined]
                        for e in pairs.elts
                        if isinstance(e, ast.Tuple)
                        and len(e.elts) == 2
                        and all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in e.elts)
                    }
            elif isinstance(value, ast.Call) and len(value.args) == 2 and isinstance(value.args[1], ast.Name):
                lazy[name] = value.args[1].id
        elif isinstance(node, ast.ClassDef) and node.name.startswith("AutoModel"):
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == "_model_mapping"
                    and isinstance(stmt.value, ast.Name)
                ):
                    autos[node.name] = lazy.get(stmt.value.id, "")
    return names, autos


def transformers_class_file(package: Path, class_name: str) -> Path | None:
    """The modeling file of transformers that defines `class_name` (through the auto mappings' model types,
    else by the folder its name suggests)."""
    names, _ = auto_mappings(package)
    types = sorted({t for mapping in names.values() for t, c in mapping.items() if c == class_name})
    stem = re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", re.sub(r"(For[A-Z]|Model\b|PreTrained).*$", "", class_name)).lower()
    folders = []
    for model_type in [*types, stem, stem.replace("_", "")]:
        words = model_type.replace("-", "_").split("_")  # `qwen3_vl_text` lives in models/qwen3_vl
        folders += ["_".join(words[:n]) for n in range(len(words), 0, -1)]
    for name in dict.fromkeys(folders):
        folder = package / "models" / name
        for candidate in sorted(folder.glob("modeling_*.py")):
            if re.search(rf"^class {re.escape(class_name)}\b", _text(candidate), re.M):
                return candidate
    return None


def model_type_of(name: str, known: set[str]) -> str | None:
    """The model type a checkpoint name says (`Qwen/Qwen3-VL-8B-Instruct` -> `qwen3_vl`): its longest prefix of
    words that is a model type transformers knows."""
    words = [w for w in re.split(r"[-_.\s]+", name.rstrip("/").rsplit("/", 1)[-1].lower()) if w]
    for n in range(len(words), 0, -1):
        for sep in ("_", "-", ""):
            if sep.join(words[:n]) in known:
                return sep.join(words[:n])
    return None


def _index(file: Path) -> tuple[dict[str, ast.ClassDef], dict[str, tuple[int, str, str]], dict[str, str]] | None:
    """A file's top-level classes, `from ... import` names (level, module, name) and `import` aliases."""
    return _indexed(file, _stamp(file))


@functools.lru_cache(maxsize=512)
def _indexed(
    file: Path, stamp: tuple[int, int]
) -> tuple[dict[str, ast.ClassDef], dict[str, tuple[int, str, str]], dict[str, str]] | None:
    tree = parse_file(file)
    if tree is None:
        return None
    classes: dict[str, ast.ClassDef] = {}
    froms: dict[str, tuple[int, str, str]] = {}
    imports: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            classes[stmt.name] = stmt
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                froms.setdefault(alias.asname or alias.name, (node.level, node.module or "", alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imports.setdefault(
                    alias.asname or alias.name.split(".")[0], alias.name if alias.asname else alias.name.split(".")[0]
                )
    return classes, froms, imports


@dataclass(frozen=True)
class ClassRef:
    """A class found in a file: the file, its parsed node, and the module it belongs to."""

    name: str
    file: Path
    node: ast.ClassDef


class Resolver:
    """Resolve a name used in a file to the class it denotes, by reading imports (relative, absolute within
    the repository, `transformers...`) and class definitions. Nothing is imported."""

    def __init__(self, root: Path, transformers: Transformers | None):
        self.root = root
        self.transformers = transformers

    def _module_file(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] == "transformers":
            if self.transformers is None:
                return None
            base = self.transformers.path.joinpath(*parts[1:])
        else:
            base = self.root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def _relative(self, file: Path, level: int, module: str | None) -> Path | None:
        base = file.parent
        for _ in range(level - 1):
            base = base.parent
        target = base.joinpath(*module.split(".")) if module else base
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def in_file(self, file: Path, dotted: str, depth: int = 0) -> ClassRef | None:
        """The class `dotted` (a name, or `module.Name`) means in `file`."""
        index = _index(file)
        if index is None or depth > 6:
            return None
        classes, froms, imports = index
        head, _, rest = dotted.partition(".")
        if not rest and head in classes:
            return ClassRef(head, file, classes[head])
        if head in froms:
            level, module, name = froms[head]
            if not level and not rest and module.split(".")[0] == "transformers":
                return self.transformers_class(name)
            if level:
                source = self._relative(file, level, module or None)
                sub = self._relative(file, level, f"{module}.{name}" if module else name)
            else:
                source = self._module_file(module)
                sub = self._module_file(f"{module}.{name}")
            if rest:  # `from . import source_model`, then `source_model.Name`
                return self.in_file(sub, rest, depth + 1) if sub is not None else None
            return self.in_file(source, name, depth + 1) if source is not None else None
        if rest and head in imports:
            source = self._module_file(imports[head])
            return self.in_file(source, rest, depth + 1) if source else None
        return None

    def transformers_class(self, name: str) -> ClassRef | None:
        if self.transformers is None:
            return None
        file = transformers_class_file(self.transformers.path, name)
        return self.in_file(file, name) if file is not None else None


@dataclass(frozen=True)
class ModelClass:
    """The class a recipe's model is an instance of, where it is defined, and why the tool thinks so."""

    ref: ClassRef
    why: str
    transformers: Transformers | None = None
    source: str = "the recipe's model code"  # where its code was read


_BUILD = re.compile(r"\b([A-Z]\w*(?:\.[A-Z]\w*)?)\s*(?:\.\s*(?:from_pretrained|from_config|_from_config)\s*)?\(")
_PRETRAINED = re.compile(
    r"^\s*(?:pretrained_model_name_or_path|model_name_or_path|pretrained):\s*[\"']?([^\"'#\s]+)", re.M
)
_AUTO = re.compile(r"\b(AutoModel\w*)\b")
_MODULE_BASES = re.compile(r"(?:^|\.)(?:Module|PreTrainedModel|\w+PreTrainedModel|GradientCheckpointingLayer)$")


_TERMINAL = re.compile(
    r"(?:^|\.)(?:Module|PreTrainedModel|GradientCheckpointingLayer|object|Generic|Protocol|\w+Mixin)$"
)


def terminal_base(text: str) -> bool:
    """A base class the module tree never needs to read (torch's, transformers' framework classes, mixins)."""
    return bool(_TERMINAL.search(text)) or text.startswith(("nn.", "torch."))


def is_module_class(resolver: Resolver, ref: ClassRef, depth: int = 0) -> bool:
    """A subclass of nn.Module (through the bases the resolver finds)."""
    if depth > 8:
        return False
    for base in ref.node.bases:
        text = ast.unparse(base)
        if _MODULE_BASES.search(text) or text.startswith(("nn.", "torch.nn.")):
            return True
        if terminal_base(text):
            continue
        found = resolver.in_file(ref.file, text)
        if found is not None and found != ref and is_module_class(resolver, found, depth + 1):
            return True
    return False


def builder_source(file: Path, name: str) -> str | None:
    """The source of the function `name` defined in `file`, if it defines one."""
    tree = parse_file(file)
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ast.unparse(node)
    return None


def _built_classes(resolver: Resolver, file: Path, text: str) -> list[tuple[ClassRef, bool]]:
    """The module classes `text` (code of `file`) builds, each with whether a `return` hands it back."""
    returned = set(re.findall(r"\breturn\s+([A-Z]\w*(?:\.[A-Z]\w*)?)\s*[.(]", text))
    out: list[tuple[ClassRef, bool]] = []
    for m in _BUILD.finditer(text):
        name = m.group(1)
        if name.endswith(("Config", "Processor", "Tokenizer")) or name.startswith("Auto"):
            continue
        ref = resolver.in_file(file, name)
        if ref is not None and is_module_class(resolver, ref) and all(ref != c for c, _ in out):
            out.append((ref, name in returned))
    return out


def recipe_model_class(
    root: Path, model_files: list[Path], stage_texts: dict[str, str], kit_files: list[Path], builder: str | None = None
) -> ModelClass | None:
    """The model class of a recipe, statically: a module class its build builds, else the class the checkpoint of
    a stage YAML maps to through the auto class its kit (or model code) builds with. `builder`: the call
    prepare_model() builds the model with (`build_vit_model`, `Cls.from_pretrained`, `self.model_kit.build_model`):
    only that function's (or that kit method's) classes count."""
    package = find_transformers(root)
    resolver = Resolver(root, package)
    through_kit = builder is not None and builder.startswith("self.")
    parts = (builder or "").split(".")
    if parts[-1] in ("from_pretrained", "from_config", "_from_config"):
        parts = parts[:-1]
    name = parts[-1] if builder else None
    built = name if name and name[:1].isupper() else None  # the build call names the class itself
    sources: list[tuple[Path, str]] = []  # (file, the code that builds the model)
    for file in kit_files if through_kit else model_files:
        if built is not None:
            text = f"{built}()" if re.search(rf"\b{re.escape(built)}\b", _text(file)) else ""
        else:
            text = (builder_source(file, name) if name else _text(file)) or ""
        sources.append((file, text if text or not through_kit else _text(file)))
    candidates = [c for file, text in sources for c in _built_classes(resolver, file, text)]
    if candidates:
        ref = next((c for c, r in candidates if r), candidates[0][0])
        where = package.where if package is not None and _inside(ref.file, package.path) else "the recipe's model code"
        by = "the kit's builder" if through_kit else "the recipe's model code"
        return ModelClass(ref, f"{ref.name}, built by {by} (read from {where})", package, where)
    if package is None:
        return None
    names, autos = auto_mappings(package.path)
    texts = [t for _, t in sources] if through_kit else [*map(_text, model_files), *map(_text, kit_files)]
    wanted = list(dict.fromkeys(a for text in texts for a in _AUTO.findall(text)))
    known = {t for mapping in names.values() for t in mapping}
    for stage, text in stage_texts.items():
        for checkpoint in _PRETRAINED.findall(text):
            model_type = _local_model_type(root, checkpoint) or model_type_of(checkpoint, known)
            for auto in wanted if model_type else []:
                cls = names.get(autos.get(auto, ""), {}).get(model_type)  # type: ignore[arg-type]
                found = resolver.transformers_class(cls) if cls else None
                if found is not None:
                    why = (
                        f"{cls}: checkpoint `{checkpoint}` in {stage}, built through {auto} (read from {package.where})"
                    )
                    return ModelClass(found, why, package, package.where)
    return None


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _local_model_type(root: Path, checkpoint: str) -> str | None:
    config = Path(checkpoint) / "config.json" if checkpoint.startswith("/") else root / checkpoint / "config.json"
    try:
        data = json.loads(_text(config)) if config.is_file() else None
    except (OSError, ValueError):
        return None
    value = data.get("model_type") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None
