"""Find recipes in a tree: `recipes/<name>/` folders, or the tree itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_compile.discover.tree import SourceTree, unlisted_of


@dataclass(frozen=True)
class RecipeLocation:
    """A recipe's name and its folder inside the tree ('' when the tree is the recipe)."""

    name: str
    prefix: str
    root: str = "."  # the analysed PATH as the user gave it (for commands in fix hints)

    @property
    def display_path(self) -> str:
        """The recipe folder as a path the user can paste (PATH joined with the prefix)."""
        if not self.prefix:
            return self.root
        return self.prefix if self.root in ("", ".") else f"{self.root.rstrip('/')}/{self.prefix}"

    def rel(self, path: str) -> str:
        """Path inside the tree of a recipe-relative path."""
        return f"{self.prefix}/{path}" if self.prefix else path

    def owns(self, path: str) -> bool:
        return not self.prefix or path.startswith(self.prefix + "/")


def _is_recipe_marker(rel: str) -> bool:
    """engine/*.py or configs/schema.py, relative to a recipe folder."""
    return (rel.startswith("engine/") and rel.endswith(".py")) or rel == "configs/schema.py"


def group_files(tree: SourceTree) -> dict[str, list[str]]:
    """Files of each `recipes/<name>/` folder, keyed by name (one pass)."""
    groups: dict[str, list[str]] = {}
    for f in tree.files():
        parts = f.split("/", 2)
        if len(parts) == 3 and parts[0] == "recipes":
            groups.setdefault(parts[1], []).append(f)
    return groups


def find_recipes(
    tree: SourceTree, single_name: str | None = None, groups: dict[str, list[str]] | None = None
) -> list[RecipeLocation]:
    """Recipes under `recipes/`, or the tree itself when it is one recipe (`groups`: its `group_files`, if made)."""
    groups = group_files(tree) if groups is None else groups
    names = {name for name, files in groups.items() if any(_is_recipe_marker(f.split("/", 2)[2]) for f in files)}
    # A recipe folder (or its engine/configs) that cannot be listed is still a recipe: its
    # context reports the folder as unreadable instead of the recipe dropping out of the list.
    for folder in unlisted_of(tree):
        parts = folder.split("/")
        if len(parts) >= 2 and parts[0] == "recipes" and (len(parts) == 2 or parts[2] in ("engine", "configs")):
            names.add(parts[1])
    found = [RecipeLocation(name, f"recipes/{name}") for name in sorted(names)]
    if found:
        return found
    if any(_is_recipe_marker(f) for f in tree.files()):
        return [RecipeLocation(single_name or "recipe", "")]
    return []


def repo_root_of(recipe_dir: Path) -> Path | None:
    """The repository holding a recipe folder: the folder above its `recipes/`,
    else the nearest ancestor with a `recipes/` folder; None when there is none.

    The `recipes/` layout decides, not the git top level: a repository can sit
    inside another checkout (a vendored example, a test fixture).
    """
    recipe_dir = Path(recipe_dir).resolve()
    if recipe_dir.parent.name == "recipes":
        return recipe_dir.parent.parent
    for parent in recipe_dir.parents:
        if (parent / "recipes").is_dir():
            return parent
    return None
