"""vlm_plain: the VLM with a frozen vision tower and no compile support yet."""

from __future__ import annotations

from demo_engine.distributed.parallelize import parallelize_model
from demo_engine.engine import Engine, register_engine
from demo_engine.kit.mllm.model import MLLMModelKit


@register_engine("vlm_plain")
class VlmPlainEngine(Engine):
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
        return parallelize_model(model, parallel_mesh=self.parallel_mesh, backend_kwargs=None)
