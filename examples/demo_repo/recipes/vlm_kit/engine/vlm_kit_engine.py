"""vlm_kit: a small VLM trained end to end; compile goes through the model kit."""

from __future__ import annotations

import torch

from demo_engine.distributed.parallelize import parallelize_model
from demo_engine.engine import Engine, register_engine
from demo_engine.kit.mllm.model import MLLMModelKit


def tie_special_token_rows(model):
    """Patch: start the image/vision special-token embeddings from the mean embedding."""
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[-4:] = emb[:-4].mean(dim=0, keepdim=True)


@register_engine("vlm_kit")
class VlmKitEngine(Engine):
    def __init__(self, config):
        super().__init__(config)
        self.model_kit = MLLMModelKit()

    def prepare_model(self):
        model = self.model_kit.build_model(self.config.model).to(self.device)
        model = self.model_kit.apply_model_patches(model, [tie_special_token_rows])
        freeze = self.config.model.freeze
        model = self.model_kit.apply_freeze_policy(
            model, freeze_vit=freeze.vit, freeze_projector=freeze.projector, freeze_llm=freeze.llm
        )
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.data = parameter.data.to(torch.float32)
        if self.config.model.gradient_checkpointing.enabled:
            model = self.model_kit.apply_gradient_checkpointing(
                model, use_reentrant=self.config.model.gradient_checkpointing.use_reentrant
            )
        if self.config.model.compile.enabled:
            model = self.model_kit.apply_model_compile(
                model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode
            )
        return parallelize_model(model, parallel_mesh=self.parallel_mesh, backend_kwargs=None)
