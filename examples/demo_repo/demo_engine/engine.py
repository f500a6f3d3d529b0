"""The base Engine: named training phases that recipes override and tests hook into."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import nn

from demo_engine.data import SyntheticVLMData

PHASES = (
    "before_train",
    "do_train",
    "train_pre_step",
    "train_exec_step",
    "forward_step",
    "backward_step",
    "optimizer_step",
    "train_post_step",
    "after_train",
)

_REGISTRY: dict[str, type["Engine"]] = {}


def register_engine(name: str) -> Callable[[type["Engine"]], type["Engine"]]:
    """Class decorator: make an engine findable by the name a config gives."""

    def deco(cls: type["Engine"]) -> type["Engine"]:
        _REGISTRY[name] = cls
        cls.engine_name = name
        return cls

    return deco


def get_engine_class(name: str) -> type["Engine"]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no engine registered as {name!r} (known: {sorted(_REGISTRY)})") from None


class Engine:
    """One training run. Subclasses implement `prepare_model()`."""

    engine_name = "base"

    def __init__(self, config: Any):
        self.config = config
        self.rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        if torch.cuda.is_available():
            local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
            self.device = torch.device("cuda", local_rank % torch.cuda.device_count())
        else:
            self.device = torch.device("cpu")
        self.parallel_mesh = None
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.data: SyntheticVLMData | None = None
        self.global_step = 0
        self.history: list[dict[str, float]] = []

    # -- setup -------------------------------------------------------------
    def prepare_model(self) -> nn.Module:
        raise NotImplementedError

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        params = [p for p in model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=self.config.train.lr)

    def build_data(self) -> SyntheticVLMData:
        data = self.config.data
        return SyntheticVLMData(
            vocab_size=self.config.model.vocab_size,
            patch_size=self.config.model.vision.patch_size,
            batch_size=data.batch_size,
            text_len=data.text_len,
            image_sizes=data.image_sizes,
            seed=self.config.train.seed + self.rank,
        )

    def get_batch(self, index: int) -> dict[str, torch.Tensor]:
        if self.data is None:
            self.data = self.build_data()
        return {k: v.to(self.device) for k, v in self.data.batch(index).items()}

    @staticmethod
    def compute_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training loss of one batch (no KV cache: training never needs it)."""
        return model(**batch, use_cache=False).loss

    # -- phases ------------------------------------------------------------
    def before_train(self) -> None:
        torch.manual_seed(self.config.train.seed)
        self.model = self.prepare_model()
        self.optimizer = self.build_optimizer(self.model)
        self.data = self.build_data()

    def do_train(self) -> None:
        self.model.train()
        for step in range(self.config.train.max_steps):
            ctx: dict[str, Any] = {"step": step}
            self.train_pre_step(ctx)
            self.train_exec_step(ctx)
            self.train_post_step(ctx)

    def train_pre_step(self, ctx: dict[str, Any]) -> None:
        ctx["t0"] = time.perf_counter()
        ctx["batch"] = self.get_batch(ctx["step"])

    def train_exec_step(self, ctx: dict[str, Any]) -> None:
        loss = self.forward_step(ctx)
        self.backward_step(ctx, loss)
        self.optimizer_step(ctx)

    def forward_step(self, ctx: dict[str, Any]) -> torch.Tensor:
        loss = self.compute_loss(self.model, ctx["batch"])
        ctx["loss"] = loss
        return loss

    def backward_step(self, ctx: dict[str, Any], loss: torch.Tensor) -> None:
        loss.backward()

    def optimizer_step(self, ctx: dict[str, Any]) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def train_post_step(self, ctx: dict[str, Any]) -> None:
        self.global_step += 1
        record = {"step": ctx["step"], "loss": float(ctx["loss"].detach()), "seconds": time.perf_counter() - ctx["t0"]}
        self.history.append(record)
        if self.rank == 0 and self.config.train.log_every and ctx["step"] % self.config.train.log_every == 0:
            print(f"step {record['step']} loss {record['loss']:.4f} {record['seconds']:.3f}s", flush=True)

    def after_train(self) -> None:
        out = self.config.train.output_dir
        if out and self.rank == 0:
            os.makedirs(out, exist_ok=True)

    def train(self) -> None:
        self.before_train()
        self.do_train()
        self.after_train()
