"""Golden renderings of every generate template, and each rendering parses.

Regenerate after an intended template change with
`MODEL_COMPILE_UPDATE_GOLDEN=1 pytest tests/golden/generate`.
"""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

import jinja2
import pytest
import yaml

from model_compile import templating
from model_compile.generate.planning.options import BACKENDS, CONFIG_EXPR, MODES

FILES = Path(__file__).parent / "files"
REASON = "vision tower has data dependent shapes"
BASE = {
    "config_expr": CONFIG_EXPR,
    "switch_expr": f"{CONFIG_EXPR}.enabled",
    "backend_expr": f"{CONFIG_EXPR}.backend",
    "mode_expr": f"{CONFIG_EXPR}.mode",
    "model_var": "model",
    "kit_attr": "self.model_kit",
    "reason": REASON,
}

CASES = {
    "compile/kit.py.j2": {**BASE, "target": "model", "kind": "kit"},
    "compile/submodule.py.j2": {**BASE, "target": "model.model.language_model", "kind": "submodule"},
    "compile/graph-break.py.j2": {**BASE, "target": "model.model.visual", "kind": "graph-break"},
    "compile/regional.py.j2": {**BASE, "target": "model.model.language_model.layers", "kind": "regional"},
    "compile/post-wrap.py.j2": {**BASE, "target": "parallelized_model", "kind": "post-wrap"},
    "compile/kit_init.py.j2": {"kit_attr": "self.model_kit", "kit_class": "MLLMModelKit", "config_annotation": "ToyConfig"},
    "compile/kit_attr.py.j2": {"kit_attr": "self.model_kit", "kit_class": "MLLMModelKit"},
    "config/compile_config.py.j2": {
        "class_name": "ToyCompileConfig",
        "base_class": "BaseModel",
        "config_dict": 'extra="forbid"',
        "backends": list(BACKENDS),
        "modes": list(MODES),
        "backend": "inductor",
        "mode": "default",
    },
    "config/compile_field.py.j2": {"class_name": "ToyCompileConfig"},
    "config/stage_compile.yaml.j2": {"indent": "  ", "step": "  ", "backend": "inductor", "mode": "default"},
    "recipe_base/conftest.py.j2": {
        "recipe_name": "toy",
        "world_size": 8,
        "world_size_why": "parallel.mesh of train.yaml: replicate -1 x shard 8 x tensor 1",
        "config_name": "train",
        "smoke_flag": "--run-smoke",
        "smoke_fixture": "run_smoke",
        "quote": "double",
        "line_length": 120,
    },
    "readme/compile_section.md.j2": {
        "hashes": "##",
        "kind": "submodule",
        "target": "model.model.language_model",
        "reason": REASON,
        "scope": "`model.model.language_model`",
        "eager": ["what `model` runs outside `model.model.language_model`"],
        "inside": [],
        "launch_command": "torchrun --nproc_per_node=8 -m toy.launch --config ./recipes/toy/configs/train.yaml model.compile.enabled=true",
        "test_command": "python -m pytest recipes/toy/tests/test_smoke.py -q --run-smoke --config-override model.compile.enabled=true",
        "tests_note": "",
        "stage_file": "recipes/toy/configs/train.yaml",
        "enable_command": 'model-compile generate recipes/toy --enable train --reason "<why compile is on in this stage>" --write',
        "enabled_default": "False",
    },
}
# Variants of a template (`<template>#<variant>`): the same file rendered with other variables.
CASES.update(
    {
        "compile/regional.py.j2#per-block": {
            **CASES["compile/regional.py.j2"],
            "loops": [{"container": "model.model.language_model.layers", "members": ["self_attn", "mlp"]}],
            "modules": [],
        },
        "compile/submodule.py.j2#several": {
            **CASES["compile/submodule.py.j2"],
            "modules": ["model.model.language_model", "model.lm_head"],
            "loops": [{"container": "model.model.visual.blocks", "members": ["attn"]}],
        },
        "readme/compile_section.md.j2#several": {
            **CASES["readme/compile_section.md.j2"],
            "kind": "regional",
            "targets": ["model.model.language_model.layers.*.self_attn", "model.model.language_model.layers.*.mlp"],
            "inside": [
                "`packing.segment_lengths`, replaced by apply_segment_patch (recipes/toy/model/patch.py:14), runs inside "
                "`model.model.language_model.layers.*.self_attn` (ToyAttention.forward)",
                "compile hazards in the repository's code the targets run: recipes/toy/model/patch.py:15 `.item()`: a "
                "tensor value read into Python (graph break)",
            ],
        },
    }
)
LONG_REASON = (
    "the vision tower computes position ids and cu_seqlens from grid_thw with tolist(), which breaks graphs "
    "and recompiles per image size; the decoder layers are where the time goes"
)


def _golden(name: str) -> Path:
    template, _, variant = name.partition("#")
    stem = template.replace("/", "__").removesuffix(".j2")
    return FILES / (f"{stem}#{variant}.golden" if variant else f"{stem}.golden")


def _template(name: str) -> str:
    return name.partition("#")[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    text = templating.render(_template(name), CASES[name])
    golden = _golden(name)
    if os.environ.get("MODEL_COMPILE_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"{name} changed; regenerate the golden file if intended"


@pytest.mark.parametrize("name", sorted(n for n in CASES if _template(n).endswith(".py.j2")))
def test_rendered_python_parses(name):
    text = templating.render(_template(name), CASES[name])
    ast.parse(text)  # a whole statement / class on its own
    # and as it lands: inside a method body (compile blocks) or a class body (__init__, fields)
    ast.parse("class Engine:\n    def prepare_model(self):\n" + textwrap.indent(text, "        ") + "        return model\n")
    ast.parse("class Engine:\n" + textwrap.indent(text, "    "))


def test_rendered_yaml_parses():
    text = templating.render("config/stage_compile.yaml.j2", CASES["config/stage_compile.yaml.j2"])
    assert yaml.safe_load("model:\n" + text) == {"model": {"compile": {"enabled": False, "backend": "inductor", "mode": "default"}}}


def test_fallback_blocks_carry_the_documentation_comment():
    for kind in ("submodule", "graph-break", "regional", "post-wrap"):
        text = templating.render(f"compile/{kind}.py.j2", CASES[f"compile/{kind}.py.j2"])
        assert f"# model-compile: {kind} - {REASON}" in text


@pytest.mark.parametrize("name", sorted(n for n in CASES if "#" not in n))  # variants add optional variables
def test_missing_variable_is_an_error(name):
    env = templating.environment()
    src = env.loader.get_source(env, name)[0]
    used = [key for key in CASES[name] if key in src]
    assert used
    for key in used:
        ctx = {k: v for k, v in CASES[name].items() if k != key}
        with pytest.raises(jinja2.UndefinedError):
            templating.render(name, ctx)


def test_wrapped_reason_lines_render_as_comment_lines():
    """A reason given as wrapped lines becomes the marker line plus `# ` continuation lines."""
    case = {**CASES["compile/regional.py.j2"], "reason": LONG_REASON, "reason_lines": ["first part", "second part"]}
    text = templating.render("compile/regional.py.j2", case)
    assert "    # model-compile: regional - first part\n    # second part\n    for block in" in text
