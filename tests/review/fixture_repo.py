"""Tiny recipe repositories in git, built in tmp_path, for `diff` tests and the bench."""

from __future__ import annotations

from pathlib import Path

from git_helpers import git as run_git

KIT = """\
import torch


class MLLMModelKit:
    def build_model(self, path, torch_dtype=None, attn_implementation=None):
        raise NotImplementedError

    def apply_gradient_checkpointing(self, model, use_reentrant=False):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
        return model

    def apply_model_compile(self, model, backend="inductor", mode="default"):
        visual = getattr(getattr(model, "model", None), "visual", None)
        if visual is not None:
            visual.forward = torch.compiler.disable(visual.forward)
        model.compile(backend=backend, mode=mode)
        return model
"""

PARALLELIZE = """\
from torch.distributed.fsdp import fully_shard


def parallelize_model(model, parallel_mesh=None, backend_kwargs=None):
    for block in model.model.layers:
        fully_shard(block)
    fully_shard(model)
    return model
"""

ENGINE_BASE = """\
class Engine:
    def before_train(self):
        self.model = self.prepare_model()
"""

SCHEMA = """\
from typing import Literal

from pydantic import BaseModel


class CompileConfig(BaseModel):
    enabled: bool = {enabled}
    backend: Literal["inductor", "aot_eager", "eager"] = "inductor"
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"


class ModelConfig(BaseModel):
    path: str = ""
    compile: CompileConfig = CompileConfig()


class {cls}Config(BaseModel):
    model: ModelConfig = ModelConfig()
"""

SCHEMA_NO_COMPILE = """\
from pydantic import BaseModel


class ModelConfig(BaseModel):
    path: str = ""


class {cls}Config(BaseModel):
    model: ModelConfig = ModelConfig()
"""

YAML = """\
model:
  path: /models/tiny
  compile:
    enabled: {enabled}
    backend: inductor
    mode: default
"""

YAML_NO_COMPILE = """\
model:
  path: /models/tiny
"""

_BUILD = (
    "        model = self.model_kit.build_model(self.config.model.path, torch_dtype=torch.bfloat16).to(self.device)\n"
)
_CKPT = (
    "        if self.config.model.gradient_checkpointing.enabled:\n"
    "            model = self.model_kit.apply_gradient_checkpointing(model, use_reentrant=False)\n"
)
_COMPILE = (
    "        if self.config.model.compile.enabled:\n"
    "            model = self.model_kit.apply_model_compile(\n"
    "                model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode\n"
    "            )\n"
)


def engine(cls: str, compile_at: str | None = "before_wrap") -> str:
    """An engine whose prepare_model compiles before wrapping, after it, or not at all."""
    head = (
        "import torch\n\n"
        "from pkg.distributed.parallelize import parallelize_model\n"
        "from pkg.engine import Engine\n"
        "from pkg.kit.mllm.model import MLLMModelKit\n\n\n"
        f"class {cls}Engine(Engine):\n"
        "    def __init__(self, config):\n"
        "        self.config = config\n"
        "        self.model_kit = MLLMModelKit()\n\n"
        "    def prepare_model(self):\n"
    )
    body = _BUILD + _CKPT
    if compile_at == "before_wrap":
        body += _COMPILE + "        return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    elif compile_at == "after_wrap":
        body += (
            "        model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
            + _COMPILE
            + "        return model\n"
        )
    elif compile_at == "wrapper_after_wrap":  # the kit call replaced by a wrapper after the wrap, backend fixed
        body += (
            "        model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
            "        if self.config.model.compile.enabled:\n"
            '            model = torch.compile(model, backend="inductor")\n'
            "        return model\n"
        )
    else:
        body += "        return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    return head + body


def recipe_files(name: str, compile_at: str | None = "before_wrap", yaml_enabled: str = "false") -> dict[str, str]:
    cls = name.capitalize()
    with_compile = compile_at is not None
    schema = SCHEMA.format(cls=cls, enabled="False") if with_compile else SCHEMA_NO_COMPILE.format(cls=cls)
    yaml = YAML.format(enabled=yaml_enabled) if with_compile else YAML_NO_COMPILE
    return {
        f"recipes/{name}/engine/{name}_engine.py": engine(cls, compile_at),
        f"recipes/{name}/configs/schema.py": schema,
        f"recipes/{name}/configs/train.yaml": yaml,
        f"recipes/{name}/README.md": f"# {name}\n\nA tiny recipe.\n",
    }


def base_files() -> dict[str, str]:
    return {
        "pkg/__init__.py": "",
        "pkg/engine.py": ENGINE_BASE,
        "pkg/kit/mllm/model.py": KIT,
        "pkg/distributed/parallelize.py": PARALLELIZE,
        ".gitignore": "ignored/\n",
    }


def git(root: Path, *args: str) -> str:
    """git in `root`, its stdout stripped."""
    return run_git(root, *args).strip()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


def init_repo(root: Path, files: dict[str, str | bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    write(root, files)
    commit(root, "initial")
    return root


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")
