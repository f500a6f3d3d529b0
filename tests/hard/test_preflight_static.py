"""The preflight's module list is read statically: imports followed through the repository, optional ones skipped."""

from __future__ import annotations

from pathlib import Path

from model_compile.hard.env.preflight import modules_to_check


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_third_party_names_are_found_through_repository_modules(tmp_path: Path) -> None:
    recipe = tmp_path / "recipes" / "r"
    for init in ("recipes/__init__.py", "recipes/r/__init__.py", "recipes/r/engine/__init__.py", "core/__init__.py"):
        _write(tmp_path / init, "")
    _write(recipe / "engine" / "r_engine.py", "import json\nfrom core.train import Trainer\nfrom . import helpers\n")
    _write(recipe / "engine" / "helpers.py", "import needed_by_helper\n")
    _write(
        tmp_path / "core" / "train.py",
        "from typing import TYPE_CHECKING\nimport heavy_dep\nif TYPE_CHECKING:\n    import typing_only\n"
        "try:\n    import optional_dep\nexcept ImportError:\n    optional_dep = None\n"
        "def lazy():\n    import lazy_dep\n",
    )
    _write(recipe / "tests" / "test_structure.py", "import pytest\nfrom recipes.r.engine import r_engine\n")
    modules, paths = modules_to_check(recipe, tmp_path)
    assert {"json", "heavy_dep", "needed_by_helper", "pytest", "typing"} <= set(modules)
    assert not {"typing_only", "optional_dep", "lazy_dep", "core", "recipes"} & set(modules)
    assert modules["heavy_dep"] == "core/train.py" and modules["needed_by_helper"] == "recipes/r/engine/helpers.py"
    assert str(tmp_path) in paths
