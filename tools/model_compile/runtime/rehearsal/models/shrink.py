"""Width shrinking of a model's config, shared by the static plan (a config.json it reads) and the child (every
config a recipe builds a model from). Pure Python: the static side imports it without torch.

What is kept: every depth and structure field (layer counts, vision depth, deepstack and full-attention
indexes, layer types, expert counts, window and patch sizes, tied embeddings, dtype). What is shrunk: widths
(hidden and intermediate sizes, heads, head dim), with what depends on them kept consistent: the rotary
sections rescaled to the new head dim, the key/value heads dividing the heads, a vision tower's output width
the text width. The vocabulary and the special token ids follow the tokenizer: shrunk to the rehearsal's own
word-level vocabulary (`inputs/vocab.py`) only where the rehearsal supplies the tokenizer (`vocab=True`), kept
where the recipe's own tokenizer or data make the ids.

Shrinking is idempotent: a config shrunk once is left as it is (a model built from a sub-config of a model
already shrunk, or from the rehearsal's own tiny checkpoint, changes nothing).

A recipe's own config object (a dataclass, a pydantic model, a dict of its model section) is shrunk by
`shrink_fields`: only widths above `WIDE` (a width of 256 or less is tiny already), heads and head dim with them.
"""

from __future__ import annotations

import copy
from typing import Any, TypeGuard

from model_compile.runtime.rehearsal.inputs import vocab

