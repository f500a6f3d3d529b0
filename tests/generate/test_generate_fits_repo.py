"""Generated edits fit the target repository: its formatter, its own tests, its existing wiring."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
from gen_helpers import REASON, RECIPE_REL, make_repo, run_generate, snapshot

from model_compile.errors import InputError
from model_compile.generate.edits.recipe_test_files import merge_asserts, undefined_globals
from model_compile.generate.style.repo_style import read_style
from model_compile.recipe_tests import default_context, render_recipe_tests

SKILL = f"{RECIPE_REL}/tests/skills/model-compile"
RUFF = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
HAS_RUFF = Path(RUFF).is_file()

HAND_WRITTEN = '''"""The recipe's own compile asserts."""

from omegaconf import OmegaConf


def test_config_structure(config: OmegaConf):
    """Hand-written: the section exists."""
    assert config.model.compile is not None


def helper_of_ours(x):
    return x + 1
'''


def _commit(root: Path, message: str = "change") -> None:
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit(message)


def _functions(text: str) -> list[str]:
    return [line.split("(")[0][4:] for line in text.splitlines() if line.startswith("def ")]


# -- formatter settings -------------------------------------------------------
def test_style_from_pyproject_and_pre_commit(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.black]\nline-length = 100\n\n[tool.isort]\nknown_third_party = ["x"]\n'
    )
    (tmp_path / ".pre-commit-config.yaml").write_text(
        "repos:\n  - repo: r\n    hooks:\n      - id: ruff-format\n        args: [ --line-length=120 ]\n"
        '  - repo: i\n    hooks:\n      - id: isort\n        args: ["--profile", "black"]\n'
    )
    style = read_style(tmp_path)
    assert (style.line_length, style.formatter, style.isort, style.isort_profile) == (120, "ruff", True, "black")
    assert "ruff-format" in style.described and "[tool.black]" in style.described


def test_style_ruff_quote_and_defaults(tmp_path):
    assert read_style(tmp_path).line_length == 88 and read_style(tmp_path).formatter is None
    (tmp_path / "pyproject.toml").write_text(
        '[tool.ruff]\nline-length = 99\n\n[tool.ruff.format]\nquote-style = "single"\n'
    )
    style = read_style(tmp_path)
    assert (style.line_length, style.quote, style.formatter) == (99, "single", "ruff")


@pytest.mark.skipif(not HAS_RUFF, reason="ruff not installed")
@pytest.mark.parametrize("length", [88, 100, 120])
@pytest.mark.parametrize("quote", ["double"])  # single-quote repos: values follow, static code needs their formatter
def test_rendered_recipe_tests_pass_the_formatter_unchanged(tmp_path, length, quote):
    context = default_context("minimal_vlm", "fallback:regional", line_length=length, quote=quote)
    for name, text in render_recipe_tests(context).items():
        path = tmp_path / name
        path.write_text(text)
        style = f"format.quote-style='{quote}'"
        for args in (["format", "--check", "--line-length", str(length)], ["check", "--select", "I,E501"]):
            cmd = [RUFF, *args, "--isolated", "--config", style, "--line-length", str(length), str(path)]
            if args[0] == "format":
                cmd = [RUFF, *args, "--isolated", "--config", style, str(path)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            assert done.returncode == 0, (name, args, done.stdout, done.stderr)
        if quote == "double":
            assert "['" not in text


@pytest.mark.skipif(not HAS_RUFF, reason="ruff not installed")
def test_repo_formatter_runs_on_the_planned_files(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "ruff").symlink_to(RUFF)
    _commit(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    assert "formatted with ruff format" in err
    # the fixture's schema was not ruff-clean before: reformatting it would touch lines the edit did not
    assert "not reformatted (not clean under ruff format before this edit" in err and "configs/schema.py" in err
    for rel in (f"{SKILL}/asserts.py", f"{SKILL}/test_compile_parity.py"):
        done = subprocess.run([RUFF, "format", "--check", "--line-length", "100", str(repo / rel)], capture_output=True)
        assert done.returncode == 0, rel


def test_compile_config_class_gets_a_docstring(repo):
    assert run_generate(str(repo / RECIPE_REL), "--write")[0] == 0
    schema = (repo / RECIPE_REL / "configs" / "schema.py").read_text()
    assert 'class ToyVLMCompileConfig(BaseModel):\n    """torch.compile options for the ToyVLM recipe."""\n' in schema


# -- the recipe's own tests ----------------------------------------------------
def test_hand_written_asserts_are_merged_not_replaced(repo):
    asserts = repo / SKILL / "asserts.py"
    asserts.parent.mkdir(parents=True)
    asserts.write_text(HAND_WRITTEN)
    _commit(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    text = asserts.read_text()
    assert text.startswith(HAND_WRITTEN.split("\n\n\ndef helper_of_ours")[0].split("from omegaconf")[0])
    for own in (
        'def test_config_structure(config: OmegaConf):\n    """Hand-written: the section exists."""',
        "def helper_of_ours(x):",
    ):
        assert own in text  # every existing function kept as written
    funcs = _functions(text)
    assert (
        funcs.count("test_config_structure") == 1
        and "assert_before_train_end" in funcs
        and "test_engine_structure" in funcs
    )
    assert "kept its own test_config_structure" in err and "merged" in err
    assert "import textwrap\n" in text  # what the merged code needs is imported
    # the merged file is ours to update, not to duplicate
    _commit(repo)
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0 and "already wired" in err and snapshot(repo) == before


def test_hand_written_parity_test_is_kept_and_force_replaces(repo):
    parity = repo / SKILL / "test_compile_parity.py"
    parity.parent.mkdir(parents=True)
    parity.write_text('"""Our own parity test."""\n')
    _commit(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    assert parity.read_text() == '"""Our own parity test."""\n'
    assert "test_compile_parity.py: the recipe's own file, kept" in err


def test_force_overwrites_the_recipes_own_asserts(repo):
    asserts = repo / SKILL / "asserts.py"
    asserts.parent.mkdir(parents=True)
    asserts.write_text(HAND_WRITTEN)
    _commit(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write", "--force")
    assert code == 0, err
    assert "helper_of_ours" not in asserts.read_text() and "replaced (--force)" in err


def test_missing_recipe_tests_created_from_repo_templates(repo):
    templates = repo / "tests" / "templates"
    templates.mkdir(parents=True)
    (templates / "test_structure.py.template").write_text(
        '"""Structure tests for recipes/<recipe>."""\n\nRECIPE = "recipes.<recipe_name>"\nCONFIG = "<RecipeConfigClass>"\n'
    )
    _commit(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    created = (repo / RECIPE_REL / "tests" / "test_structure.py").read_text()
    assert 'RECIPE = "recipes.toy_vlm"' in created and 'CONFIG = "ToyVLMConfig"' in created
    assert "test_structure.py was missing: created from tests/templates/test_structure.py.template" in err
    assert "test_smoke.py missing (the repository has no tests/templates/test_smoke.py.template" in err


# -- an already-wired recipe ---------------------------------------------------
def test_same_path_twice_is_a_no_op_and_keeps_committed_tests(repo):
    recipe = str(repo / RECIPE_REL)
    assert run_generate(recipe, "--write")[0] == 0
    asserts = repo / SKILL / "asserts.py"
    asserts.write_text(asserts.read_text().replace('TARGET = "model"', 'TARGET = "model (vision tower eager)"'))
    _commit(repo)
    before = snapshot(repo)
    code, out, err = run_generate(recipe, "--write")
    assert code == 0 and out == ""
    assert "already wired: compiles through kit (model)" in err and "nothing written" in err
    assert snapshot(repo) == before


def test_another_path_is_refused_without_switch(repo):
    recipe = str(repo / RECIPE_REL)
    assert run_generate(recipe, "--write")[0] == 0
    _commit(repo)
    before = snapshot(repo)
    code, out, err = run_generate(recipe, "--path", "regional", "--reason", REASON, "--write")
    assert code == 2 and snapshot(repo) == before
    assert "already compiles through kit (model); generating fallback:regional would switch it" in err
    code, out, err = run_generate(recipe, "--path", "regional", "--reason", REASON, "--write", "--switch")
    assert code == 0, err
    assert "switching from kit (model) to fallback:regional (--switch)" in err
    assert 'COMPILE_PATH = "fallback:regional"' in (repo / SKILL / "asserts.py").read_text()  # ours: re-rendered


def test_parity_test_is_not_generated_when_the_engine_lacks_its_hooks(tmp_path: Path) -> None:
    """An engine whose base (in the repository) defines no get_batch/compute_loss gets no parity test that
    could only fail; the output says why and the impact layer stays missing."""
    root = make_repo(tmp_path, use_git=False)
    (root / "toykit" / "engine.py").write_text(
        '"""Base engine."""\n\n\nclass Engine:\n    """Base."""\n\n    def __init__(self, config):\n        self.config = config\n'
    )
    code, out, err = run_generate(str(root / RECIPE_REL), "--path", "kit", "--write")
    assert code == 0, err
    assert "parity test not generated: ToyVLMEngine has no get_batch, compute_loss" in err + out
    assert not (root / RECIPE_REL / "tests" / "skills" / "model-compile" / "test_compile_parity.py").exists()
    assert (root / RECIPE_REL / "tests" / "skills" / "model-compile" / "asserts.py").exists()


OWN_ASSERTS = '''"""The recipe's own compile checks (written by a person)."""

