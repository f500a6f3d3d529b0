"""A recipe without tests gets its base tests from the repository's templates, and the conftest.py they need.

The templates here are written for these tests (a smoke template with the
constants and the copy instructions such templates carry); the sibling recipe's
conftest.py registers the options generate should follow.
"""

from __future__ import annotations

import ast
import shutil
import subprocess

import git
import pytest
from gen_helpers import RECIPE_REL, run_generate

from model_compile.generate.edits import base_tests

SMOKE_TEMPLATE = '''"""Smoke tests for a recipe.

Copy this file to ``recipes/<recipe>/tests/test_smoke.py`` and set the
constants below for your recipe. The test spawns one process per rank and
runs the engine's training loop.
"""

from pathlib import Path

CONFIG_NAME = "train"
WORLD_SIZE = 1
CONFIG_OVERRIDES: tuple[str, ...] = ()
TIMEOUT = 60


def run_rank(rank, world_size, config_name, overrides):
    """One rank."""
    return (rank, world_size, config_name, overrides)


def test_smoke(tmp_path: Path):
    """Run the smoke across ``WORLD_SIZE`` ranks."""
    results = [run_rank(r, WORLD_SIZE, CONFIG_NAME, CONFIG_OVERRIDES) for r in range(WORLD_SIZE)]
    assert len(results) == WORLD_SIZE
'''

SIBLING_CONFTEST = '''"""Options of a sibling recipe."""


def pytest_addoption(parser):
    """Register the options."""
    parser.addoption("--run-smoke", action="store_true", default=False, help="run it")
    parser.addoption("--world-size", type=int, default=4, help="ranks")
    parser.addoption("--config-override", action="append", default=[], help="dotlist")
'''

MESH = "\nparallel:\n  mesh:\n    replicate: -1\n    shard: 4\n    tensor: 2\n"


def _commit(root):
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("setup")


@pytest.fixture
def templated(repo):
    (repo / "tests" / "templates").mkdir(parents=True)
    (repo / "tests" / "templates" / "test_smoke.py.template").write_text(SMOKE_TEMPLATE)
    stage = repo / RECIPE_REL / "configs" / "train.yaml"
    stage.write_text(stage.read_text() + MESH)
    sibling = repo / "recipes" / "other"
    (sibling / "configs").mkdir(exist_ok=True)
    (sibling / "tests").mkdir(exist_ok=True)
    (sibling / "tests" / "conftest.py").write_text(SIBLING_CONFTEST)
    _commit(repo)
    return repo


def test_conftest_follows_the_siblings_and_the_stage_mesh(templated):
    code, _, err = run_generate(str(templated / RECIPE_REL), "--write")
    assert code == 0, err
    conftest = (templated / RECIPE_REL / "tests" / "conftest.py").read_text()
    ast.parse(conftest)
    tree = ast.parse(conftest)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "addoption"]
    options = {
        c.args[0].value: {k.arg: ast.literal_eval(k.value) for k in c.keywords if k.arg != "type"} for c in calls
    }
    assert options["--world-size"]["default"] == 8  # replicate -1 (fills the rest) x shard 4 x tensor 2
    assert options["--config-name"]["default"] == "train"
    assert options["--config-override"]["action"] == "append"
    assert options["--run-smoke"]["action"] == "store_true"  # the sibling gates its multi-rank smoke
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert {f.name for f in functions} == {
        "pytest_addoption",
        "run_smoke",
        "world_size",
        "config_name",
        "config_overrides",
    }
    assert all(ast.get_docstring(f) for f in functions) and ast.get_docstring(tree)
    assert "tests/conftest.py was missing: created with the sibling recipes' options" in err
    assert "--world-size (default 8: parallel.mesh of train.yaml: replicate -1 x shard 4 x tensor 2 (a -1 fills" in err
    assert "the stage fixes no world size; the least is shown)" in err
    assert (
        "recipe smoke test with compile on: python -m pytest recipes/toy_vlm/tests/test_smoke.py -q --run-smoke "
        "--config-name train --world-size 8 --config-override model.compile.enabled=true" in err  # the stage's own
    )


