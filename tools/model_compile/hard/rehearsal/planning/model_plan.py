"""The rehearsal's model, statically: the real architecture at its real depth, only its width shrunk.

Where the architecture comes from, in order: `--model-config` (a config.json), a local checkpoint folder
with a `config.json` at the stage's pretrained path, that hub id's `config.json` in the local Hugging Face
cache (read from disk, never fetched), else the family its name names, as a preset whose depth is set above
the recompile limit (limit + 2), because a guard that differs per layer shows only past the limit and the
real depth is unknown here. A recipe that builds its model from its own size fields (no checkpoint) keeps
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

import copy
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.hard.stages import hub_cache
from model_compile.runtime.rehearsal.inputs import vocab

RECOMPILE_LIMIT = 8  # torch's default `recompile_limit` (the child records the real one)
UNKNOWN_DEPTH = RECOMPILE_LIMIT + 2

TEXT_WIDTH = {"hidden_size": 64, "intermediate_size": 128, "head_dim": 16, "num_attention_heads": 4}
MOE_WIDTH = {"moe_intermediate_size": 32, "shared_expert_intermediate_size": 32}
LINEAR_WIDTH = {
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}
VISION_WIDTH = {"hidden_size": 32, "embed_dim": 32, "intermediate_size": 64, "num_heads": 4, "num_attention_heads": 4}
# a recipe-local builder's width fields under the model section, shrunk only above WIDE
BUILDER_WIDTH = {"hidden_size": 64, "d_model": 64, "dim": 64, "intermediate_size": 128, "ffn_dim": 128}
WIDE = 256
DEPTH_KEYS = ("num_hidden_layers", "n_layers", "num_layers", "depth", "n_layer")

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


def family_from_name(name: str) -> str | None:
    if OTHER_ARCHITECTURE.search(name):
        return None
    for pattern, family in NAME_PATTERNS:
        if pattern.search(name):
            return family
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotPlanned(f"{path} is not a readable config.json: {exc}") from exc
    if not isinstance(data, dict) or not data.get("model_type"):
        raise NotPlanned(f"{path} is not a model config.json (no model_type)")
    return data


def hub_config(name: str) -> Path | None:
    folder = hub_cache() / ("models--" + name.replace("/", "--")) / "snapshots"
    found = sorted(folder.glob("*/config.json")) if folder.is_dir() else []
    return found[-1] if found else None


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


# -- shrinking ---------------------------------------------------------------


def _sections(total: int, old: list[int]) -> list[int]:
    """Rotary sections rescaled to sum to `total`, by largest remainder, each at least 1."""
    scale = total / max(sum(old), 1)
    raw = [x * scale for x in old]
    out = [max(1, int(r)) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - int(raw[i]), reverse=True):
        if sum(out) >= total:
            break
        out[i] += 1
    while sum(out) > total:
        i = max(range(len(out)), key=lambda i: out[i])
        out[i] -= 1
    return out


def _shrink_text(node: dict[str, Any], where: str, shrunk: list[str]) -> None:
    heads_before = node.get("num_attention_heads")
    for table in (TEXT_WIDTH, MOE_WIDTH, LINEAR_WIDTH):
        for key, tiny in table.items():
            value = node.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > tiny:
                node[key] = tiny
                shrunk.append(f"{where}{key} {value} -> {tiny}")
    kv = node.get("num_key_value_heads")
    if isinstance(kv, int) and isinstance(heads_before, int):
        tiny_kv = node["num_attention_heads"] if kv == heads_before else min(2, kv)
        if tiny_kv != kv:
            node["num_key_value_heads"] = tiny_kv
            shrunk.append(f"{where}num_key_value_heads {kv} -> {tiny_kv}")
    if isinstance(node.get("vocab_size"), int) and node["vocab_size"] != vocab.VOCAB_SIZE:
        shrunk.append(f"{where}vocab_size {node['vocab_size']} -> {vocab.VOCAB_SIZE} (the rehearsal's tokenizer)")
        node["vocab_size"] = vocab.VOCAB_SIZE
    head_dim = node.get("head_dim") or (node.get("hidden_size", 64) // max(node.get("num_attention_heads", 4), 1))
    for rope_key in ("rope_scaling", "rope_parameters"):
        rope = node.get(rope_key)
        if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list):
            old = [int(x) for x in rope["mrope_section"]]
            new = _sections(int(head_dim) // 2, old)
            if new != old:
                rope["mrope_section"] = new
                shrunk.append(f"{where}{rope_key}.mrope_section {old} -> {new} (sums to head_dim/2)")


def _shrink_vision(node: dict[str, Any], text_hidden: int, shrunk: list[str]) -> None:
    where = "vision_config."
    has_embed = "embed_dim" in node
    for key, tiny in VISION_WIDTH.items():
        value = node.get(key)
        if key == "hidden_size" and has_embed:
            tiny = text_hidden  # Qwen2-VL: embed_dim is the width, hidden_size the merger's output
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value != tiny
            and (value > tiny or key == "hidden_size")
        ):
            node[key] = tiny
            shrunk.append(f"{where}{key} {value} -> {tiny}")
    if isinstance(node.get("out_hidden_size"), int) and node["out_hidden_size"] != text_hidden:
        shrunk.append(f"{where}out_hidden_size {node['out_hidden_size']} -> {text_hidden} (the text width)")
        node["out_hidden_size"] = text_hidden


def _token_ids(config: dict[str, Any]) -> None:
    for node in (config, config.get("text_config")):
        if not isinstance(node, dict):
            continue
        for key, token in vocab.CONFIG_TOKENS.items():
            if key in node and node[key] is not None:
                node[key] = vocab.token_id(token)
    if isinstance(config.get("vision_config"), dict):
        for key in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
            config.setdefault(key, vocab.token_id(vocab.CONFIG_TOKENS[key]))


def shrink(real: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of `real` with widths shrunk and token ids remapped; what changed."""
    config = copy.deepcopy(real)
    shrunk: list[str] = []
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    if text is not None:
        _shrink_text(text, "text_config.", shrunk)
    if any(k in config for k in TEXT_WIDTH) or text is None:
        _shrink_text(config, "", shrunk)
    text_hidden = int((text or config).get("hidden_size", 64))
    if isinstance(config.get("vision_config"), dict):
        _shrink_vision(config["vision_config"], text_hidden, shrunk)
    _token_ids(config)
    for key in ("quantization_config", "auto_map", "_name_or_path"):
        config.pop(key, None)
    return config, shrunk


