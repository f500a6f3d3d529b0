"""vlm_regional: the same VLM, compiled block by block instead of through the kit."""

from __future__ import annotations

import torch

from demo_engine.distributed.parallelize import parallelize_model
from demo_engine.engine import Engine, register_engine
from demo_engine.kit.mllm.model import MLLMModelKit


@register_engine("vlm_regional")
class VlmRegionalEngine(Engine):
    def __init__(self, config):
        super().__init__(config)
        self.model_kit = MLLMModelKit()

    def prepare_model(self):
        model = self.model_kit.build_model(self.config.model).to(self.device)
        model = self.model_kit.apply_model_patches(model, [])
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
            # model-compile: regional - the repeated blocks are the hot path; compiling them one
            # by one avoids the data-dependent vision preprocessing and rope-index code around
            # them (few graph breaks, short cold start, no recompiles across image sizes).
            for layer in model.model.language_model.layers:
                layer.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)
            for block in model.model.visual.blocks:
                block.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)
        return parallelize_model(model, parallel_mesh=self.parallel_mesh, backend_kwargs=None)
