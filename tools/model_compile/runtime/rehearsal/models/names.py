"""How a name a recipe loads a model by (a hub id, a cluster path, a local folder) is matched against the names a
user supplies configs for (`--model-config NAME=config.json`). Pure Python, shared by the plan and the child.

A name matches when any of its spellings does: as written, without a trailing slash, normalised (`./a/../b` ->
`b`), and, for a relative path, resolved against the repository root (the recipe's launcher runs there).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def hub_cache_dir() -> Path:
    """The local Hugging Face hub cache, as huggingface_hub finds it (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "huggingface" / "hub"


def hub_config(name: str) -> Path | None:
    """`name`'s config.json in the local hub cache (the newest snapshot), or None."""
    folder = hub_cache_dir() / ("models--" + str(name).replace("/", "--")) / "snapshots"
    found = sorted(folder.glob("*/config.json")) if folder.is_dir() else []
    return found[-1] if found else None


def spellings(name: str, repo_root: str | None = None) -> set[str]:
    text = str(name).strip()
    out = {text, text.rstrip("/")}
    expanded = os.path.expanduser(text)
    out.add(os.path.normpath(expanded))
    if repo_root and not os.path.isabs(expanded):
        out.add(os.path.normpath(os.path.join(repo_root, expanded)))
    return {s for s in out if s}


def lookup(mapping: dict[str, Any], name: str, repo_root: str | None = None) -> Any:
    """The value `mapping` holds for `name` under any of its spellings, else None."""
    wanted = spellings(name, repo_root)
    for key, value in mapping.items():
        if spellings(key, repo_root) & wanted:
            return value
    return None


def slug(name: str) -> str:
    """A folder name for a stand-in of `name`."""
    keep = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(name).strip("/ "))
    return keep.strip("-.")[-80:] or "model"


# -- which architecture a name names, against a registry of model types -------------------------------------

_SEP = r"[-_. ]?"
_BOUNDARY_BEFORE = r"(?:^|(?<=[/\\\s\-_.:'\"(\[]))"
_BOUNDARY_AFTER = r"(?=$|[^a-z])"
_ACTIVE = re.compile(r"-a\d+(?:\.\d+)?b(?![a-z])", re.I)  # `-A3B`: the active parameters of a mixture of experts
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]*")


def _pattern(model_type: str) -> re.Pattern[str]:
    core = re.sub(r"[^a-z0-9]", "", model_type.lower())
    return re.compile(_BOUNDARY_BEFORE + _SEP.join(re.escape(c) for c in core) + _BOUNDARY_AFTER)


def types_named(text: str, model_types: Iterable[str]) -> list[str]:
    """The model types `text` names (a hub id, a path, a module name): a type's name written at the start of a
    word, separators between its letters allowed (`Qwen3-VL` names qwen3_vl, `Qwen2.5-VL` qwen2_5_vl), followed
    by anything but a letter. Where one match lies inside another (qwen3 in Qwen3-VL), the longer is the name.
    A name that also says a mixture of experts (`-A3B`, `moe`) names the type's `_moe` variant where the
    registry has one. Of a path or hub id, the last part that names any decides (`/home/u/mvp-engine/pretrained/
    Qwen3-VL-8B`: the folders above the checkpoint are not its name), a folder above it only by a type whose name
    has a digit or an underscore (an ordinary word such as `align` in `OVEncoder-align/` names no model)."""
    types = set(model_types)
    words = str(text).split()
    if len(words) == 1 and "/" in words[0]:
        for i, part in enumerate(reversed(words[0].split("/"))):
            found = _types_in(part, types)
            if i:  # a folder above: only a type that is no ordinary word (`mvp-engine`, `-align` name no model)
                found = [t for t in found if re.search(r"[\d_]", t)]
            if found:
                return found
        return []
    return _types_in(str(text), types)


def _types_in(text: str, types: set[str]) -> list[str]:
    low = str(text).lower()
    spans: list[tuple[int, int, str]] = []
    for model_type in types:
        if len(re.sub(r"[^a-z0-9]", "", model_type.lower())) < 3:
            continue
        for m in _pattern(model_type).finditer(low):
            spans.append((m.start(), m.end(), model_type))
    kept = [
        s
        for s in spans
        if not any(o != s and o[0] <= s[0] and s[1] <= o[1] and o[1] - o[0] > s[1] - s[0] for o in spans)
    ]
    found = list(dict.fromkeys(t for _, _, t in sorted(kept)))
    if _ACTIVE.search(low) or re.search(r"(?<![a-z])moe(?![a-z])", low):
        found = [f"{t}_moe" if f"{t}_moe" in types and not t.endswith("_moe") else t for t in found]
    return list(dict.fromkeys(found))


def looks_like_a_model_name(word: str) -> bool:
    """A word of prose or code that may name a model (`Qwen3-VL`, `ViT`, `qwen3_vl`), not an ordinary word
    (`git`, `align`): it has a digit, a separator inside it, or two capitals."""
    inner = word.strip("-_./")
    return bool(re.search(r"\d", inner) or re.search(r"[-_/]", inner) or sum(c.isupper() for c in inner) >= 2)


def model_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if looks_like_a_model_name(w)]


# -- remote code: the files a config's auto_map names, and where they are -----------------------------------


def code_modules(config: dict[str, Any]) -> list[str]:
    """The module files (`configuration_x.py`, `modeling_x.py`) a config's `auto_map` names; refs into another hub
    repository (`org/repo--module.Class`) keep their prefix, so a caller can tell them apart."""
    auto_map = config.get("auto_map")
    if not isinstance(auto_map, dict):
        return []
    refs = [str(v[0] if isinstance(v, (list, tuple)) else v) for v in auto_map.values() if v]
    return sorted({ref.rsplit(".", 1)[0] + ".py" for ref in refs})


def code_folder(files: list[str], folders: list[str | Path]) -> Path | None:
    """The first folder that holds every one of `files` (beside the config first, then the repository's vendored
    code), or None."""
    for folder in folders:
        path = Path(folder)
        if files and all((path / f).is_file() for f in files):
            return path
    return None


def vendored_folders(spec: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(str(Path(f).parent) for f in spec.get("vendored_configs") or []))


PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")
MAX_VENDORED = 20
SKIPPED = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", "outputs"})


def vendored_configs(recipe_root: Path, repo_root: Path) -> list[str]:
    """The repository's vendored config modules (`configuration_*.py`, remote code kept in the repository): the
    recipe's own first (its tests left out), else the rest of the repository's (its environments and outputs left
    out); at most MAX_VENDORED."""
    found = []
    for path in sorted(recipe_root.rglob("configuration_*.py")):
        rel = path.relative_to(recipe_root)
        if rel.parts[0] not in ("tests", "test") and not any(p.startswith(".") or p in SKIPPED for p in rel.parts):
            found.append(path)
    if not found:
        for folder, dirs, files in os.walk(repo_root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
            found += [Path(folder) / f for f in sorted(files) if f.startswith("configuration_") and f.endswith(".py")]
            if len(found) >= MAX_VENDORED:
                break
    return [str(p) for p in found[:MAX_VENDORED]]
