"""The model's own modules a change of compiled scope moves to eager, read from the checkout on disk.

Where a change narrows what a recipe compiles (the kit's whole model to regional blocks, say), the diff says which
of the model's modules now run outside compile, as generate's README does: the model's module tree is read
statically (parse/model_source.py, parse/model_tree.py: the recipe's model code, or the transformers class its
build or checkpoint maps to, from the repository's environment) from the recipe as it is on disk, and the
outermost modules no compiled part of the head side covers are named.
"""

from __future__ import annotations

import os
from pathlib import Path

from model_compile.findings.models import RecipeReport
from model_compile.ledger.repo import KitFacts
from model_compile.parse.model_source import Resolver, recipe_model_class
from model_compile.parse.model_tree import build_tree

SKIP = {".git", ".venv", "venv", "__pycache__", "tests"}


def outside_compile(
    checkout: str | os.PathLike[str] | None, after: RecipeReport, kits: list[KitFacts]
) -> tuple[list[str], str] | None:
    """(the modules of the head side's model that no compiled part covers, written from its model variable;
    where the model was read), or None when the recipe or its model is not readable here."""
    if checkout is None:
        return None
    root = Path(checkout)
    kit_files = [root / k.file for k in kits]
    recipe = root / after.path if after.path not in ("", ".") else root
    if not recipe.is_dir() or not after.scope.parts:
        return None
    files = [p for p in sorted(recipe.rglob("*.py")) if not SKIP & set(p.relative_to(recipe).parts)]
    stages = {p.name: _text(p) for p in sorted((recipe / "configs").glob("*.y*ml"))}
    built = [e for lg in after.ledger for e in lg.of("build") if e.reachable]
    builder = built[0].call.split("(")[0].split("=")[-1].strip() if built else None
    found = recipe_model_class(root, files, stages, kit_files, builder)
    if found is None:
        return None
    tree = build_tree(Resolver(root, found.transformers), found.ref)
    compiled = [p.pattern.removesuffix(".*") if p.kind == "blocks" else p.pattern for p in after.scope.parts]
    names = tree.eager_around(compiled)
    var = after.scope.model
    return [f"{var}.{n}" for n in names], f"{found.ref.name} in {found.source}, as checked out"


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
