"""Find recipes in a tree: `recipes/<name>/` folders, or the tree itself."""

from __future__ import annotations

from dataclasses import dataclass

from model_compile.discover.tree import SourceTree


@dataclass(frozen=True)
class RecipeLocation:
    """A recipe's name and its folder inside the tree ('' when the tree is the recipe)."""

    name: str
    prefix: str

    def rel(self, path: str) -> str:
        """Path inside the tree of a recipe-relative path."""
        return f"{self.prefix}/{path}" if self.prefix else path

    def owns(self, path: str) -> bool:
        return not self.prefix or path.startswith(self.prefix + "/")

    def local(self, path: str) -> str:
        """Recipe-relative path of a tree path."""
        return path[len(self.prefix) + 1 :] if self.prefix else path


def _looks_like_recipe(files: set[str], prefix: str) -> bool:
    p = f"{prefix}/" if prefix else ""
    return any(
        f.startswith(p + "engine/") and f.endswith(".py") or f == p + "configs/schema.py" for f in files
    )


def find_recipes(tree: SourceTree, single_name: str | None = None) -> list[RecipeLocation]:
    """Recipes under `recipes/`, or the tree itself when it is one recipe."""
    files = set(tree.files())
    names = sorted({f.split("/")[1] for f in files if f.startswith("recipes/") and f.count("/") >= 2})
    found = [RecipeLocation(n, f"recipes/{n}") for n in names if _looks_like_recipe(files, f"recipes/{n}")]
    if found:
        return found
    if _looks_like_recipe(files, ""):
        return [RecipeLocation(single_name or "recipe", "")]
    return []
