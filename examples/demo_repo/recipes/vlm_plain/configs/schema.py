"""Config schema of the vlm_plain recipe."""

from __future__ import annotations

from pydantic import BaseModel, Field

from demo_engine.config import DataConfig, FreezeConfig, TextConfig, TrainConfig, VisionConfig


class ModelConfig(BaseModel):
    vocab_size: int = 512
    attn_implementation: str = "sdpa"
    text: TextConfig = Field(default_factory=TextConfig)
    vision: VisionConfig = Field(default_factory=VisionConfig)
    freeze: FreezeConfig = Field(default_factory=FreezeConfig)


class VlmPlainConfig(BaseModel):
    engine: str = "vlm_plain"
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
