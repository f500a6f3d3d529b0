"""The preflight's module list is read statically: imports followed through the repository, optional ones skipped."""

from __future__ import annotations

from pathlib import Path

from model_compile.hard.env.imports import modules_to_check


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


def test_imports_inside_functions_and_in_vendored_model_code_are_read_as_later(tmp_path: Path) -> None:
    from model_compile.hard.env.imports import walk

    recipe = tmp_path / "recipes" / "r"
    for init in ("recipes/__init__.py", "recipes/r/__init__.py", "recipes/r/engine/__init__.py"):
        _write(tmp_path / init, "")
    _write(recipe / "engine" / "r_engine.py", "import json\n\ndef build():\n    import imagesize_like\n")
    _write(recipe / "third_party" / "modeling_x.py", "from einops_like import rearrange\n")
    modules, later, _ = walk(recipe, tmp_path, [recipe / "third_party" / "modeling_x.py"])
    assert "json" in modules and not {"imagesize_like", "einops_like"} & set(modules)
    assert later == {
        "imagesize_like": "recipes/r/engine/r_engine.py",
        "einops_like": "recipes/r/third_party/modeling_x.py",
    }


def test_every_missing_module_is_said_in_one_line_with_the_locks_word(tmp_path: Path) -> None:
    import sys

    from model_compile.hard.env.interpreter import Interpreter
    from model_compile.hard.env.preflight import _interpret

    (tmp_path / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "imagesize"\nversion = "1.4.1"\nsource = { registry = "x" }\n'
    )
    data = {
        "python": "3.11",
        "pytest": "8",
        "torch": "2.13.0",
        "device": {"type": "cpu"},
        "imports": [{"module": "einops", "ok": False, "kind": "import", "missing": "einops"}],
        "unmet": [{"package": "imagesize", "by": "mvp-dataset 0.2.1"}],
        "later": ["flash_attn"],
    }
    interp = Interpreter(sys.executable, "tool", "the tool's")
    pre = _interpret(data, None, interp, tmp_path, [str(tmp_path)], {"einops": "a.py", "flash_attn": "b.py"})
    assert not pre.ok
    assert pre.missing_line() == (
        "einops (imported by a.py) [not declared by the repository]; imagesize (required by mvp-dataset 0.2.1) "
        "[uv.lock pins 1.4.1]; flash_attn (imported by b.py) [not declared by the repository]"
    )
    fixes = pre.fixes()
    assert fixes.startswith(f"cd {tmp_path} && uv sync (the lock pins imagesize); or {sys.executable} -m pip install")
    assert "pip install einops flash_attn" in fixes
