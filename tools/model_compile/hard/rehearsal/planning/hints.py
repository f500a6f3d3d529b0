"""What the recipe says of a model whose config is not on this machine, for the child to read against the
registries of the repository's interpreter (transformers' model types, the repository's vendored config classes).

A stage's checkpoint is often a path on the team's cluster (`/cache/save_dir/run7/final`) that names nothing. The
recipe still tells what it trains, in three places, strongest first:

1. the same model key in the recipe's other stages (`lab/Qwen3-VL-8B-stage0` in its debug stage);
2. its README, up to its first section (`a Qwen3-VL recipe for ...`);
3. its own code: module file names (`model/qwen3_vl.py`) and the transformers model packages it imports
   (`transformers.models.qwen3_vl`).

Here they are only collected, each text with where it was read; which model types they name is read in the
child (`runtime/rehearsal/models/architecture.py`), against the registry of the transformers the run uses: the
first place that names one decides. Words of prose are kept only where they look like a model's name (a digit,
an inner separator or two capitals: `Qwen3-VL`, `ViT`, never `git`). The repository's vendored config classes
(`configuration_*.py`, for remote code) are listed too. Pure Python: files read as text, nothing imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

from model_compile.runtime.rehearsal.models import names
from model_compile.runtime.rehearsal.models.names import model_words

TRANSFORMERS_MODEL = re.compile(r"transformers\.models\.([A-Za-z0-9_]+)")
README_LINES = 40  # a README's head: its title and first paragraphs, before a section could compare models
SKIPPED = names.SKIPPED
PLACES = ("the recipe's other stages", "the recipe's README", "the recipe's own code")


def _value(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _stages(key: str, stage_files: dict[str, Path], skip: str | None) -> list[dict[str, str]]:
    out = []
    for name, path in stage_files.items():
        if name == skip:
            continue
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        value = _value(data, key)
        if isinstance(value, str):
            out.append({"place": PLACES[0], "where": f"stage {name} sets {key} = {value!r}", "text": value})
    return out


def _readme(recipe_root: Path) -> list[dict[str, str]]:
    path = recipe_root / "README.md"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[:README_LINES]
    except OSError:
        return []
    out = []
    for number, line in enumerate(lines, 1):
        if number > 1 and line.startswith("## "):
            break
        words = model_words(line)
        if words:
            out.append({"place": PLACES[1], "where": f"{path.name}:{number}", "text": " ".join(words)})
    return out


def _own_files(recipe_root: Path) -> list[Path]:
    out = []
    for path in sorted(recipe_root.rglob("*.py")):
        rel = path.relative_to(recipe_root)
        if rel.parts[0] in ("tests", "test") or any(p.startswith(".") or p in SKIPPED for p in rel.parts):
            continue
        out.append(path)
    return out


def _code(recipe_root: Path) -> list[dict[str, str]]:
    out = []
    for path in _own_files(recipe_root):
        rel = path.relative_to(recipe_root).as_posix()
        if path.stem.startswith("configuration_"):
            continue  # a vendored config class is read as itself (vendored_configs), not as a hint
        if model_words(path.stem):
            out.append({"place": PLACES[2], "where": f"the recipe's module {rel}", "text": path.stem})
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for package in TRANSFORMERS_MODEL.findall(line):
                out.append(
                    {
                        "place": PLACES[2],
                        "where": f"{rel}:{number} imports transformers.models.{package}",
                        "text": package,
                    }
                )
    return out


def recipe_hints(recipe_root: Path, key: str, stage_files: dict[str, Path], stage: str | None) -> list[dict[str, str]]:
    """Every text the recipe says of the model (`key`: the stage's dotted model key; `stage`: the stage planned),
    in the order of the places: {"place", "where", "text"}."""
    return _stages(key, stage_files, stage) + _readme(recipe_root) + _code(recipe_root)


vendored_configs = names.vendored_configs
_NOT_MODELS = ("Tokenizer", "Processor", "Config", "FeatureExtractor")


def _class_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def model_calls(recipe_root: Path, key: str) -> list[dict[str, Any]]:
    """The recipe's own loads of the stage's model, read statically: `X.from_pretrained(<...the key's leaf...>,
    trust_remote_code=True)` where X is a model class and its path argument reads the stage's pretrained key (a
    script's load of another path is not the training's): {"class", "trust_remote_code", "where"}. A tokenizer's
    or processor's load of a name the rehearsal stands in for (it often comes first) resolves the model as these
    calls will."""
    leaf = key.rsplit(".", 1)[-1]
    out = []
    for path in _own_files(recipe_root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "from_pretrained":
                continue
            cls = _class_name(node.func.value)
            model = cls.startswith("AutoModel") or "For" in cls or cls.endswith("Model")
            if not model or any(word in cls for word in _NOT_MODELS):
                continue
            named = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == leaf), None)
            if named is None or leaf not in ast.unparse(named):
                continue
            trust = any(
                k.arg == "trust_remote_code" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            )
            where = f"{path.relative_to(recipe_root).as_posix()}:{node.lineno}"
            out.append({"class": cls, "trust_remote_code": trust, "where": where})
    return out
