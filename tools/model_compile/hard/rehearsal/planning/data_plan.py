"""What the rehearsal's twins train on, and for how long, read from the stage config. Pure Python.

The data: the recipe's own data path always runs (its `prepare_dataloader`). Where the stage's data files
are on this machine, or it names none (it makes its own), it runs as it is (`own`). Where they are missing
and the repository reads rows through the `mvp_dataset` library, only the row source is replaced by
synthetic rows (`rows`): text of varied length, 0-2 images each within the stage's pixel bounds for a VLM.
Otherwise synthetic batches shaped by the config stand in (`batches`), and the reason says why; the child
also falls back to them when the recipe's data path drops every image it was fed (its vision tower would
never run).

The schedule: `steps` optimizer steps (the stage's step count set to it), gradient accumulation kept when
the stage accumulates (2 micro-steps per optimizer step, so the no-sync micro-step is exercised), sequences
longer than `MAX_SEQ` shrunk to it (the packer's regime, full packs or variable, is the stage's own), and
checkpoint saving moved past the last step.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_SEQ = 512
ACCUMULATE = 2
PATH_LEAF = re.compile(r"(^|_)(path|paths|dir|file|files|root)$")
SEQ_LEAVES = ("max_seq_len", "max_seq_length", "max_length", "seq_len")
STEP_LEAVES = ("total_steps", "max_steps", "num_steps", "train_steps", "num_train_steps")
# image sizes (width, height) in pixels the synthetic rows carry, before the recipe's bounds
IMAGE_SIZES = ((64, 64), (96, 64), (64, 128), (128, 96), (128, 128), (160, 96))


@dataclass
class DataPlan:
    mode: str  # own | rows | batches
    reason: str
    missing: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    rows: dict[str, Any] | None = None
    batches: dict[str, Any] = field(default_factory=dict)
    regime: str = "variable"
    regime_reason: str = ""
    max_seq_len: int | None = None
    accumulation: str = ""
    notes: list[str] = field(default_factory=list)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def data_paths(paths: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, path) of every data file or folder the stage's data section names."""
    out = []
    for key, value in paths.items():
        if not key.startswith("data.") or not PATH_LEAF.search(key.rsplit(".", 1)[-1]):
            continue
        values = value if isinstance(value, list) else [value]
        out += [(key, v) for v in values if isinstance(v, str) and v.strip()]
    return out