def test_smoke_from_the_template_is_filled_and_takes_the_fixtures(templated):
    code, _, err = run_generate(str(templated / RECIPE_REL), "--write")
    assert code == 0, err
    smoke = (templated / RECIPE_REL / "tests" / "test_smoke.py").read_text()
    tree = ast.parse(smoke)
    doc = ast.get_docstring(tree)
    assert doc.startswith("Smoke tests for the toy_vlm recipe.") and "Copy this file" not in smoke
    assert "The test spawns one process per rank" in doc  # the rest of the paragraph stays
    assert "<recipe>" not in smoke
    assigned = {
        t.id
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets)
    }
    assert assigned == {"TIMEOUT"}  # the constants became options
    test = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "test_smoke")
    assert [a.arg for a in test.args.args] == ["run_smoke", "world_size", "config_name", "config_overrides", "tmp_path"]
    body = ast.unparse(test)
    assert "WORLD_SIZE" not in body and "run_rank(r, world_size, config_name, config_overrides)" in body
    assert "pytest.skip(" in body and "import pytest" in smoke
    assert "test_smoke takes the conftest's --world-size, --config-name, --config-override" in err


@pytest.mark.skipif(shutil.which("ruff") is None and not shutil.which(".venv/bin/ruff"), reason="ruff not installed")
def test_created_base_tests_pass_the_formatter(templated, tmp_path):
    ruff = shutil.which("ruff") or ".venv/bin/ruff"
    assert run_generate(str(templated / RECIPE_REL), "--write")[0] == 0
    for name in ("conftest.py", "test_smoke.py"):
        path = templated / RECIPE_REL / "tests" / name
        done = subprocess.run(
            [ruff, "format", "--check", "--isolated", "--line-length", "120", str(path)], capture_output=True, text=True
        )
        assert done.returncode == 0, (name, done.stdout, done.stderr)


def test_a_conftest_a_person_wrote_is_never_replaced(templated):
    own = '"""Ours."""\n'
    (templated / RECIPE_REL / "tests").mkdir(parents=True)
    (templated / RECIPE_REL / "tests" / "conftest.py").write_text(own)
    _commit(templated)
    code, _, err = run_generate(str(templated / RECIPE_REL), "--write")
    assert code == 0, err
    assert (templated / RECIPE_REL / "tests" / "conftest.py").read_text() == own
    smoke = (templated / RECIPE_REL / "tests" / "test_smoke.py").read_text()
    assert "WORLD_SIZE = 8" in smoke and 'CONFIG_NAME = "train"' in smoke  # filled, not wired to options it lacks


def test_no_sibling_gate_means_no_switch(templated):
    conftest = templated / "recipes" / "other" / "tests" / "conftest.py"
    conftest.write_text(
        SIBLING_CONFTEST.replace(
            '    parser.addoption("--run-smoke", action="store_true", default=False, help="run it")\n', ""
        )
    )
    _commit(templated)
    assert run_generate(str(templated / RECIPE_REL), "--write")[0] == 0
    text = (templated / RECIPE_REL / "tests" / "conftest.py").read_text()
    assert (
        "--run-smoke" not in text
        and "run_smoke" not in (templated / RECIPE_REL / "tests" / "test_smoke.py").read_text()
    )


def test_drop_instructions_keeps_what_is_not_an_instruction():
    doc = "Tests for a recipe.\n\nCopy this file to x.py and edit it. Then it checks y.\n\nMore text.\n"
    assert base_tests.drop_instructions(doc, "toy") == "Tests for the toy recipe.\n\nThen it checks y.\n\nMore text.\n"
    assert base_tests.drop_instructions("Plain.\n", "toy") == "Plain.\n"


def test_world_size_of_a_stage_without_a_mesh_is_one(tmp_path):
    stage = tmp_path / "s.yaml"
    stage.write_text("model: {}\n")
    assert base_tests.mesh_world_size(stage, "s.yaml").size == 1


@pytest.mark.parametrize(
    ("mesh", "size"),
    [
        ("{replicate: 1, shard: -1, tensor: 1}", 2),  # one rank would be DDP, not the stage's FSDP2
        ("{replicate: -1, shard: 1, tensor: 1}", 1),  # data parallel: one rank is the same wrap
        ("{replicate: 1, shard: 8, tensor: 1}", 8),
    ],
)
def test_a_filling_shard_gets_the_ranks_its_wrap_needs(tmp_path, mesh, size):
    stage = tmp_path / "s.yaml"
    stage.write_text(f"parallel:\n  mesh: {mesh}\n")
    ws = base_tests.mesh_world_size(stage, "s.yaml")
    assert ws.size == size and (("FSDP2" in ws.why) == (size == 2))
