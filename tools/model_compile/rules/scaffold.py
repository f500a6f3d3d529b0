"""A canonical kit recipe that rule examples start from and vary."""

from __future__ import annotations

import textwrap

from model_compile.rules.base import Example


def replace_once(text: str, old: str, new: str) -> str:
    """`text` with its one occurrence of `old` replaced by `new`.

    Rule examples are variations of shared texts (the canonical body, schema
    and stage); a plain `str.replace` whose anchor has drifted returns the text
    unchanged and the example silently tests the canonical recipe instead.
    """
    count = text.count(old)
    if count != 1:
        raise ValueError(f"anchor {old!r} occurs {count} times in the example text; expected exactly once")
    return text.replace(old, new)

CANONICAL_BODY = """\
model = self.model_kit.build_model(self.config.model.path).to(self.device)
model = self.model_kit.apply_model_patches(model, [patch_attention])
model = self.model_kit.apply_freeze_policy(model, freeze_vit=self.config.model.freeze_vit)
for parameter in model.parameters():
    if parameter.requires_grad:
        parameter.data = parameter.data.to(dtype=torch.float32)
if self.config.model.gradient_checkpointing.enabled:
    model = self.model_kit.apply_gradient_checkpointing(model)
if self.config.model.compile.enabled:
    model = self.model_kit.apply_model_compile(
        model,
        backend=self.config.model.compile.backend,
        mode=self.config.model.compile.mode,
    )
return parallelize_model(model, parallel_mesh=self.parallel_mesh)
"""

ENGINE = '''\
"""Example engine."""

import torch

from example_engine.distributed.parallelize import parallelize_model
from example_engine.engine import Engine
from example_engine.kit import MLLMModelKit

from ..configs.schema import ExampleConfig
from ..model import patch_attention


class ExampleEngine(Engine):
    ConfigClass = ExampleConfig

    def __init__(self, config):
        super().__init__(config)
        self.model_kit = MLLMModelKit()
{init}
    def prepare_model(self):
{body}
'''

SCHEMA = '''\
from typing import Literal

from pydantic import BaseModel, Field


class ExampleCheckpointingConfig(BaseModel):
    enabled: bool = False


class ExampleCompileConfig(BaseModel):
    enabled: bool = False
    backend: Literal["inductor", "aot_eager", "eager"] = "inductor"
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"


class ExampleModelConfig(BaseModel):
    path: str = "./pretrained"
    freeze_vit: bool = True
    gradient_checkpointing: ExampleCheckpointingConfig = Field(default_factory=ExampleCheckpointingConfig)
    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)


class ExampleConfig(BaseModel):
    engine: str = "ExampleEngine"
    model: ExampleModelConfig = Field(default_factory=ExampleModelConfig)
'''

STAGE = """\
engine: ExampleEngine
model:
  path: ./pretrained
  freeze_vit: true
  compile:
    enabled: false
    backend: inductor
    mode: default
"""

MODEL_INIT = '''\
def patch_attention(model):
    return model
'''

README = "# Example recipe\n\nA canonical kit recipe.\n"


def example_files(ex: Example, prefix: str = "recipes/example") -> dict[str, str]:
    """Files of an example recipe inside a repository tree."""
    if ex.engine is not None:
        engine = ex.engine
    else:
        body = textwrap.indent(textwrap.dedent(ex.body if ex.body is not None else CANONICAL_BODY), " " * 8)
        init = textwrap.indent(textwrap.dedent(ex.init), " " * 8) + "\n" if ex.init else ""
        engine = ENGINE.format(body=body.rstrip("\n") + "\n", init=init)
    files = {
        f"{prefix}/engine/example_engine.py": engine,
        f"{prefix}/engine/__init__.py": "",
        f"{prefix}/configs/schema.py": ex.schema if ex.schema is not None else SCHEMA,
        f"{prefix}/model/__init__.py": MODEL_INIT,
        f"{prefix}/README.md": ex.readme if ex.readme is not None else README,
    }
    for name, text in (ex.stages if ex.stages is not None else {"train": STAGE}).items():
        files[f"{prefix}/configs/{name}.yaml"] = text
    for path, text in ex.files.items():
        files[path if "/" in path and path.startswith(("recipes/", "example_engine/")) else f"{prefix}/{path}"] = text
    return files
