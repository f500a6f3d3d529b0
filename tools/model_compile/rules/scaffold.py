"""A canonical kit recipe that rule examples start from and vary."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from model_compile.rules.base import Example

# `  # <- MC404` at the end of a line of an example marks the line a finding of
# MC404 must land on; render_example() strips it before the rule sees the text.
MARKER_RE = re.compile(r"[ \t]*# <- (MC\d{3})[ \t]*$", re.MULTILINE)
_MARKER_RE_BYTES = re.compile(MARKER_RE.pattern.encode(), re.MULTILINE)


@dataclass(frozen=True)
class Mark:
    """An expected finding: `rule` at `file:line` of the rendered example."""

    file: str
    line: int
    rule: str


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


def mark(text: str, anchor: str, rule: str) -> str:
    """`text` with `  # <- RULE` appended to the one line that contains `anchor`.

    For lines that come from a shared text (the canonical body, schema or
    engine template); a line written out in the example gets the marker inline.
    """
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if anchor in line]
    if len(hits) != 1:
        raise ValueError(f"anchor {anchor!r} is on {len(hits)} lines of the example text; expected exactly one")
    i = hits[0]
    content = lines[i].rstrip("\r\n")
    lines[i] = f"{content}  # <- {rule}{lines[i][len(content) :]}"
    return "".join(lines)


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

SCHEMA = """\
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
"""

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

# The older flat form: the switch is a bool on the model config, its choices sit beside it.
FLAT_SCHEMA = replace_once(
    SCHEMA,
    "    compile: ExampleCompileConfig = Field(default_factory=ExampleCompileConfig)\n",
    '    compile: bool = False\n    compile_backend: str = "inductor"\n    compile_mode: str = "default"\n',
)
FLAT_STAGE = replace_once(
    STAGE,
    "  compile:\n    enabled: false\n    backend: inductor\n    mode: default\n",
    "  compile: false\n  compile_backend: inductor\n  compile_mode: default\n",
)
FLAT_BODY = replace_once(
    CANONICAL_BODY,
    "if self.config.model.compile.enabled:\n"
    "    model = self.model_kit.apply_model_compile(\n"
    "        model,\n"
    "        backend=self.config.model.compile.backend,\n"
    "        mode=self.config.model.compile.mode,\n"
    "    )\n",
    "if self.config.model.compile:\n"
    "    model = self.model_kit.apply_model_compile(\n"
    "        model,\n"
    "        backend=self.config.model.compile_backend,\n"
    "        mode=self.config.model.compile_mode,\n"
    "    )\n",
)


MODEL_INIT = """\
def patch_attention(model):
    return model
"""

README = "# Example recipe\n\nA canonical kit recipe.\n"


def engine_text(body: str | None = None, init: str | None = None) -> str:
    """The example engine file around a `prepare_model` body (default: the canonical one)."""
    body = textwrap.indent(textwrap.dedent(body if body is not None else CANONICAL_BODY), " " * 8)
    init = textwrap.indent(textwrap.dedent(init), " " * 8) + "\n" if init else ""
    return ENGINE.format(body=body.rstrip("\n") + "\n", init=init)


def render_example(ex: Example, prefix: str = "recipes/example") -> tuple[dict[str, str | bytes], list[Mark]]:
    """Files of an example recipe inside a repository tree, with their `# <- MCnnn`
    markers stripped, and the marks: where the example expects findings."""
    files: dict[str, str | bytes] = {
        f"{prefix}/engine/example_engine.py": ex.engine if ex.engine is not None else engine_text(ex.body, ex.init),
        f"{prefix}/engine/__init__.py": "",
        f"{prefix}/configs/schema.py": ex.schema if ex.schema is not None else SCHEMA,
        f"{prefix}/model/__init__.py": MODEL_INIT,
        f"{prefix}/README.md": ex.readme if ex.readme is not None else README,
    }
    for name, stage in (ex.stages if ex.stages is not None else {"train": STAGE}).items():
        files[f"{prefix}/configs/{name}.yaml"] = stage
    for path, data in ex.files.items():
        if path.startswith("/"):  # the repository root (its pyproject.toml)
            files[path[1:]] = data
        else:
            files[path if "/" in path and path.startswith(("recipes/", "example_engine/")) else f"{prefix}/{path}"] = (
                data
            )
    marks: list[Mark] = []
    for path, text in files.items():
        if isinstance(text, bytes):  # a file that is not text (e.g. not UTF-8): the same, in bytes
            for mb in _MARKER_RE_BYTES.finditer(text):
                marks.append(Mark(path, text.count(b"\n", 0, mb.start()) + 1, mb.group(1).decode()))
            files[path] = _MARKER_RE_BYTES.sub(b"", text)
        else:
            for m in MARKER_RE.finditer(text):
                marks.append(Mark(path, text.count("\n", 0, m.start()) + 1, m.group(1)))
            files[path] = MARKER_RE.sub("", text)
    return files, marks


def example_files(ex: Example, prefix: str = "recipes/example") -> dict[str, str | bytes]:
    """Files of an example recipe inside a repository tree (markers stripped)."""
    return render_example(ex, prefix)[0]
