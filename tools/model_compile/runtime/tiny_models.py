"""Tiny random models of the architecture families recipes train, built from config objects (no download).

Each family keeps the structure that matters to compile (vision tower and its
merger, mrope sections, deepstack layers, window attention, tied or untied
heads) at sizes that run a training step in milliseconds on a CPU. A real
`config.json` (a local checkpoint folder, the hub cache, or `--model-config`)
selects the family by its `model_type` and contributes the structural choices
it makes (tied embeddings, deepstack indexes, merge and patch sizes); sizes
always come from the family's tiny preset.

Imports torch and transformers; runs only inside the rehearsal child.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

VOCAB = 512
_TEXT = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 4096,
    "bos_token_id": VOCAB - 6,
    "eos_token_id": VOCAB - 5,
}
_VL_TOKENS = {
    "image_token_id": VOCAB - 4,
    "video_token_id": VOCAB - 3,
    "vision_start_token_id": VOCAB - 2,
    "vision_end_token_id": VOCAB - 1,
    "eos_token_id": VOCAB - 5,
}

# family -> (config class, model class, tiny config kwargs)
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "qwen2_vl": (
        "Qwen2VLConfig",
        "Qwen2VLForConditionalGeneration",
        {
            "text_config": {
                **_TEXT,
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            },
            "vision_config": {
                "depth": 2,
                "embed_dim": 32,
                "hidden_size": 64,
                "num_heads": 4,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
            },
            **_VL_TOKENS,
        },
    ),
    "qwen2_5_vl": (
        "Qwen2_5_VLConfig",
        "Qwen2_5_VLForConditionalGeneration",
        {
            "text_config": {
                **_TEXT,
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            },
            "vision_config": {
                "depth": 2,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 4,
                "out_hidden_size": 64,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "window_size": 56,
                "fullatt_block_indexes": [1],
            },
            **_VL_TOKENS,
        },
    ),
    "qwen3_vl": (
        "Qwen3VLConfig",
        "Qwen3VLForConditionalGeneration",
        {
            "text_config": {
                **_TEXT,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 10000.0,
                    "mrope_section": [4, 2, 2],
                    "mrope_interleaved": True,
                },
            },
            "vision_config": {
                "depth": 2,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 4,
                "out_hidden_size": 64,
                "patch_size": 16,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "num_position_embeddings": 64,
                "deepstack_visual_indexes": [0],
            },
            "tie_word_embeddings": False,
            **_VL_TOKENS,
        },
    ),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**_TEXT, "tie_word_embeddings": False}),
    "vit": (
        "ViTConfig",
        "ViTForImageClassification",
        {
            "image_size": 32,
            "patch_size": 8,
            "num_channels": 3,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_labels": 10,
        },
    ),
}
# structural choices a real config makes that the tiny model keeps (top level, text, vision)
_KEEP_TOP = ("tie_word_embeddings", "num_labels")
_KEEP_VISION = ("spatial_merge_size", "temporal_patch_size")


def tiny_config_kwargs(family: str, base: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The tiny preset of `family`, with the structural choices of `base` (a config.json) kept, and notes."""
    kwargs = copy.deepcopy(FAMILIES[family][2])
    notes: list[str] = []
    if not base:
        return kwargs, notes
    for key in _KEEP_TOP:
        if key in base and (key in kwargs or key == "tie_word_embeddings"):
            kwargs[key] = base[key]
            notes.append(f"{key}={base[key]!r} from the checkpoint's config")
    vision = base.get("vision_config") if isinstance(base.get("vision_config"), dict) else None
    if vision and "vision_config" in kwargs:
        for key in _KEEP_VISION:
            if key in vision:
                kwargs["vision_config"][key] = vision[key]
        layers = vision.get("deepstack_visual_indexes")
        if isinstance(layers, list) and "deepstack_visual_indexes" in kwargs["vision_config"]:
            depth = max(2, min(len(layers) + 1, 4))
            kwargs["vision_config"]["depth"] = depth
            kwargs["vision_config"]["deepstack_visual_indexes"] = list(range(min(len(layers), depth - 1)))
            kept = len(kwargs["vision_config"]["deepstack_visual_indexes"])
            notes.append(f"{len(layers)} deepstack layer(s) in the checkpoint -> {kept} of {depth} tiny vision blocks")
    return kwargs, notes


def build(family: str, base: dict[str, Any] | None = None, seed: int = 0) -> tuple[Any, list[str]]:
    """A random-init tiny model of `family` (fixed seed), and the notes on what came from `base`."""
    import torch
    import transformers

    config_name, model_name, _ = FAMILIES[family]
    kwargs, notes = tiny_config_kwargs(family, base)
    config = getattr(transformers, config_name)(**kwargs)
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config)
    return model, notes


def write_checkpoint(family: str, out_dir: Path, base: dict[str, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Save a tiny `family` model with `save_pretrained` (safetensors) for the recipe's own loader to read."""
    model, notes = build(family, base, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    return {
        "family": family,
        "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dir": str(out_dir),
        "notes": notes,
        "seed": seed,
    }
