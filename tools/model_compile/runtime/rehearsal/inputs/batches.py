"""Synthetic batches, for when the recipe's own data path cannot feed the rehearsal here.

Used only where the plan or the run says why (the row source is not one the rehearsal can replace, or the
recipe's data path dropped what the model needs, every image say): the engine's loader is replaced by an
endless stream of batches whose shapes follow the stage config, not a fixed schedule of the tool's own:

- `regime: full`: every row is `max_seq_len` tokens (a stream packer that emits only full packs);
- `regime: variable`: rows close short of `max_seq_len` by a varying amount (a best-fit packer, or padding to
  the longest sample), as such a packer's packs do;
- a VLM gets 0-2 images per sample (every step at least one), grids from the plan's image sizes (pixels
  within the recipe's bounds, smart-resized to the patch and merge sizes), placeholders between vision
  start/end tokens, labels ignored on vision tokens; a classifier gets images and class ids.

Packing metadata (`pack_segment_ids` and the counts a collator adds) is emitted when the recipe's code names
those keys. The batch kind follows the model the recipe built (its config), never a guess from a name.
"""

from __future__ import annotations

import random
from typing import Any

IGNORE = -100
PACK_KEYS = (
    "pack_segment_ids",
    "source_sample_num",
    "num_input_tokens",
    "num_loss_tokens",
    "num_source_samples",
    "total_tokens",
    "effective_tokens",
)


def kind_of(config: Any) -> str:
    """'vlm', 'causal_lm' or 'classifier', from the model's own config."""
    if getattr(config, "vision_config", None) is not None and getattr(config, "image_token_id", None) is not None:
        return "vlm"
    if getattr(config, "image_size", None) is not None and getattr(config, "num_labels", None) is not None:
        return "classifier"
    return "causal_lm"


def grid_of(width: int, height: int, patch: int, merge: int) -> tuple[int, int]:
    """(h, w) in patches of an image smart-resized to multiples of patch * merge (at least one merge cell)."""
    factor = patch * merge
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    return h // patch, w // patch


