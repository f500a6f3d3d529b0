"""Config schema of the vlm_recompile recipe."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from demo_engine.config import DataConfig, FreezeConfig, GradientCheckpointingConfig, TextConfig, TrainConfig, VisionConfig


class CompileConfig(BaseModel):
    enabled: bool = False
    backend: Literal["inductor", "aot_eager", "eager"] = "inductor"
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    # torch._dynamo.config.recompile_limit for this run (None: torch's default, 8).
    recompile_limit: int | None = None


class ModelConfig(BaseModel):
    vocab_size: int = 512
    attn_implementation: str = "sdpa"
    text: TextConfig = Field(default_factory=TextConfig)
    vision: VisionConfig = Field(default_factory=VisionConfig)
    freeze: FreezeConfig = Field(default_factory=FreezeConfig)
    gradient_checkpointing: GradientCheckpointingConfig = Field(default_factory=GradientCheckpointingConfig)
    compile: CompileConfig = Field(default_factory=CompileConfig)


class VlmRecompileConfig(BaseModel):
    engine: str = "vlm_recompile"
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
