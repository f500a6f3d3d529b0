"""Synthetic training batches shaped like a recipe's data, and the shape schedule of a rehearsal.

The batch kind follows the model the recipe built (read from its config at run
time, never guessed from a name): a Qwen-style VLM (`vision_config` and an
`image_token_id`) gets text with image placeholders between vision start/end
tokens, `pixel_values` and `image_grid_thw`, labels ignored on vision tokens;
a causal LM gets text; an image classifier gets images and class labels.

The schedule follows the recipe's data conventions: packed rows (several
samples in one row, `pack_segment_ids` numbering them) when the recipe's code
reads `pack_segment_ids`, else padded batches; sequence lengths differ at every
step (at least ten distinct lengths in the default schedule), images per
sample cycle through 0, 1 and 2 (every step has at least one image), and image sizes through several grids, so a
frame that recompiles per shape reaches the recompile limit within the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

IGNORE = -100
# Image grids in patches (height, width): multiples of the 2x2 merge.
GRIDS = ((4, 4), (4, 6), (6, 4), (6, 6), (8, 4), (4, 8))
# Packing metadata a recipe's collator may add; a key is emitted only when the recipe's code names it.
PACK_KEYS = (
    "pack_segment_ids",
    "source_sample_num",
    "num_input_tokens",
    "num_loss_tokens",
    "num_source_samples",
    "total_tokens",
    "effective_tokens",
)


@dataclass
class Sample:
    text: int  # text tokens
    images: list[tuple[int, int]] = field(default_factory=list)  # (h, w) grid per image


@dataclass
class Shape:
    """One step's inputs: the samples of a packed row, or the rows of a padded batch."""

    samples: list[Sample]
    packed: bool

    def describe(self, kind: str, merge: int = 2) -> str:
        if kind == "classifier":
            return f"batch {len(self.samples)}"
        lengths = [s.text + sum(h * w // (merge * merge) + 2 for h, w in s.images) for s in self.samples]
        images = sum(len(s.images) for s in self.samples)
        grids = sorted({f"{h}x{w}" for s in self.samples for h, w in s.images})
        how = (
            f"packed {len(self.samples)} sample(s) in {sum(lengths)} tokens"
            if self.packed
            else (f"{len(self.samples)} rows padded to {max(lengths)} tokens")
        )
        if kind == "vlm":
            how += f", {images} image(s)" + (f" {'/'.join(grids)}" if grids else "")
        return how


def kind_of(config: Any) -> str:
    """'vlm', 'causal_lm' or 'classifier', from the model's own config."""
    if getattr(config, "vision_config", None) is not None and getattr(config, "image_token_id", None) is not None:
        return "vlm"
    if getattr(config, "image_size", None) is not None and getattr(config, "num_labels", None) is not None:
        return "classifier"
    return "causal_lm"


def schedule(kind: str, steps: int, packed: bool) -> list[Shape]:
    """`steps` shapes, each of a different total length (batch size for a classifier)."""
    shapes: list[Shape] = []
    seen: set[int] = set()
    for i in range(steps):
        if kind == "classifier":
            shapes.append(Shape([Sample(0) for _ in range(1 + i)], packed=False))  # batch 1, 2, 3, ...
            continue
        count = 1 + i % 3 if packed else 2
        samples = []
        for j in range(count):
            images = [GRIDS[(i + j + k) % len(GRIDS)] for k in range((i + j) % 3)] if kind == "vlm" else []
            samples.append(Sample(text=10 + 3 * ((i + 2 * j) % 5) + i, images=images))
        if kind == "vlm" and not any(s.images for s in samples):
            # every step feeds the vision tower: a one-rank DDP wrap without find_unused_parameters
            # fails on a step that leaves its parameters without gradients (text-only samples stay in packs)
            samples[-1].images = [GRIDS[i % len(GRIDS)]]
        total = _total(samples, packed)
        while total in seen:
            samples[0].text += 1
            total = _total(samples, packed)
        seen.add(total)
        shapes.append(Shape(samples, packed))
    return shapes


def _total(samples: list[Sample], packed: bool) -> int:
    lengths = [s.text + sum(h * w // 4 + 2 for h, w in s.images) for s in samples]
    return sum(lengths) if packed else max(lengths)


def make_batch(kind: str, config: Any, shape: Shape, seed: int, keys: set[str]) -> dict[str, Any]:
    """The batch of one step, on CPU (the caller moves it)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    if kind == "classifier":
        n = len(shape.samples)
        size = int(config.image_size)
        channels = int(getattr(config, "num_channels", 3) or 3)
        return {
            "pixel_values": torch.randn(n, channels, size, size, generator=gen),
            "labels": torch.randint(0, int(config.num_labels), (n,), generator=gen),
        }
    text_config = getattr(config, "text_config", None) or config
    vocab = int(text_config.vocab_size)
    ids, labels, images = [], [], []
    special = set()
    if kind == "vlm":
        vision = config.vision_config
        merge = int(getattr(vision, "spatial_merge_size", 2) or 2)
        patch = int(vision.patch_size)
        temporal = int(getattr(vision, "temporal_patch_size", 2) or 2)
        channels = int(getattr(vision, "in_channels", getattr(vision, "in_chans", 3)) or 3)
        image_id = int(config.image_token_id)
        start_id = int(getattr(config, "vision_start_token_id", image_id - 2))
        end_id = int(getattr(config, "vision_end_token_id", image_id - 1))
        special = {image_id, start_id, end_id, int(getattr(config, "video_token_id", image_id) or image_id)}
    top = min(special) if special else vocab
    for sample in shape.samples:
        half = sample.text // 2
        text = torch.randint(0, max(top - 8, 2), (sample.text,), generator=gen)
        row = [text[:half]]
        for h, w in sample.images:
            n_tokens = h * w // (merge * merge)
            row += [torch.tensor([start_id]), torch.full((n_tokens,), image_id), torch.tensor([end_id])]
            images.append((h, w))
        row.append(text[half:])
        seq = torch.cat(row)
        ids.append(seq)
        label = seq.clone()
        if special:
            label[torch.isin(seq, torch.tensor(sorted(special)))] = IGNORE
        labels.append(label)
    batch: dict[str, Any] = {}
    if shape.packed:
        input_ids = torch.cat(ids).unsqueeze(0)
        label_row = torch.cat(labels).unsqueeze(0)
        segments = torch.cat([torch.full((len(s),), i + 1) for i, s in enumerate(ids)]).unsqueeze(0)
        attention = torch.ones_like(input_ids)
    else:
        longest = max(len(s) for s in ids)
        input_ids = torch.zeros(len(ids), longest, dtype=torch.long)
        label_row = torch.full((len(ids), longest), IGNORE, dtype=torch.long)
        attention = torch.zeros(len(ids), longest, dtype=torch.long)
        segments = torch.zeros(len(ids), longest, dtype=torch.long)
        for i, (seq, label) in enumerate(zip(ids, labels, strict=True)):
            input_ids[i, : len(seq)] = seq
            label_row[i, : len(seq)] = label
            attention[i, : len(seq)] = 1
            segments[i, : len(seq)] = 1
    batch["input_ids"] = input_ids
    batch["attention_mask"] = attention
    batch["labels"] = label_row
    if kind == "vlm" and images:
        rows = sum(h * w for h, w in images)
        batch["pixel_values"] = torch.randn(rows, channels * temporal * patch * patch, generator=gen)
        batch["image_grid_thw"] = torch.tensor([[1, h, w] for h, w in images], dtype=torch.long)
    if kind == "vlm":
        batch["mm_token_type_ids"] = (input_ids == image_id).long()
    shifted = torch.nn.functional.pad(label_row, (0, 1), value=IGNORE)[..., 1:]
    extra = {
        "pack_segment_ids": segments,
        "source_sample_num": torch.tensor([len(shape.samples) if shape.packed else 1] * input_ids.shape[0]),
        "num_input_tokens": attention.sum(dim=-1),
        "num_loss_tokens": shifted.ne(IGNORE).sum(dim=-1),
        "num_source_samples": torch.tensor([len(shape.samples) if shape.packed else 1] * input_ids.shape[0]),
        "total_tokens": int(attention.sum()),
        "effective_tokens": int(shifted.ne(IGNORE).sum()),
    }
    for key in PACK_KEYS:
        if key in keys:
            batch[key] = extra[key]
    return batch
