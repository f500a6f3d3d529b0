"""generate lists the repository's code that runs inside the targets it writes - a patch's replacement reached from
a target's forward - and the compile hazards it sees there (`.item()`, a loop over a value read from a tensor,
print), with file:line, on stderr and in the README section."""

from __future__ import annotations

from gen_helpers import ENGINE_REL, RECIPE_REL, make_repo, run_generate

BLOCKS = '''"""A recipe-local model (fixture written for these tests)."""

from torch import nn

from . import packing


class ToyAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, mask):
        lengths = packing.segment_lengths(mask)
        return self.proj(x) + lengths.sum()


class ToyBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = ToyAttention()
        self.mlp = nn.Sequential(nn.Linear(8, 8), nn.GELU())

    def forward(self, x, mask):
        return self.mlp(self.attn(x, mask))


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.layers = nn.ModuleList([ToyBlock() for _ in range(2)])
        self.head = nn.Linear(8, 8)

    def forward(self, ids, mask):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(packing.pool(x))
'''
PACKING = '''"""Packing helpers the model calls (fixture)."""


def segment_lengths(mask):
    return mask.sum(-1)


def pool(x):
    return x.mean(1)
'''
PATCH = '''"""Patches for packed batches (fixture)."""

import torch

from . import packing


def apply_segment_patch():
    """Count each packed segment (replaces packing.segment_lengths)."""

    def _count(mask, index):
        return (mask == index + 1).sum()

    def _lengths(mask):
        count = int(mask.max().item())
        out = []
        for index in range(count):
            out.append(_count(mask, index))
        print(out)
        return torch.stack(out)

    packing.segment_lengths = _lengths


def apply_pool_patch():
    """Pool by the first token (replaces packing.pool, which runs outside the blocks)."""

    def _pool(x):
        return x[:, 0]

    packing.pool = _pool
'''


def _repo(tmp_path):
    root = make_repo(tmp_path, use_git=False)
    model = root / RECIPE_REL / "model"
    (model / "blocks.py").write_text(BLOCKS)
    (model / "packing.py").write_text(PACKING)
    (model / "patch.py").write_text(PATCH)
    (model / "builder.py").write_text(
        "from .blocks import ToyModel\n\n\ndef build_toy_model(config):\n    return ToyModel()\n"
    )
    engine = root / ENGINE_REL
    text = engine.read_text()
    text = text.replace(
        "from ..model.builder import build_toy_model\n",
        "from ..model.builder import build_toy_model\nfrom ..model.patch import apply_pool_patch, apply_segment_patch\n",
    )
    text = text.replace(
        "        model = self.model_kit.apply_model_patches(model, [])\n",
        "        apply_segment_patch()\n        apply_pool_patch()\n",
    )
    engine.write_text(text)
    return root


def test_a_patch_with_item_inside_a_compiled_target_is_listed_with_its_hazards(tmp_path):
    root = _repo(tmp_path)
    code, out, err = run_generate(
        str(root / RECIPE_REL),
        "--path",
        "regional",
        "--reason",
        "packed batches vary per step",
        "--config-name",
        "train",
    )
    assert code == 0, err
    patched = next(line for line in err.splitlines() if "replaced by apply_segment_patch" in line)
    assert "`packing.segment_lengths`, replaced by apply_segment_patch (recipes/toy_vlm/model/patch.py:14)" in patched
    assert "runs inside `model.layers`" in patched and "ToyAttention.forward" in patched
    hazards = next(line for line in err.splitlines() if "compile hazards in the repository's code" in line)
    assert "recipes/toy_vlm/model/patch.py:15 `.item()`" in hazards
    assert "recipes/toy_vlm/model/patch.py:17 a Python loop over a count read from a tensor" in hazards
    assert "recipes/toy_vlm/model/patch.py:19 `print(...)`" in hazards
    readme = out.split("+++ b/recipes/toy_vlm/README.md")[1].split("+++ ")[0]
    assert "+- Runs compiled: `packing.segment_lengths`, replaced by apply_segment_patch" in readme
    assert "recipes/toy_vlm/model/patch.py:15" in readme
    # the patch whose code runs outside the blocks is said to stay eager, not inside
    assert "apply_pool_patch" not in patched and "code patched in by apply_pool_patch" in readme


def test_a_patch_outside_the_targets_is_not_listed_inside(tmp_path):
    root = _repo(tmp_path)
    blocks = root / RECIPE_REL / "model/blocks.py"
    blocks.write_text(blocks.read_text().replace("lengths = packing.segment_lengths(mask)", "lengths = mask.sum(-1)"))
    code, _, err = run_generate(
        str(root / RECIPE_REL),
        "--path",
        "regional",
        "--reason",
        "packed batches vary per step",
        "--config-name",
        "train",
    )
    assert code == 0, err
    assert "replaced by apply_segment_patch" not in err and "patch.py:15" not in err
    assert "no compile hazard seen statically" in err  # the blocks' own code was read, and is clean