import inspect


def test_engine_structure(engine_class):
    source = inspect.getsource(engine_class.prepare_model)
    assert "self.model_kit.apply_model_compile" in source
    assert "compile" in source, "prepare_model must call apply_model_compile"
'''


def _switch_with_own_asserts(repo) -> str:
    """Wire the kit, replace the skill asserts by a person's own file, then switch to regional: its stderr."""
    recipe = str(repo / RECIPE_REL)
    assert run_generate(recipe, "--write")[0] == 0
    (repo / SKILL / "asserts.py").write_text(OWN_ASSERTS)
    _commit(repo)
    code, _, err = run_generate(recipe, "--path", "regional", "--reason", REASON, "--write", "--switch")
    assert code == 0, err
    return err


def test_a_switch_names_the_recipes_own_asserts_that_expect_the_kit_call(repo):
    """They are kept as written, and the output says which of them fail once the kit call is gone; an assert
    that names the kit call only in its message (a near miss) is not one of them."""
    err = _switch_with_own_asserts(repo)
    (note,) = [line for line in err.splitlines() if "expect the kit's apply_model_compile" in line]
    assert "the structure test fails on them until they are updated" in note
    assert note.endswith('`assert "self.model_kit.apply_model_compile" in source`')
    assert 'assert "self.model_kit.apply_model_compile" in source' in (repo / SKILL / "asserts.py").read_text()


def test_merged_hooks_get_every_import_they_use(repo):
    """The merge adds every import and helper a merged hook uses (a missing one would raise NameError only when the
    smoke runs): `ast`, `textwrap`, `_record`, the constants."""
    _switch_with_own_asserts(repo)
    merged = (repo / SKILL / "asserts.py").read_text()
    assert "def _record(hook, engine):" in merged and "def _on(engine):" in merged
    assert undefined_globals(merged, "asserts.py") == []


@pytest.mark.parametrize(
    ("code", "missing"),
    [
        ("def f():\n    return helper()\n", ["helper"]),
        ("import os.path\n\n\ndef f():\n    return os.path.join('a')\n", []),
        ("def f():\n    return len([])\n", []),  # a builtin
        ("def f():\n    global X\n    X = 1\n\n\ndef g():\n    return X\n", []),  # bound through `global`
        ("from helpers import *\n\n\ndef f():\n    return helper()\n", []),  # unknown: a star import
        ("class A:\n    size = LIMIT\n", ["LIMIT"]),  # a class body reads globals too
        ("def f(helper):\n    return helper()\n", []),  # near miss: a parameter, not a global
    ],
)
def test_undefined_globals(code: str, missing: list[str]) -> None:
    assert undefined_globals(code, "m.py") == missing


def test_a_merge_that_would_leave_a_name_undefined_is_refused(tmp_path: Path) -> None:
    generated = "def assert_after_train_end(engine):\n    return _helper_we_did_not_bring(engine)\n"
    with pytest.raises(InputError, match="would leave _helper_we_did_not_bring undefined there; nothing written"):
        merge_asserts(OWN_ASSERTS, generated, "recipes/r/tests/skills/model-compile/asserts.py", tmp_path)
