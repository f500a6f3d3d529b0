"""Config sections shared by the demo recipes (each recipe composes its own root)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class TextConfig(BaseModel):
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    mrope_section: list[int] = Field(default_factory=lambda: [2, 3, 3])


class VisionConfig(BaseModel):
    depth: int = 2
    embed_dim: int = 32
    num_heads: int = 4
    patch_size: int = 14


class FreezeConfig(BaseModel):
    vit: bool = False
    projector: bool = False
    llm: bool = False


class GradientCheckpointingConfig(BaseModel):
    enabled: bool = False
    use_reentrant: bool = False


class DataConfig(BaseModel):
    batch_size: int = 2
    text_len: int = 16
    image_sizes: list[list[int]] = Field(default_factory=lambda: [[8, 8]])
    num_workers: int = 0


class TrainConfig(BaseModel):
    max_steps: int = 10
    lr: float = 1e-4
    seed: int = 0
    log_every: int = 1
    output_dir: str = "outputs"
    dtype: Literal["float32", "bfloat16"] = "float32"