class SyntheticBatches:
    """An endless iterable of batches; the same seed gives the same stream (each rank its own seed)."""

    def __init__(self, config: Any, plan: dict[str, Any], seed: int) -> None:
        self.config = config
        self.plan = plan
        self.kind = kind_of(config)
        self.seed = seed
        self.keys = set(plan.get("keys") or [])
        vision = getattr(config, "vision_config", None)
        self.merge = int(getattr(vision, "spatial_merge_size", 2) or 2) if vision is not None else 2
        self.patch = int(getattr(vision, "patch_size", 14) or 14) if vision is not None else 14
        sizes = plan.get("image_sizes") or [[64, 64]]
        self.grids = [grid_of(int(w), int(h), self.patch, self.merge) for w, h in sizes]

    def __iter__(self) -> Any:
        rng = random.Random(self.seed)
        step = 0
        while True:
            yield self.batch(rng, step)
            step += 1

    # -- one step ------------------------------------------------------------
    def _samples(self, rng: random.Random) -> list[tuple[int, list[tuple[int, int]]]]:
        """(text tokens, image grids) of each sample in one row."""
        length = int(self.plan["max_seq_len"])
        full = self.plan.get("regime") == "full"
        target = length if full else rng.randint(max(8, length // 2), length)
        samples: list[tuple[int, list[tuple[int, int]]]] = []
        used = 0
        while used < target:
            images = [rng.choice(self.grids) for _ in range(rng.choice((0, 1, 1, 2)))] if self.kind == "vlm" else []
            image_tokens = sum(h * w // (self.merge * self.merge) + 2 for h, w in images)
            room = target - used
            if image_tokens >= room:
                images, image_tokens = [], 0
            text = min(room - image_tokens, rng.randint(8, max(8, length // 3)))
            samples.append((max(1, text), images))
            used += max(1, text) + image_tokens
            if not self.plan.get("packed") and len(samples) == 1:
                break
        if self.kind == "vlm" and not any(images for _, images in samples):
            # every step feeds the vision tower: a wrap that needs every parameter used (DDP) fails otherwise
            text, _ = samples[0]
            grid = min(self.grids, key=lambda g: g[0] * g[1])
            cost = grid[0] * grid[1] // (self.merge * self.merge) + 2
            samples[0] = (max(1, text - cost), [grid])
        return samples

    def batch(self, rng: random.Random, step: int) -> dict[str, Any]:
        import torch

        gen = torch.Generator().manual_seed(self.seed * 100003 + step)
        rows = max(1, int(self.plan.get("batch_size", 1)))
        if self.kind == "classifier":
            size = int(self.config.image_size)
            channels = int(getattr(self.config, "num_channels", 3) or 3)
            return {
                "pixel_values": torch.randn(rows, channels, size, size, generator=gen),
                "labels": torch.randint(0, int(self.config.num_labels), (rows,), generator=gen),
            }
        return self._token_batch([self._samples(rng) for _ in range(rows)], gen)

    def _token_batch(self, rows: list[list[tuple[int, list[tuple[int, int]]]]], gen: Any) -> dict[str, Any]:
        import torch

        config = self.config
        text_config = getattr(config, "text_config", None) or config
        vocab = int(text_config.vocab_size)
        special: set[int] = set()
        if self.kind == "vlm":
            image_id = int(config.image_token_id)
            start_id = int(getattr(config, "vision_start_token_id", image_id - 2))
            end_id = int(getattr(config, "vision_end_token_id", image_id - 1))
            special = {image_id, start_id, end_id}
        low = max(special | {16}) + 1 if special else 16
        ids_rows, label_rows, segment_rows, grids = [], [], [], []
        for samples in rows:
            ids, labels, segments = [], [], []
            for index, (text, images) in enumerate(samples):
                words = torch.randint(low, vocab, (text,), generator=gen)
                half = text // 2
                parts = [words[:half]]
                for h, w in images:
                    n = h * w // (self.merge * self.merge)
                    parts += [torch.tensor([start_id]), torch.full((n,), image_id), torch.tensor([end_id])]
                    grids.append((h, w))
                parts.append(words[half:])
                seq = torch.cat(parts)
                label = seq.clone()
                if special:
                    label[torch.isin(seq, torch.tensor(sorted(special)))] = IGNORE
                ids.append(seq)
                labels.append(label)
                segments.append(torch.full((len(seq),), index + 1))
            ids_rows.append(torch.cat(ids))
            label_rows.append(torch.cat(labels))
            segment_rows.append(torch.cat(segments))
        longest = max(len(r) for r in ids_rows)
        if self.plan.get("regime") == "full":
            longest = max(longest, int(self.plan["max_seq_len"]))
        n = len(ids_rows)
        input_ids = torch.zeros(n, longest, dtype=torch.long)
        label_t = torch.full((n, longest), IGNORE, dtype=torch.long)
        attention = torch.zeros(n, longest, dtype=torch.long)
        segments_t = torch.zeros(n, longest, dtype=torch.long)
        for i in range(n):
            k = len(ids_rows[i])
            input_ids[i, :k], label_t[i, :k], attention[i, :k], segments_t[i, :k] = (
                ids_rows[i],
                label_rows[i],
                1,
                segment_rows[i],
            )
        batch: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention, "labels": label_t}
        if self.kind == "vlm" and grids:
            vision = config.vision_config
            temporal = int(getattr(vision, "temporal_patch_size", 2) or 2)
            channels = int(getattr(vision, "in_channels", getattr(vision, "in_chans", 3)) or 3)
            count = sum(h * w for h, w in grids)
            batch["pixel_values"] = torch.randn(count, channels * temporal * self.patch**2, generator=gen)
            batch["image_grid_thw"] = torch.tensor([[1, h, w] for h, w in grids], dtype=torch.long)
        if self.kind == "vlm":
            batch["mm_token_type_ids"] = (input_ids == image_id).long()
        shifted = torch.nn.functional.pad(label_t, (0, 1), value=IGNORE)[..., 1:]
        counts = torch.tensor([len(r) for r in rows])
        extra = {
            "pack_segment_ids": segments_t,
            "source_sample_num": counts,
            "num_input_tokens": attention.sum(dim=-1),
            "num_loss_tokens": shifted.ne(IGNORE).sum(dim=-1),
            "num_source_samples": counts.clone(),
            "total_tokens": int(attention.sum()),
            "effective_tokens": int(shifted.ne(IGNORE).sum()),
        }
        for key in PACK_KEYS:
            if key in self.keys:
                batch[key] = extra[key]
        return batch


def describe_plan(plan: dict[str, Any]) -> str:
    """What the synthetic stream is, in words."""
    length = plan.get("max_seq_len")
    how = "rows of exactly" if plan.get("regime") == "full" else "rows of up to"
    packed = "packed " if plan.get("packed") else ""
    return f"{packed}{how} {length} tokens, batch {plan.get('batch_size', 1)}"