TEXT_WIDTH = {"hidden_size": 64, "intermediate_size": 128, "head_dim": 16, "num_attention_heads": 4}
MOE_WIDTH = {"moe_intermediate_size": 32, "shared_expert_intermediate_size": 32}
LINEAR_WIDTH = {
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
}
VISION_WIDTH = {"hidden_size": 32, "embed_dim": 32, "intermediate_size": 64, "num_heads": 4, "num_attention_heads": 4}
# a recipe's own config object: width fields, shrunk only above WIDE
BUILDER_WIDTH = {
    "hidden_size": 64,
    "d_model": 64,
    "dim": 64,
    "embed_dim": 64,
    "width": 64,
    "intermediate_size": 128,
    "ffn_dim": 128,
    "d_ff": 128,
    "mlp_dim": 128,
}
HEAD_FIELDS = ("num_attention_heads", "n_heads", "num_heads", "n_head")
KV_FIELDS = ("num_key_value_heads", "n_kv_heads", "num_kv_heads")
WIDE = 256
RECOMPILE_LIMIT = 8  # torch's default `recompile_limit` (the child records the real one)
UNKNOWN_DEPTH = RECOMPILE_LIMIT + 2  # a stack whose depth is not known: above the limit, where per-layer guards show
DEPTH_KEYS = ("num_hidden_layers", "n_layers", "num_layers", "depth", "n_layer")
# every width-like name: a value here must be a positive integer (a negative width is bad input)
WIDTH_NAMES = frozenset(
    [*TEXT_WIDTH, *MOE_WIDTH, *LINEAR_WIDTH, *VISION_WIDTH, *BUILDER_WIDTH, *HEAD_FIELDS, *KV_FIELDS, "vocab_size"]
)


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def bad_widths(node: Any, prefix: str = "") -> list[str]:
    """`key value` of every width-named field that is not a positive integer (nested dicts included)."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict):
                out += bad_widths(value, path + ".")
            elif str(key) in WIDTH_NAMES and _int(value) and value <= 0:
                out.append(f"{path} {value}")
    return out


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


def _head_kept(node: dict[str, Any], table: dict[str, int], heads_key: str, widths: tuple[str, ...]) -> dict[str, int]:
    """`table` with the widths set so each head keeps its real size (fewer heads only): for a model whose code
    checks its head size (a rotary split that needs it divisible by 32, say)."""
    heads, hidden = node.get(heads_key), next((node[k] for k in widths if _int(node.get(k))), None)
    size = node.get("head_dim") if _int(node.get("head_dim")) else None
    if size is None and _int(heads) and heads > 0 and _int(hidden):
        size = hidden // heads
    if not size or not _int(heads):
        return table
    tiny_heads = min(heads, table.get(heads_key, 4))
    width = tiny_heads * size
    out = {**table, heads_key: tiny_heads, **{k: width for k in widths if k in table}}
    if "intermediate_size" in table:
        out["intermediate_size"] = 2 * width
    if "head_dim" in table:
        out["head_dim"] = size
    return out


def _shrink_text(node: dict[str, Any], where: str, shrunk: list[str], vocab_too: bool, keep_head: bool = False) -> None:
    heads_before = node.get("num_attention_heads")
    text = _head_kept(node, TEXT_WIDTH, "num_attention_heads", ("hidden_size",)) if keep_head else TEXT_WIDTH
    for table in (text, MOE_WIDTH, LINEAR_WIDTH):
        for key, tiny in table.items():
            value = node.get(key)
            if _int(value) and value > tiny:
                node[key] = tiny
                shrunk.append(f"{where}{key} {value} -> {tiny}")
    kv = node.get("num_key_value_heads")
    if _int(kv) and _int(heads_before):
        heads = node["num_attention_heads"]
        tiny_kv = heads if kv == heads_before else min(2, kv)
        while heads % max(tiny_kv, 1):
            tiny_kv -= 1
        if tiny_kv != kv:
            node["num_key_value_heads"] = tiny_kv
            shrunk.append(f"{where}num_key_value_heads {kv} -> {tiny_kv}")
    if vocab_too and _int(node.get("vocab_size")) and node["vocab_size"] != vocab.VOCAB_SIZE:
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


def _shrink_vision(node: dict[str, Any], text_hidden: int, shrunk: list[str], keep_head: bool = False) -> None:
    where = "vision_config."
    has_embed = "embed_dim" in node
    heads_key = "num_heads" if _int(node.get("num_heads")) else "num_attention_heads"
    widths = ("embed_dim",) if has_embed else ("hidden_size",)
    table = _head_kept(node, VISION_WIDTH, heads_key, widths) if keep_head else VISION_WIDTH
    for key, tiny in table.items():
        value = node.get(key)
        if key == "hidden_size" and has_embed:
            tiny = text_hidden  # Qwen2-VL: embed_dim is the width, hidden_size the merger's output
        if _int(value) and value != tiny and (value > tiny or (key == "hidden_size" and has_embed)):
            node[key] = tiny
            shrunk.append(f"{where}{key} {value} -> {tiny}")
    if _int(node.get("out_hidden_size")) and node["out_hidden_size"] != text_hidden:
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


def shrink(real: dict[str, Any], vocab_too: bool = True, keep_head: bool = False) -> tuple[dict[str, Any], list[str]]:
    """A copy of `real` (a config.json's dict) with widths shrunk; with `vocab_too` the vocabulary and token ids
    are the rehearsal's tokenizer's; with `keep_head` each attention head keeps its real size (fewer heads, the
    widths they make): the second try for a model whose code refuses the tiny head size. Returns the copy and
    what changed."""
    config = copy.deepcopy(real)
    shrunk: list[str] = []
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    if text is not None:
        _shrink_text(text, "text_config.", shrunk, vocab_too, keep_head)
    if any(k in config for k in TEXT_WIDTH) or text is None:
        _shrink_text(config, "", shrunk, vocab_too, keep_head)
    text_hidden = int((text or config).get("hidden_size", 64))
    if isinstance(config.get("vision_config"), dict):
        _shrink_vision(config["vision_config"], text_hidden, shrunk, keep_head)
    if vocab_too:
        _token_ids(config)
    for key in ("quantization_config", "_name_or_path"):
        config.pop(key, None)
    return config, shrunk


def shrink_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The new values of a recipe's own config fields (`{name: value}` of a dataclass, a pydantic model, a
    model section): widths above WIDE shrunk, and heads, key/value heads and head dim with them so the shapes
    still divide. Empty when nothing is wide."""
    new: dict[str, Any] = {}
    for key, tiny in BUILDER_WIDTH.items():
        value = fields.get(key)
        if _int(value) and value > WIDE:
            new[key] = tiny
    if not new:
        return {}
    for key in HEAD_FIELDS:
        heads = fields.get(key)
        if _int(heads) and heads > 4:
            new[key] = 4
    heads_after = next((new.get(k, fields.get(k)) for k in HEAD_FIELDS if _int(fields.get(k))), None)
    heads_before = next((fields.get(k) for k in HEAD_FIELDS if _int(fields.get(k))), None)
    for key in KV_FIELDS:
        kv = fields.get(key)
        if _int(kv) and _int(heads_after):
            tiny_kv = heads_after if kv == heads_before else min(2, kv)
            while heads_after % max(tiny_kv, 1):
                tiny_kv -= 1
            if tiny_kv != kv:
                new[key] = tiny_kv
    if _int(fields.get("head_dim")) and fields["head_dim"] > 16:
        new["head_dim"] = 16
    return new


def describe(fields: dict[str, Any], new: dict[str, Any], where: str = "") -> list[str]:
    return [f"{where}{key} {fields.get(key)} -> {value}" for key, value in new.items()]


def depth_of(config: dict[str, Any]) -> dict[str, Any]:
    """The depth of each stack a config.json names, for a reader (the child measures the built model's)."""
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


_INDEXED = ("index", "indexes", "indices", "layers")


def at_depth(config: dict[str, Any], depth: int) -> tuple[dict[str, Any], list[str]]:
    """A copy of a config (a config class's defaults: its structure) with every stack at `depth` layers: the
    policy for a depth that is not known. What depends on a stack's depth follows it: lists of layer indexes
    (deepstack, full-attention blocks) rescaled into the new depth, per-layer lists (`layer_types`) cut to it with
    every kind of layer the full list has kept. Returns the copy and what changed."""
    out = copy.deepcopy(config)
    said: list[str] = []

    def visit(node: dict[str, Any], where: str) -> None:
        key = next((k for k in DEPTH_KEYS if _int(node.get(k)) and node[k] > 0), None)
        if key is not None and node[key] != depth:
            old = int(node[key])
            node[key] = depth
            said.append(f"{where}{key} {old} -> {depth}")
            for name, value in list(node.items()):
                if not isinstance(value, list) or not value or name == key:
                    continue
                if len(value) == old and not all(_int(v) for v in value):
                    node[name] = _cut(value, depth)
                    said.append(f"{where}{name}: the first {depth} of {old}")
                elif any(part in name for part in _INDEXED) and all(_int(v) and 0 <= v < old for v in value):
                    scaled = sorted({min(depth - 1, round(v * (depth - 1) / max(old - 1, 1))) for v in value})
                    if scaled != value:
                        node[name] = scaled
                        said.append(f"{where}{name} {value} -> {scaled}")
        for name, value in node.items():
            if isinstance(value, dict) and name.endswith("config"):
                visit(value, f"{where}{name}.")

    visit(out, "")
    return out, said


def _cut(values: list[Any], depth: int) -> list[Any]:
    """The first `depth` entries of a per-layer list, the last ones replaced by any kind the cut lost."""
    kept = list(values[:depth])
    lost = [v for v in dict.fromkeys(values) if v not in kept]
    for i, kind in enumerate(lost[: len(kept)]):
        kept[len(kept) - 1 - i] = kind
    return kept
