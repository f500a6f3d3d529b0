"""Findings whose weight comes from what a stage does: MC407's severity and consequence, the order findings are
listed in, and one finding per root (MC201 names the dead gate MC210 would have reported)."""

from __future__ import annotations

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.rules.base import Example
from model_compile.rules.config_schema import NO_COMPILE_SCHEMA
from model_compile.rules.placement import _FSDP2_PER_BLOCK
from model_compile.rules.scaffold import STAGE, example_files, replace_once

KIT = (
    "class MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)
MESH8 = "parallel:\n  mesh:\n    replicate: -1\n    shard: 8\n    tensor: 1\n"
MESH1 = MESH8.replace("shard: 8", "shard: 1")


def _stage(compile_on: bool, checkpointing: bool | None, mesh: str = MESH8) -> str:
    text = STAGE.replace("enabled: false", "enabled: true") if compile_on else STAGE
    if checkpointing is not None:
        text = replace_once(
            text, "  compile:\n", f"  gradient_checkpointing:\n    enabled: {str(checkpointing).lower()}\n  compile:\n"
        )
    return text + mesh


def _findings(stages: dict[str, str], **kw):
    files = {"example_engine/kit/mllm/model.py": KIT, **example_files(Example(stages=stages, **kw))}
    return analyze_tree(MemoryTree(files)).recipes[0].findings


def test_mc407_is_a_warning_that_leads_where_a_sharded_stage_compiles():
    findings = _findings({"stage1": _stage(False, None, MESH1), "stage2": _stage(True, None)}, files=_FSDP2_PER_BLOCK)
    warnings = [f for f in findings if f.severity == "warning"]
    assert [f.rule for f in warnings][0] == "MC407"  # before MC203 on configs/stage2.yaml, which sorts first by file
    assert "MC203" in {f.rule for f in warnings}
    mc407 = warnings[0]
    assert "compile is on in stage2: there the frame that loops over the blocks breaks" in mc407.message
    assert "stage1 uses DDP" in mc407.message


def test_mc407_names_the_checkpointed_stages_where_no_block_compiles():
    findings = _findings(
        {"stage2": _stage(True, True), "stage3": _stage(True, False), "stage4": _stage(True, None)},
        files=_FSDP2_PER_BLOCK,
    )
    (mc407,) = [f for f in findings if f.rule == "MC407"]
    assert mc407.severity == "warning"
    assert "with gradient checkpointing on (stage2) not even that: no block compiles" in mc407.message
    assert "stage3" not in mc407.message.split("checkpointing on (")[1].split(")")[0]


def test_mc407_stays_info_where_no_sharded_stage_compiles():
    findings = _findings({"stage1": _stage(True, True, MESH1), "stage2": _stage(False, True)}, files=_FSDP2_PER_BLOCK)
    (mc407,) = [f for f in findings if f.rule == "MC407"]
    assert mc407.severity == "info"
    assert "stage2 trains eager (compile off): this applies once enabled" in mc407.message


def test_a_schema_without_compile_is_one_finding_naming_the_dead_gate():
    bare = "engine: ExampleEngine\nmodel:\n  path: ./pretrained\noptim:\n  compile: false\n"
    findings = _findings({"train": bare}, schema=NO_COMPILE_SCHEMA)
    rules = [f.rule for f in findings]
    assert "MC210" not in rules
    (mc201,) = [f for f in findings if f.rule == "MC201"]
    assert "reads `model.compile.enabled`, which no stage YAML sets either (the stages set `optim.compile`)" in (
        mc201.message
    )
    # where the repository does not select MC201, MC210 still says it
    alone = _findings({"train": bare}, schema=NO_COMPILE_SCHEMA, files={"/pyproject.toml": IGNORE_MC201})
    assert [f.rule for f in alone if f.rule in ("MC201", "MC210")] == ["MC210"]


IGNORE_MC201 = '[tool.model-compile]\nignore = ["MC201"]\n'


SMOKE = '''"""A smoke test of the recipe's own kind (its own fixture, written here)."""

from example_engine.testing import load_smoke_test_config


def smoke_process(config_name, config_overrides):
    return load_smoke_test_config(
        config_name,
        config_overrides=config_overrides,
        extra_override={"data": {"cache": False}, "model": {"compile": False}, "optim": {"steps": 1}},
    )
'''


def test_a_smoke_test_whose_compile_override_the_schema_rejects_is_the_first_finding():
    findings = _findings({"train": _stage(True, None)}, files={"tests/test_smoke.py": SMOKE, **_FSDP2_PER_BLOCK})
    first = findings[0]
    assert (first.rule, first.severity, first.file) == ("MC211", "error", "recipes/example/tests/test_smoke.py")
    assert "smoke_process overrides `model.compile` with `False`" in first.message
    assert "every run of this test fails config validation as configured" in first.message
    assert findings[1].rule == "MC407"  # the warning that states what the stage does leads the warnings