def uses_mvp_dataset(repo_root: Path, recipe_root: Path) -> bool:
    """Whether the repository's Python reads data through mvp_dataset (a substring search, nothing imported)."""
    roots = [recipe_root] + [p for p in repo_root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    for root in roots:
        for path in root.rglob("*.py"):
            try:
                if "mvp_dataset" in path.read_text(encoding="utf-8", errors="replace"):
                    return True
            except OSError:
                continue
    return False


def _regime(paths: dict[str, Any]) -> tuple[str, str]:
    leaves = {k.rsplit(".", 1)[-1]: v for k, v in paths.items() if k.startswith("data.")}
    if "packing_selection_strategy" in leaves:
        return "variable", f"the stage packs with {leaves['packing_selection_strategy']} selection: packs close short"
    if any(k.endswith("tail_policy") for k in leaves):
        return "full", "the stage's stream packer (a tail policy) emits only full packs"
    # the engine may still pack (hard-coded): the batches the model is handed say so (`packing seen`)
    return "variable", "no packing setting in the stage: the batches seen say whether the engine packs"


def plan_data(
    paths: dict[str, Any],
    repo_root: Path,
    recipe_root: Path,
    *,
    steps: int,
    world_size: int,
    vision: bool,
    model_dir: str,
    out_dir: Path,
    batch_keys: list[str],
) -> DataPlan:
    regime, regime_reason = _regime(paths)
    missing = [
        f"{k}: {v}" for k, v in data_paths(paths) if not os.path.exists(v if os.path.isabs(v) else repo_root / v)
    ]
    overrides: list[str] = []
    notes: list[str] = []
    seq = None
    for key, value in paths.items():
        leaf = key.rsplit(".", 1)[-1]
        if key.startswith("data.") and leaf in SEQ_LEAVES and _is_int(value):
            seq = min(value, MAX_SEQ)
            if value > MAX_SEQ:
                overrides.append(f"{key}={MAX_SEQ}")
                notes.append(f"{key} {value} -> {MAX_SEQ} (a size: the packer's regime is kept)")
    if missing and uses_mvp_dataset(repo_root, recipe_root):
        mode = "rows"
        reason = (
            "the stage's data is not here ("
            + "; ".join(missing[:2])
            + "): its row source is replaced by synthetic rows where the path it reads is not here (a source "
            "whose path is here is read as it is)"
        )
    elif missing:
        mode = "batches"
        reason = (
            "the stage's data is not here (" + "; ".join(missing[:2]) + ") and its row source is not one the "
            "rehearsal can replace (mvp_dataset): synthetic batches shaped by the stage config stand in"
        )
    else:
        mode = "own"
        reason = (
            "the stage's data is here" if data_paths(paths) else "the recipe makes its own data (no data file named)"
        )
    length = seq or MAX_SEQ
    batch_size = next((v for k, v in paths.items() if k == "data.batch_size" and _is_int(v)), 1)
    text_fields = sorted(
        {v for k, v in paths.items() if k.startswith("data.") and k.endswith("_field") and isinstance(v, str)}
        | {"text"}
    )
    plan = DataPlan(
        mode=mode,
        reason=reason,
        missing=missing,
        overrides=overrides,
        regime=regime,
        regime_reason=regime_reason,
        max_seq_len=seq,
        notes=notes,
    )
    images = [list(s) for s in IMAGE_SIZES] if vision else []
    if mode == "rows":
        plan.rows = {
            "dir": str(out_dir / "rows"),
            "seed": 0,
            "min_tokens": max(8, length // 16),
            "max_tokens": max(16, length // 2),
            "text_fields": text_fields,
            "count": 64 * max(1, world_size),
            "image_sizes": images,
        }
    plan.batches = {
        "max_seq_len": length,
        "regime": regime,
        "packed": "pack_segment_ids" in batch_keys,
        "batch_size": batch_size,
        "keys": batch_keys,
        "image_sizes": images,
        "model_dir": model_dir,
    }
    _schedule(plan, paths, steps, world_size, batch_size)
    return plan


def _schedule(plan: DataPlan, paths: dict[str, Any], steps: int, world: int, batch_size: int) -> None:
    for key, value in paths.items():
        leaf = key.rsplit(".", 1)[-1]
        if leaf in STEP_LEAVES and _is_int(value) and key.split(".")[0] in ("loop", "train", "trainer", "training"):
            plan.overrides.append(f"{key}={steps}")
        if key.startswith("checkpoint.") and leaf in ("interval", "save_interval", "save_steps") and _is_int(value):
            if 0 < value <= steps:
                plan.overrides.append(f"{key}={steps * 1000}")
                plan.notes.append(f"{key} {value} -> {steps * 1000}: no checkpoint is saved during the rehearsal")
    ga_key = next((k for k in paths if k.rsplit(".", 1)[-1] == "gradient_accumulation_steps"), None)
    ga: Any = paths.get(ga_key) if ga_key else None
    if not _is_int(ga):
        ga = None
    gbs_key = next((k for k in paths if k.rsplit(".", 1)[-1] == "global_batch_size"), None)
    if ga == -1 and gbs_key and _is_int(paths.get(gbs_key)):
        real = paths[gbs_key] // max(1, batch_size * world)
        plan.overrides.append(f"{gbs_key}={batch_size * world * ACCUMULATE}")
        plan.accumulation = (
            f"{ACCUMULATE} micro-steps per optimizer step ({gbs_key} {paths[gbs_key]} -> {batch_size * world * ACCUMULATE}; "
            f"the real run accumulates {real} at this world size)"
        )
    elif ga is not None and ga > ACCUMULATE:
        plan.overrides.append(f"{ga_key}={ACCUMULATE}")
        plan.accumulation = f"{ACCUMULATE} micro-steps per optimizer step ({ga_key} {ga} -> {ACCUMULATE})"
    elif ga is not None and ga >= 1:
        plan.accumulation = f"{ga} micro-step(s) per optimizer step, as the stage sets it"
    else:
        plan.accumulation = "as the recipe's loop does it (no accumulation setting in the stage)"
