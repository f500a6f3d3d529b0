"""Which recipe a hard command is about, and the environment its child processes start from."""

from __future__ import annotations

import os
from pathlib import Path

from model_compile.discover.recipes import repo_root_of
from model_compile.errors import InputError
from model_compile.runtime import RUNTIME_DIR_ENV


def resolve_recipe(path: Path, recipe: str | None) -> tuple[Path, Path]:
    """(recipe root, repository root) from PATH (+ --recipe)."""
    path = path.resolve()
    if not path.is_dir():
        raise InputError(f"{path} is not a directory")
    if recipe:
        candidate = path / "recipes" / recipe
        if not candidate.is_dir():
            raise InputError(f"no recipe {recipe!r} under {path / 'recipes'}")
        path = candidate
    elif (path / "recipes").is_dir():
        names = sorted(p.name for p in (path / "recipes").iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        raise InputError(
            f"--hard validates one recipe: pass a recipe folder or --recipe NAME (one of {', '.join(names)})"
        )
    if not ((path / "tests").is_dir() or (path / "configs").is_dir() or (path / "engine").is_dir()):
        raise InputError(f"{path} does not look like a recipe (no tests/, configs/ or engine/)")
    return path, repo_root_of(path) or path.parent


def child_env(out_dir: Path) -> dict[str, str]:
    # Never the tool's own site-packages: the child may be another Python (see hard/probe.py).
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env[RUNTIME_DIR_ENV] = str(out_dir / "runtime")
    return env
