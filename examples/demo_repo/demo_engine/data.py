"""Synthetic image+text batches for a Qwen2-VL-style model (no dataset needed)."""

from __future__ import annotations

from typing import Sequence

import torch


class SyntheticVLMData:
    """Deterministic random batches: one image per sample, text around it.

    `image_sizes` lists (h, w) grids in patches (both even: the merger joins 2x2
    patches); batch `i` uses `image_sizes[i % len(image_sizes)]`, so several
    sizes make the sequence length change from step to step.
    """

    def __init__(
        self,
        vocab_size: int,
        patch_size: int,
        batch_size: int = 2,
        text_len: int = 16,
        image_sizes: Sequence[Sequence[int]] = ((8, 8),),
        seed: int = 0,
    ):
        self.vocab_size = vocab_size
        self.patch_size = patch_size
        self.batch_size = batch_size
        self.text_len = text_len
        self.image_sizes = [tuple(s) for s in image_sizes]
        self.seed = seed
        self.image_token_id = vocab_size - 4
        self.vision_start_id = vocab_size - 2
        self.vision_end_id = vocab_size - 1

    def batch(self, index: int) -> dict[str, torch.Tensor]:
        h, w = self.image_sizes[index % len(self.image_sizes)]
        gen = torch.Generator().manual_seed(self.seed * 100003 + index)
        n_image_tokens = h * w // 4
        half = self.text_len // 2
        rows = []
        for _ in range(self.batch_size):
            text = torch.randint(0, self.vocab_size - 8, (self.text_len,), generator=gen)
            rows.append(
                torch.cat(
                    [
                        text[:half],
                        torch.tensor([self.vision_start_id]),
                        torch.full((n_image_tokens,), self.image_token_id),
                        torch.tensor([self.vision_end_id]),
                        text[half:],
                    ]
                )
            )
        input_ids = torch.stack(rows)
        is_image = input_ids == self.image_token_id
        labels = input_ids.masked_fill(is_image, -100)
        patch_dim = 3 * 2 * self.patch_size * self.patch_size
        pixel_values = torch.randn(self.batch_size * h * w, patch_dim, generator=gen)
        return {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "labels": labels,
            "pixel_values": pixel_values,
            "image_grid_thw": torch.tensor([[1, h, w]] * self.batch_size),
            "mm_token_type_ids": is_image.long(),
        }
