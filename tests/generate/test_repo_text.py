"""Generated text that fits the target repo: line length, launch syntax, test options, wrapped reasons."""

from __future__ import annotations

from gen_helpers import ENGINE_REL, RECIPE_REL, run_generate

from model_compile.analyze import analyze_path
from model_compile.generate.style.repo_style import read_style
from model_compile.generate.style.repo_text import wrap_reason
from model_compile.parse.launch import find_launch

REASON_200 = (
    "the vision tower computes position ids and cu_seqlens from grid_thw with tolist(), which breaks graphs and "
    "recompiles per image size, while the decoder layers are where the step time goes"
)
HYDRA_README = """# toy_vlm

## Run

```bash
torchrun --nproc_per_node=8 -m toykit.launch --config ./recipes/toy_vlm/configs/train.yaml
```

Common overrides:

```bash
torchrun --nproc_per_node=8 -m toykit.launch \\
  --config ./recipes/toy_vlm/configs/train.yaml \\
  data.train_path=./data/meta.json
```
"""
CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--run-smoke", action="store_true", default=False)
    parser.addoption("--world-size", type=int, default=8)
    parser.addoption("--config-override", action="append", default=[])
"""


def test_line_length_comes_from_the_formatter_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 120\n")
    assert read_style(tmp_path).line_length == 120
    (tmp_path / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: x\n  hooks:\n  - id: ruff-format\n    args: [--line-length=110]\n"
    )
    assert read_style(tmp_path).line_length == 110  # the hook's args are what pre-commit runs


def test_launch_command_and_its_override_syntax():
    launch = find_launch([("recipes/toy_vlm/README.md", HYDRA_README)], "toy_vlm")
    assert launch is not None and launch.style == "dotlist"
    assert launch.with_override("model.compile.enabled=true") == (
        "torchrun --nproc_per_node=8 -m toykit.launch --config ./recipes/toy_vlm/configs/train.yaml "
        "model.compile.enabled=true"
    )
    flag = "```bash\npython -m toykit.train --config recipes/toy_vlm/configs/a.yaml --cfg-options optim.lr=1e-4\n```\n"
    launch = find_launch([("README.md", flag)], "toy_vlm")
    assert launch is not None and launch.with_override("model.compile.enabled=true").endswith(
        "a.yaml --cfg-options model.compile.enabled=true"
    )
    pytest_only = "```bash\npytest recipes/toy_vlm/tests -q --config-override model.compile.enabled=true\n```\n"
    assert find_launch([("README.md", pytest_only)], "toy_vlm") is None  # a test command is no launcher


def test_wrap_reason_fits_the_line_length():
    lines = wrap_reason(REASON_200, "regional", 12, 88)
    assert " ".join(lines) == REASON_200
    assert 12 + len("# model-compile: regional - ") + len(lines[0]) <= 88
    assert all(12 + 2 + len(line) <= 88 for line in lines[1:]) and len(lines) >= 3


def test_generated_comment_and_readme_fit_the_repo(repo):
    (repo / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    (repo / RECIPE_REL / "README.md").write_text(HYDRA_README)
    (repo / RECIPE_REL / "tests").mkdir()
    (repo / RECIPE_REL / "tests" / "conftest.py").write_text(CONFTEST)
    (repo / RECIPE_REL / "tests" / "test_smoke.py").write_text("def test_smoke():\n    pass\n")
    rc, _, err = run_generate(
        str(repo / RECIPE_REL),
        "--path",
        "regional",
        "--target",
        "model.model.language_model.layers",
        "--reason",
        REASON_200,
        "--write",
        "--force",
    )
    assert rc == 0, err
    engine = (repo / ENGINE_REL).read_text()
    comment = [ln for ln in engine.splitlines() if ln.lstrip().startswith("#")]
    marker = next(i for i, ln in enumerate(comment) if "# model-compile: regional - " in ln)
    assert all(len(ln) <= 100 for ln in comment)
    assert len(comment) - marker >= 3  # the reason spans several comment lines
    # the documentation reader joins the lines back into the whole reason
    recipe = analyze_path(repo / RECIPE_REL).recipes[0]
    assert recipe.compile_path == "fallback:regional"
    doc = next(d for d in recipe.documentation if d.source == "comment" and d.kind == "regional")
    assert doc.reason == REASON_200
    # the README says how to run with compile on, each in its own syntax
    readme = (repo / RECIPE_REL / "README.md").read_text()
    assert all(len(line) <= 100 for line in readme.splitlines())  # the repository's line length, commands too
    assert (
        "torchrun --nproc_per_node=8 -m toykit.launch --config ./recipes/toy_vlm/configs/train.yaml \\\n"
        "  model.compile.enabled=true" in readme
    )
    assert (
        "python -m pytest recipes/toy_vlm/tests/test_smoke.py -q --run-smoke \\\n"
        "  --config-override model.compile.enabled=true" in readme
    )
    assert "enable it with `--config-override" not in readme
    assert "- Compiled scope: N blocks of `model.model.language_model.layers`" in readme
    assert "run with compile on: torchrun" in err  # the printed command, too
    assert "enabled" not in {d.kind for d in recipe.documentation}


def test_readme_without_launcher_points_at_the_stage_yaml(repo):
    rc, _, err = run_generate(
        str(repo / RECIPE_REL),
        "--path",
        "submodule",
        "--target",
        "model.model.language_model",
        "--reason",
        "only the language model is on the hot path",
        "--write",
        "--force",
    )
    assert rc == 0, err
    readme = (repo / RECIPE_REL / "README.md").read_text()
    # no hand edit of the YAML: the tool's --enable, which writes the intent note (as the skill says)
    assert "Turn compile on in a stage YAML, with the intent note the review asks for:" in readme
    assert "model-compile generate recipes/toy_vlm --enable train --reason" in readme
    # the section documents the fallback, never an intentional `enabled: true` default (MC203 stays live)
    kinds = {d.kind for d in analyze_path(repo / RECIPE_REL).recipes[0].documentation if d.source == "readme"}
    assert "submodule" in kinds and "enabled" not in kinds


def test_a_long_compile_call_is_split_one_argument_a_line():
    from model_compile.generate.edits.snippets import fit_calls

    block = "if c.enabled:\n    model.model.language_model.compile(backend=c.backend, mode=c.mode)\n"
    assert fit_calls(block, 8, 120) == block
    assert fit_calls(block, 8, 60) == (
        "if c.enabled:\n    model.model.language_model.compile(\n        backend=c.backend,\n        mode=c.mode,\n    )\n"
    )
