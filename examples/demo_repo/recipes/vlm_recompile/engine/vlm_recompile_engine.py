"""vlm_recompile: kit compile fed a different image size every step.

The wiring is the kit's and reads fine statically. At runtime every new image
size changes shapes and data-dependent values the compiled frames guard on,
so dynamo recompiles until `recompile_limit` is hit and then silently runs
those frames eager. The smoke layer (runtime record) is what catches it.
"""

from __future__ import annotations

import torch

from demo_engine.distributed.parallelize import parallelize_model
from demo_engine.engine import Engine, register_engine
from demo_engine.kit.mllm.model import MLLMModelKit


@register_engine("vlm_recompile")
class VlmRecompileEngine(Engine):
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
            if self.config.model.compile.recompile_limit is not None:
                torch._dynamo.config.recompile_limit = self.config.model.compile.recompile_limit
            model = self.model_kit.apply_model_compile(
                model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode
            )
        return parallelize_model(model, parallel_mesh=self.parallel_mesh, backend_kwargs=None)
