"""The rehearsal's model, statically: the real architecture at its real depth, only its width shrunk.

Where the architecture comes from, in order: `--model-config` (a config.json), a local checkpoint folder
with a `config.json` at the stage's pretrained path, that hub id's `config.json` in the local Hugging Face
cache (read from disk, never fetched), else the family its name names (or, when it names none, the family the
recipe's other stages, README or code name: `family.py`), as a preset whose depth is set above the recompile
limit (limit + 2), because a guard that differs per layer shows only past the limit and the real depth is
unknown here. A recipe that builds its model from its own size fields (no checkpoint) keeps
those fields, only widths above `WIDE` shrunk.

What is kept of a real config: every depth and structure field (layer counts, vision depth, deepstack and
full-attention indexes, layer types, expert counts, window and patch sizes, tied embeddings, dtype). What
is shrunk: widths (hidden and intermediate sizes, heads, head dim, vocabulary), with the rotary sections
rescaled to the new head dim; special token ids are those of the rehearsal's own vocabulary
(`runtime/rehearsal/inputs/vocab.py`). Any `model_type` transformers knows builds from its config class in the
child; nothing here is a list of allowed families.

Pure Python: no torch, nothing of the repository imported.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.hard.rehearsal.planning import family as family_evidence
from model_compile.runtime.rehearsal.inputs import vocab
from model_compile.runtime.rehearsal.models import names
from model_compile.runtime.rehearsal.models import shrink as shrinking

RECOMPILE_LIMIT = 8  # torch's default `recompile_limit` (the child records the real one)
UNKNOWN_DEPTH = RECOMPILE_LIMIT + 2
WIDE = shrinking.WIDE
BUILDER_WIDTH = shrinking.BUILDER_WIDTH
DEPTH_KEYS = shrinking.DEPTH_KEYS

# Hub ids and folder names -> the family preset used when no config.json of the model is here.
NAME_PATTERNS = (
    (re.compile(r"qwen3[-_.]?vl", re.I), "qwen3_vl"),
    (re.compile(r"qwen2[._-]5[-_.]?vl", re.I), "qwen2_5_vl"),
    (re.compile(r"qwen2[-_.]?vl", re.I), "qwen2_vl"),
    (re.compile(r"qwen3(?![-_.]?vl)", re.I), "qwen3"),
    (re.compile(r"(^|/)vit[-_]|google/vit", re.I), "vit"),
)
# Variants of a family that are another architecture (mixture of experts, hybrid attention, omni models):
# their structure cannot come from a preset, only from their own config.json.
OTHER_ARCHITECTURE = re.compile(r"moe|-a\d+(\.\d+)?b\b|next|omni", re.I)


class NotPlanned(Exception):
    """The rehearsal cannot run as asked; the message says why and what fixes it."""


def _preset(family: str) -> dict[str, Any]:
    text = {
        "vocab_size": vocab.VOCAB_SIZE,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": UNKNOWN_DEPTH,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
    }
    if family == "qwen3":
        return {
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            **text,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        }
    if family == "vit":
        return {
            "model_type": "vit",
            "architectures": ["ViTForImageClassification"],
            "image_size": 224,
            "patch_size": 16,
            "num_channels": 3,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": UNKNOWN_DEPTH,
            "num_attention_heads": 4,
            "num_labels": 1000,
        }
    vision: dict[str, Any] = {
        "depth": UNKNOWN_DEPTH,
        "num_heads": 4,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
    }
    top: dict[str, Any] = {"model_type": family, "torch_dtype": "bfloat16"}
    if family == "qwen2_vl":
        vision.update(embed_dim=32, hidden_size=64, patch_size=14, mlp_ratio=2)
        rope: dict[str, Any] = {"rope_type": "default", "mrope_section": [2, 3, 3]}
        top["architectures"] = ["Qwen2VLForConditionalGeneration"]
    elif family == "qwen2_5_vl":
        vision.update(
            hidden_size=32,
            intermediate_size=64,
            out_hidden_size=64,
            patch_size=14,
            window_size=112,
            fullatt_block_indexes=[4, UNKNOWN_DEPTH - 1],
        )
        rope = {"rope_type": "default", "mrope_section": [2, 3, 3]}
        top["architectures"] = ["Qwen2_5_VLForConditionalGeneration"]
    else:
        vision.update(
            hidden_size=32,
            intermediate_size=64,
            out_hidden_size=64,
            patch_size=16,
            num_position_embeddings=2304,
            deepstack_visual_indexes=[2, 5, 8],
        )
        rope = {"rope_type": "default", "mrope_section": [3, 3, 2], "mrope_interleaved": True}
        top["architectures"] = ["Qwen3VLForConditionalGeneration"]
        top["tie_word_embeddings"] = False
    return {**top, "text_config": {**text, "rope_scaling": rope}, "vision_config": vision}


FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3", "vit")


@dataclass
class ModelPlan:
    source: str
    config: dict[str, Any] | None = None  # the tiny checkpoint's config.json; None: the recipe's own builder
    model_type: str | None = None
    depth: dict[str, Any] = field(default_factory=dict)
    depth_known: bool = True
    shrunk: list[str] = field(default_factory=list)
    processor: dict[str, Any] | None = None
    overrides: list[str] = field(default_factory=list)  # size fields of a recipe-local builder
    notes: list[str] = field(default_factory=list)

    @property
    def vision(self) -> bool:
        return bool(self.config and isinstance(self.config.get("vision_config"), dict))


def name_family(name: str) -> str | None:
    """The family a name names; `<family> variant` for another architecture of it (its structure is not the
    preset's); None when it names none."""
    for pattern, family in NAME_PATTERNS:
        if pattern.search(name):
            return family + family_evidence.VARIANT if OTHER_ARCHITECTURE.search(name) else family
    return None


def family_from_name(name: str) -> str | None:
    family = name_family(name)
    return None if family is None or family.endswith(family_evidence.VARIANT) else family


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotPlanned(f"{path} is not a readable config.json: {exc}") from exc
    if not isinstance(data, dict) or not data.get("model_type"):
        raise NotPlanned(f"{path} is not a model config.json (no model_type)")
    return data


hub_config = names.hub_config


def real_config(value: str | None, repo_root: Path, model_config: Path | None) -> tuple[dict[str, Any] | None, str]:
    """(the real config.json, where it was found), or (None, why not)."""
    if model_config is not None:
        return _read_json(model_config), f"--model-config {model_config}"
    if value is None:
        return None, "no pretrained path in the stage"
    local = Path(value) if os.path.isabs(value) else repo_root / value
    if (local / "config.json").is_file():
        return _read_json(local / "config.json"), f"{value}/config.json (a local checkpoint)"
    cached = hub_config(value)
    if cached is not None:
        return _read_json(cached), f"{value}'s config.json in the local Hugging Face cache"
    return None, f"no config.json of {value} on this machine (not a local folder, not in the hub cache)"


# -- shrinking (shared with the child: runtime/rehearsal/models/shrink.py) --------------------------------


def shrink(real: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `real` with widths shrunk and token ids remapped to the rehearsal's tokenizer; what changed.
    The tiny checkpoint holds no code: a remote-code `auto_map` is dropped (transformers builds the model_type)."""
    config, shrunk = shrinking.shrink(real, vocab_too=True)
    config.pop("auto_map", None)
    return config, shrunk


depth_of = shrinking.depth_of
_token_ids = shrinking._token_ids


def _processor(config: dict[str, Any], bounds: dict[str, int]) -> dict[str, Any] | None:
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return None
    geometry = {
        "patch_size": vision.get("patch_size"),
        "merge_size": vision.get("spatial_merge_size"),
        "temporal_patch_size": vision.get("temporal_patch_size"),
        **bounds,
    }
    return {"model_type": config.get("model_type"), "geometry": geometry}


def _family(pretrained: str, where: str, recipe: Callable[[], family_evidence.Evidence] | None) -> tuple[str, str]:
    """(family, where it was read) for a checkpoint whose config.json is not here, or NotPlanned."""
    family = family_from_name(pretrained)
    if family is not None:
        return family, f"{where}; its name names the family"
    evidence = recipe() if recipe is not None else family_evidence.Evidence()
    supply = f"supply its config.json with --model-config {pretrained}=PATH (or --model-config PATH)"
    if evidence.family is not None:
        return evidence.family, f"{where}; its name names no family, {evidence.place} do: {evidence.where()}"
    if evidence.families:
        raise NotPlanned(
            f"the architecture of {pretrained!r} is not known here: {where}; its name names no family and "
            f"{evidence.place} name more than one, or another architecture of one ({evidence.candidates()}): "
            f"{supply}"
        )
    raise NotPlanned(
        f"the architecture of {pretrained!r} is not known here: {where}, and neither its name nor the recipe "
        f"(its other stages, README, code) names a family with a preset ({', '.join(FAMILIES)}); {supply}"
    )


def plan_model(
    pretrained: str | None,
    repo_root: Path,
    model_config: Path | None,
    builder_fields: dict[str, Any],
    bounds: dict[str, int],
    recipe_family: Callable[[], family_evidence.Evidence] | None = None,
) -> ModelPlan:
    """The model the rehearsal builds. `builder_fields`: {dotted key: value} of the model section, for a
    recipe that builds from its own fields; `bounds`: the stage's image pixel bounds (min/max_pixels);
    `recipe_family`: what the recipe says its model is, read only when the checkpoint's config is not here."""
    real, where = real_config(pretrained, repo_root, model_config)
    if real is not None:
        config, shrunk = shrink(real)
        depth = depth_of(config)
        return ModelPlan(
            source=f"{real.get('model_type')} from {where}, at its real depth",
            config=config,
            model_type=str(real.get("model_type")),
            depth=depth,
            shrunk=shrunk,
            processor=_processor(config, bounds),
        )
    if pretrained is not None:
        family, where = _family(pretrained, where, recipe_family)
        config = _preset(family)
        _token_ids(config)
        depth = depth_of(config)
        return ModelPlan(
            source=(
                f"the {family} preset ({where}): the real depth is unknown, so each stack has {UNKNOWN_DEPTH} "
                f"layers, above the recompile limit ({RECOMPILE_LIMIT}), where per-layer guards show, and the "
                f"checkpoint's own structure fields are the preset's; --model-config {pretrained}=PATH to its "
                "real config.json rehearses the real model"
            ),
            config=config,
            model_type=family,
            depth=depth,
            depth_known=False,
            processor=_processor(config, bounds),
        )
    depth = {}
    leaves: dict[str, str] = {}
    for key, value in builder_fields.items():
        leaf = key.rsplit(".", 1)[-1]
        leaves[leaf] = key
        if leaf in DEPTH_KEYS and isinstance(value, int):
            depth[leaf] = value
    fields = {leaf: builder_fields[key] for leaf, key in leaves.items()}
    new = shrinking.shrink_fields(fields)
    overrides = [f"{leaves[leaf]}={value}" for leaf, value in new.items()]
    shrunk = [f"{leaves[leaf]} {fields[leaf]} -> {value}" for leaf, value in new.items()]
    return ModelPlan(
        source="the recipe's own builder and its stage's model fields"
        + (f" (widths above {WIDE} shrunk)" if shrunk else " (as the stage sets them: nothing shrunk here)"),
        depth=depth,
        shrunk=shrunk,
        overrides=overrides,
    )
