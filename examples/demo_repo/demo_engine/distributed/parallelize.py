"""Distributed wrapping: data parallel over whatever process group is up."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parallelize_model(model: nn.Module, parallel_mesh: Any = None, backend_kwargs: dict | None = None) -> nn.Module:
    """World size 1 (or no process group): the model itself; otherwise DDP."""
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return model
    kwargs = dict(backend_kwargs or {})
    kwargs.setdefault("find_unused_parameters", True)
    return DistributedDataParallel(model, **kwargs)


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module under a DDP wrapper."""
    return model.module if isinstance(model, DistributedDataParallel) else model