def depth_of(config: dict[str, Any]) -> dict[str, Any]:
    """The depth of each stack, named for a reader."""
    out: dict[str, Any] = {}
    sub = config.get("text_config")
    text: dict[str, Any] = sub if isinstance(sub, dict) else config
    for key in DEPTH_KEYS:
        if isinstance(text.get(key), int):
            out["text layers" if config.get("vision_config") else "layers"] = text[key]
            break
    if isinstance(text.get("layer_types"), list):
        kinds = sorted(set(map(str, text["layer_types"])))
        out["layer types"] = ", ".join(f"{text['layer_types'].count(k)} {k}" for k in kinds)
    if isinstance(text.get("num_experts"), int) or isinstance(text.get("num_local_experts"), int):
        out["experts"] = text.get("num_experts") or text.get("num_local_experts")
    vision = config.get("vision_config")
    if isinstance(vision, dict):
        for key in ("depth", "num_hidden_layers"):
            if isinstance(vision.get(key), int):
                out["vision blocks"] = vision[key]
                break
        for key in ("deepstack_visual_indexes", "fullatt_block_indexes"):
            if isinstance(vision.get(key), list):
                out[key.replace("_", " ")] = list(vision[key])
    return out


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


def plan_model(
    pretrained: str | None,
    repo_root: Path,
    model_config: Path | None,
    builder_fields: dict[str, Any],
    bounds: dict[str, int],
) -> ModelPlan:
    """The model the rehearsal builds. `builder_fields`: {dotted key: value} of the model section, for a
    recipe that builds from its own fields; `bounds`: the stage's image pixel bounds (min/max_pixels)."""
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
        family = family_from_name(pretrained)
        if family is None:
            raise NotPlanned(
                f"the architecture of {pretrained!r} is not known here: {where}, and its name names no family "
                f"with a preset ({', '.join(FAMILIES)}); pass --model-config PATH to its config.json"
            )
        config = _preset(family)
        _token_ids(config)
        depth = depth_of(config)
        return ModelPlan(
            source=(
                f"the {family} preset ({where}): the real depth is unknown, so each stack has {UNKNOWN_DEPTH} "
                f"layers, above the recompile limit ({RECOMPILE_LIMIT}), where per-layer guards show; "
                "--model-config PATH to the real config.json rehearses the real depth"
            ),
            config=config,
            model_type=family,
            depth=depth,
            depth_known=False,
            processor=_processor(config, bounds),
        )
    overrides, shrunk, depth = [], [], {}
    for key, value in builder_fields.items():
        leaf = key.rsplit(".", 1)[-1]
        if leaf in DEPTH_KEYS and isinstance(value, int):
            depth[leaf] = value
        tiny = BUILDER_WIDTH.get(leaf)
        if tiny and isinstance(value, int) and not isinstance(value, bool) and value > WIDE:
            overrides.append(f"{key}={tiny}")
            shrunk.append(f"{key} {value} -> {tiny}")
    return ModelPlan(
        source="the recipe's own builder and its stage's model fields"
        + (" (widths above 256 shrunk)" if shrunk else " (as the stage sets them: nothing shrunk)"),
        depth=depth,
        shrunk=shrunk,
        overrides=overrides,
    )
