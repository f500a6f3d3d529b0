"""The multimodal model kit: build, patch, freeze, checkpoint and compile a VLM."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn


class MLLMModelKit:
    """Model-side building blocks shared by every VLM recipe."""

    def build_model(self, config: Any) -> nn.Module:
        """A randomly initialised Qwen2-VL built from config objects (never downloads).

        `config` is the recipe's `model` section; it needs `text` and `vision`
        sub-sections with the sizes below plus `vocab_size`.
        """
        from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

        text = config.text
        vision = config.vision
        vocab = config.vocab_size
        hf_config = Qwen2VLConfig(
            text_config=dict(
                vocab_size=vocab,
                hidden_size=text.hidden_size,
                intermediate_size=text.intermediate_size,
                num_hidden_layers=text.num_layers,
                num_attention_heads=text.num_heads,
                num_key_value_heads=text.num_kv_heads,
                max_position_embeddings=1024,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": list(text.mrope_section)},
            ),
            vision_config=dict(
                depth=vision.depth,
                embed_dim=vision.embed_dim,
                hidden_size=text.hidden_size,
                num_heads=vision.num_heads,
                patch_size=vision.patch_size,
                spatial_merge_size=2,
                temporal_patch_size=2,
            ),
            image_token_id=vocab - 4,
            video_token_id=vocab - 3,
            vision_start_token_id=vocab - 2,
            vision_end_token_id=vocab - 1,
        )
        hf_config._attn_implementation = config.attn_implementation
        model = Qwen2VLForConditionalGeneration(hf_config)
        return model

    def apply_model_patches(self, model: nn.Module, patches: Iterable[Callable[[nn.Module], Any]] = ()) -> nn.Module:
        """Run each patch function on the model (they edit it in place)."""
        for patch in patches:
            patch(model)
        return model

    def apply_freeze_policy(
        self, model: nn.Module, freeze_vit: bool = False, freeze_projector: bool = False, freeze_llm: bool = False
    ) -> nn.Module:
        """Turn off gradients for the chosen parts (vision tower, merger/projector, language model)."""
        visual = model.model.visual
        if freeze_vit:
            for name, param in visual.named_parameters():
                if not name.startswith("merger."):
                    param.requires_grad_(False)
        if freeze_projector:
            for param in visual.merger.parameters():
                param.requires_grad_(False)
        if freeze_llm:
            for param in model.model.language_model.parameters():
                param.requires_grad_(False)
            for param in model.lm_head.parameters():
                param.requires_grad_(False)
        return model

    def apply_gradient_checkpointing(self, model: nn.Module, use_reentrant: bool = False) -> nn.Module:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
        return model

    def apply_model_compile(self, model: nn.Module, backend: str = "inductor", mode: str = "default") -> nn.Module:
        """Compile the model in place; the vision tower stays eager.

        The Qwen-style vision tower does data-dependent work (`grid_thw.tolist()`,
        variable `cu_seqlens`) that breaks graphs and recompiles on every new image
        size, so its forward is a deliberate `torch.compiler.disable` region.
        In-place `.compile()` keeps `state_dict()` keys free of `_orig_mod.`.
        """
        visual = getattr(getattr(model, "model", None), "visual", None)
        if visual is not None:
            visual.forward = torch.compiler.disable(visual.forward)
        model.compile(backend=backend, mode=mode)
        return model
