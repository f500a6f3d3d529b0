"""How a name a recipe loads a model by (a hub id, a cluster path, a local folder) is matched against the names a
user supplies configs for (`--model-config NAME=config.json`). Pure Python, shared by the plan and the child.

A name matches when any of its spellings does: as written, without a trailing slash, normalised (`./a/../b` ->
`b`), and, for a relative path, resolved against the repository root (the recipe's launcher runs there).
"""

from __future__ import annotations

import os
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
