"""Schema, stage YAML and README edits."""

from __future__ import annotations

import ast

import pydantic
import pytest
import yaml
from gen_helpers import REASON, RECIPE_REL, run_generate
from test_generate_engine import _only_insertions


def _compile_class_source(schema: str) -> str:
    tree = ast.parse(schema)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ToyVLMCompileConfig")
    return ast.get_source_segment(schema, cls)


def test_schema_gets_literal_typed_section_and_field(repo):
    schema_path = repo / RECIPE_REL / "configs" / "schema.py"
    old = schema_path.read_text()
    assert run_generate(str(repo / RECIPE_REL), "--write", "--backend", "aot_eager")[0] == 0
    new = schema_path.read_text()
    assert "from typing import Literal\n" in new
    assert "    compile: ToyVLMCompileConfig = Field(default_factory=ToyVLMCompileConfig)\n\n    def describe" in new
    # the new class sits right above the model class; nothing else moves
    assert new.index("class ToyVLMCompileConfig") < new.index("class ToyVLMModelConfig")
    added = _only_insertions(old, new)
    assert any("class ToyVLMCompileConfig" in line for line in added)
    # the generated section validates: invalid backend/mode fail, defaults as asked
    ns = {"BaseModel": pydantic.BaseModel, "ConfigDict": pydantic.ConfigDict}
    exec(compile("from typing import Literal\n" + _compile_class_source(new), "schema", "exec", dont_inherit=True), ns)
    cls = ns["ToyVLMCompileConfig"]
    cfg = cls()
    assert cfg.enabled is False and cfg.backend == "aot_eager" and cfg.mode == "default"
    with pytest.raises(pydantic.ValidationError):
        cls(backend="tvm")
    with pytest.raises(pydantic.ValidationError):
        cls(mode="fast")
    with pytest.raises(pydantic.ValidationError):
        cls(unknown=1)  # extra="forbid" reused from the model section


def test_schema_with_existing_compile_field_is_left_alone(repo):
    recipe = str(repo / RECIPE_REL)
    assert run_generate(recipe, "--write")[0] == 0
    schema = (repo / RECIPE_REL / "configs" / "schema.py").read_text()
    assert run_generate(recipe, "--path", "regional", "--reason", REASON, "--write", "--force", "--switch")[0] == 0
    assert (repo / RECIPE_REL / "configs" / "schema.py").read_text() == schema


def test_yaml_comments_and_bytes_preserved(repo):
    configs = repo / RECIPE_REL / "configs"
    train_old = (configs / "train.yaml").read_text()
    stage2_old = (configs / "stage2.yaml").read_text()
    assert run_generate(str(repo / RECIPE_REL), "--write", "--mode", "max-autotune")[0] == 0
    train = (configs / "train.yaml").read_text()
    stage2 = (configs / "stage2.yaml").read_text()
    for old, new in ((train_old, train), (stage2_old, stage2)):
        added = _only_insertions(old, new)
        assert len(added) == 4
        data = yaml.safe_load(new)
        assert data["model"]["compile"] == {"enabled": False, "backend": "inductor", "mode": "max-autotune"}
    # the block ends the model section, before the comment that opens the next one
    assert "    use_reentrant: false\n  compile:\n    enabled: false\n" in train
    assert (
        "  compile:\n    enabled: false\n    backend: inductor\n    mode: max-autotune\n\n# optimizer settings follow\n"
        in train
    )
    # four-space YAML gets four-space indentation
    assert "    freeze_vit: false\n    compile:\n        enabled: false\n" in stage2
    assert "optim: {lr: 2.0e-5}  # flow style stays as is\n" in stage2


def test_yaml_without_model_section_gets_one(repo):
    stage = repo / RECIPE_REL / "configs" / "eval.yaml"
    stage.write_text("engine: ToyVLMEngine\nseed: 1")
    assert run_generate(str(repo / RECIPE_REL), "--write", "--force")[0] == 0
    text = stage.read_text()
    assert text.startswith("engine: ToyVLMEngine\nseed: 1\nmodel:\n  compile:\n")
    assert yaml.safe_load(text)["model"]["compile"]["enabled"] is False


def test_readme_section_is_replaced_not_duplicated(repo):
    recipe = str(repo / RECIPE_REL)
    readme = repo / RECIPE_REL / "README.md"
    readme.write_text(readme.read_text() + "\n## Compile\n\nold text\n\n## License\n\nMIT\n")
    assert run_generate(recipe, "--path", "submodule", "--reason", REASON, "--write", "--force")[0] == 0
    assert (
        run_generate(
            recipe,
            "--path",
            "regional",
            "--reason",
            "per block compile keeps cold start short",
            "--write",
            "--force",
            "--switch",
        )[0]
        == 0
    )
    text = readme.read_text()
    assert text.count("## Compile") == 1 and "old text" not in text
    assert "**regional**" in text and "per block compile keeps cold start short" in text
    assert "submodule" not in text
    assert text.endswith("\n## License\n\nMIT\n") and "## Usage" in text


def test_readme_is_created_when_missing(repo):
    (repo / RECIPE_REL / "README.md").unlink()
    assert (
        run_generate(str(repo / RECIPE_REL), "--path", "graph-break", "--reason", REASON, "--write", "--force")[0] == 0
    )
    text = (repo / RECIPE_REL / "README.md").read_text()
    assert text.startswith("## Compile\n") and "graph-break" in text and REASON in text
