"""Compile vs distributed wrapping: stage meshes (parse/stages.py) and the kit facts in MC408's message."""

from __future__ import annotations

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.parse.stages import stage_facts
from model_compile.rules.base import Example
from model_compile.rules.scaffold import STAGE, example_files
from model_compile.rules.wrapping import _KIT_AFTER_WRAP

KIT = (
    "import torch\n\n\nclass MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    '        if hasattr(model, "model") and hasattr(model.model, "visual"):\n'
    "            model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)


def _mesh(shard: int) -> str:
    return f"parallel:\n  mesh:\n    replicate: -1\n    shard: {shard}\n    tensor: 1\n"


def test_stage_mesh_is_read_statically() -> None:
    ddp = stage_facts(_mesh(1) + STAGE, "c/s1.yaml", "s1")
    assert ddp.mesh == {"replicate": -1, "shard": 1, "tensor": 1} and ddp.mesh_line == 4 and ddp.wrapping == "ddp"
    assert stage_facts(_mesh(-1), "c/s.yaml", "s").wrapping == "fsdp2"
    assert stage_facts(_mesh(8), "c/s.yaml", "s").wrapping == "fsdp2"
    assert stage_facts(STAGE, "c/s.yaml", "s").wrapping is None
    assert stage_facts("parallel:\n  mesh:\n    shard: lots\n", "c/s.yaml", "s").mesh == {}


def test_kit_after_wrap_names_the_kit_lookup_and_the_ddp_stages() -> None:
    stages = {"stage1": _mesh(1) + STAGE, "stage2": _mesh(8) + STAGE}
    files = {"example_engine/kit/mllm/model.py": KIT, **example_files(Example(body=_KIT_AFTER_WRAP, stages=stages))}
    report = analyze_tree(MemoryTree(files))
    (f,) = [f for f in report.all_findings() if f.rule == "MC408"]
    assert "`hasattr(model, 'model') and hasattr(model.model, 'visual')`" in f.message
    assert "in stage1 (DDP, parallel.mesh.shard: 1) that region is silently compiled" in f.message
    assert "in stage2 (FSDP2 per block) compile traces the sharding hooks" in f.message
    assert f.fix.startswith("move the kit call before `parallelize_model(...)`")
    assert not [f for f in report.all_findings() if f.rule == "MC404"]
