"""Team template overrides: --templates DIR or [tool.model-compile] templates in pyproject.toml."""

from __future__ import annotations

from gen_helpers import ENGINE_REL, REASON, RECIPE_REL, run_generate

KIT_OVERRIDE = """\
if {{ config_expr }}.enabled:
    # team style: compile through the kit, logged
    {{ model_var }} = {{ kit_attr }}.apply_model_compile({{ model_var }}, backend={{ config_expr }}.backend, mode={{ config_expr }}.mode)
"""


def _write_override(folder):
    (folder / "compile").mkdir(parents=True)
    (folder / "compile" / "kit.py.j2").write_text(KIT_OVERRIDE)
    return folder


def test_templates_flag_overrides_and_missing_ones_fall_back(repo, tmp_path):
    override = _write_override(tmp_path / "team_templates")
    code, out, err = run_generate(str(repo / RECIPE_REL), "--templates", str(override), "--write")
    assert code == 0, err
    engine = (repo / ENGINE_REL).read_text()
    assert "# team style: compile through the kit, logged" in engine
    # config templates were not overridden: the built-ins rendered them
    assert "class ToyVLMCompileConfig(BaseModel):" in (repo / RECIPE_REL / "configs" / "schema.py").read_text()


def test_pyproject_override(repo):
    _write_override(repo / "ci" / "mc_templates")
    (repo / "pyproject.toml").write_text('[tool.model-compile]\ntemplates = "ci/mc_templates"\n')
    code, out, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0, err
    assert "+            # team style: compile through the kit, logged" in out


def test_broken_override_writes_nothing(repo, tmp_path):
    folder = tmp_path / "bad"
    (folder / "compile").mkdir(parents=True)
    (folder / "compile" / "submodule.py.j2").write_text("if {{ config_expr }}.enabled\n    {{ target }}.compile()\n")
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "submodule", "--reason", REASON, "--templates", str(folder), "--write"
    )
    assert code == 2 and "does not parse" in err
    assert (
        "compile" not in (repo / ENGINE_REL).read_text().split("def prepare_model")[1].split("def prepare_optimizer")[0]
    )


def test_missing_templates_dir_is_input_error(repo, tmp_path):
    code, _, err = run_generate(str(repo / RECIPE_REL), "--templates", str(tmp_path / "nope"))
    assert code == 2 and "--templates" in err
