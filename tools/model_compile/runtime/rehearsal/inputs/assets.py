"""What the rehearsal puts where the recipe reads its model and data: a tiny checkpoint, its tokenizer or
processor, and synthetic rows.

Runs once per rehearsal, in the `prepare` child, before the twins. The checkpoint's `config.json` comes whole
from the static plan (the real config with only widths shrunk; a remote-code config with its code files beside
it); this module builds the model class that config names, random-initialised with a fixed seed,
and saves it with `save_pretrained`, so the recipe's own loader (`from_pretrained`, `AutoConfig` +
`from_config`) reads it as it would read the real one. The tokenizer is word-level over `vocab.py`'s layout,
saved with `PreTrainedTokenizerFast.save_pretrained`; a VLM also gets its model type's processor (image processor
at the real patch, merge and pixel bounds, the chat template).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.inputs import vocab


def _model_class(config: Any, folder: Path) -> Any:
    import transformers

    auto_map = getattr(config, "auto_map", None)
    if isinstance(auto_map, dict):  # remote code: the class its architectures name, else its most specific head
        refs = {str(k): str(v[0] if isinstance(v, (list, tuple)) else v) for k, v in auto_map.items() if v}
        heads = [ref for key, ref in refs.items() if key.startswith("AutoModel")]
        named = [ref for ref in heads if ref.rsplit(".", 1)[-1] in (getattr(config, "architectures", None) or [])]
        if named or heads:
            from transformers.dynamic_module_utils import get_class_from_dynamic_module

            return get_class_from_dynamic_module((named or heads)[-1], str(folder))
    for name in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    if getattr(config, "vision_config", None) is not None:
        return transformers.AutoModelForImageTextToText
    if getattr(config, "num_labels", None) and getattr(config, "image_size", None):
        return transformers.AutoModelForImageClassification
    return transformers.AutoModelForCausalLM


def write_checkpoint(spec: dict[str, Any], reference_dtype: str = "float32") -> dict[str, Any]:
    """Save the tiny model (and its tokenizer/processor) into spec['dir']; facts for the record. The files a model's
    own code may read while it is built (its remote code, its tokenizer and processor) are written first."""
    import torch
    import transformers

    out = Path(spec["dir"])
    reference = spec.get("reference_dir")
    folders = [out, *([Path(reference)] if reference else [])]
    code = [Path(f) for f in spec.get("code_files") or []]  # a remote-code config's files, beside it as in the real
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        for path in code:
            shutil.copy2(path, folder / path.name)
    facts: dict[str, Any] = {"dir": str(out), "seed": int(spec.get("seed", 0))}
    _write_processing(spec, folders, facts)
    (out / "config.json").write_text(json.dumps(spec["config"], indent=2), encoding="utf-8")
    config = transformers.AutoConfig.from_pretrained(str(out), trust_remote_code=bool(code))
    cls = _model_class(config, out)
    torch.manual_seed(int(spec.get("seed", 0)))
    if hasattr(cls, "from_config") and cls.__name__.startswith("Auto"):
        model = cls.from_config(config, trust_remote_code=bool(code))
    else:
        model = cls(config)
    dtype = spec["config"].get("torch_dtype") or spec["config"].get("dtype")
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        model = model.to(getattr(torch, dtype))  # saved in the checkpoint's own dtype, as the real one is
    said = save_model(model, out)
    if said:
        facts["saved"] = said
    if reference:
        # the reference twin's checkpoint: the same (rounded) weights in its higher precision
        wide = getattr(torch, reference_dtype)
        model = model.to(wide)
        _set_dtype(model.config, wide)
        save_model(model, Path(reference))
    facts["class"] = type(model).__name__
    facts["parameters"] = sum(p.numel() for p in model.parameters())
    del model
    facts["reference_dir"] = str(reference) if reference else None
    facts["reference_dtype"] = reference_dtype if reference else None
    return facts


def _write_processing(spec: dict[str, Any], folders: list[Path], facts: dict[str, Any]) -> None:
    """The rehearsal's tokenizer, the model type's processor, and the real processor settings beside a supplied
    config, in each checkpoint folder."""
    if spec.get("tokenizer", True):
        tokenizer = None
        for folder in folders:
            tokenizer = write_tokenizer(folder)
        if tokenizer is not None:
            facts["tokenizer"] = f"word-level, {len(tokenizer)} tokens"
        if spec.get("processor") and tokenizer is not None:
            try:
                for folder in folders:
                    facts["processor"] = write_processor(folder, tokenizer, spec["processor"])
            except Exception as exc:  # noqa: BLE001 - a recipe fed synthetic batches needs none; one that does says so
                facts["processor"] = (
                    f"not built here ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"
                )
    for path in [Path(f) for f in spec.get("processor_files") or []]:  # the real settings, beside the supplied config
        for folder in folders:
            shutil.copy2(path, folder / path.name)
        facts["processor"] = f"the real processor settings beside the supplied config ({path.name})"


def save_model(model: Any, folder: Path) -> str | None:
    """`save_pretrained`, or, where this transformers refuses the model's own code there (remote code written for
    another release: its tied-weights declaration, say), its config and its state in one safetensors file, which
    `from_pretrained` reads all the same; the note says so (None when save_pretrained did it)."""
    try:
        model.save_pretrained(str(folder))
        return None
    except Exception as exc:  # noqa: BLE001 - the tool's own way of writing the checkpoint, said in the record
        from safetensors.torch import save_model as save_tensors

        model.config.save_pretrained(str(folder))
        save_tensors(model, str(folder / "model.safetensors"))
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        return f"saved as one safetensors file: save_pretrained refused the model ({type(exc).__name__}: {first})"


def _set_dtype(config: Any, dtype: Any) -> None:
    """The dtype a config.json records (`dtype` in transformers 5, `torch_dtype` before), on every sub-config."""
    for node in [config] + [getattr(config, k) for k in ("text_config", "vision_config") if hasattr(config, k)]:
        for attr in ("dtype", "torch_dtype"):
            try:
                setattr(node, attr, dtype)
            except (AttributeError, TypeError):
                pass


def write_tokenizer(out: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab=vocab.vocabulary(), unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")
    eos = vocab.SPECIAL[0]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="[UNK]",
        eos_token=eos,
        pad_token=eos,
        additional_special_tokens=[t for t in vocab.SPECIAL[1:] if t != "[UNK]"],
    )
    tokenizer.chat_template = vocab.CHAT_TEMPLATE
    tokenizer.save_pretrained(str(out))
    return tokenizer


def write_processor(out: Path, tokenizer: Any, spec: dict[str, Any]) -> str:
    """The model type's processor from transformers' registry (image and video processors at the plan's geometry)
    saved beside the model."""
    import transformers
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES
    from transformers.models.auto.video_processing_auto import VIDEO_PROCESSOR_MAPPING_NAMES

    model_type = spec["model_type"]
    processor_cls = getattr(transformers, PROCESSOR_MAPPING_NAMES[model_type])
    geometry = dict(spec.get("geometry") or {})
    parts: dict[str, Any] = {"tokenizer": tokenizer}
    import importlib.util

    backends: tuple[str, ...] = ("pil", "slow")
    if importlib.util.find_spec("torchvision") is not None:
        backends = ("torchvision", "fast", *backends)
    for attr, mapping in (
        ("image_processor", IMAGE_PROCESSOR_MAPPING_NAMES),
        ("video_processor", VIDEO_PROCESSOR_MAPPING_NAMES),
    ):
        names = mapping.get(model_type)
        if isinstance(names, dict):
            name = next((names[b] for b in backends if names.get(b)), None)
        elif isinstance(names, (tuple, list)):
            name = next((n for n in names if n), None)
        else:
            name = names
        if not name:
            continue  # e.g. no video processor without torchvision: the recipe's images do not need one
        cls = getattr(transformers, name)
        shape = {k: v for k, v in geometry.items() if k in ("patch_size", "merge_size", "temporal_patch_size") and v}
        part = cls(**shape)
        size = dict(getattr(part, "size", None) or {})
        # the pixel bounds: the recipe's own where it sets them, else the processor class's defaults
        if geometry.get("min_pixels"):
            size["shortest_edge"] = int(geometry["min_pixels"])
        if geometry.get("max_pixels"):
            size["longest_edge"] = int(geometry["max_pixels"])
        if size:
            part.size = size
            for attr_name, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
                if hasattr(part, attr_name) and edge in size:
                    setattr(part, attr_name, size[edge])
        parts[attr] = part
    processor = processor_cls(**parts, chat_template=vocab.CHAT_TEMPLATE)
    processor.save_pretrained(str(out))
    return type(processor).__name__


# -- synthetic rows --------------------------------------------------------


def write_rows(spec: dict[str, Any]) -> dict[str, Any]:
    """rows.jsonl (and images/*.png) of synthetic samples; every sample's token count is drawn so the
    recipe's packer sees lengths spread over its max_seq_len. Returns facts for the record."""
    out = Path(spec["dir"])
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(int(spec.get("seed", 0)))
    lo, hi = int(spec["min_tokens"]), int(spec["max_tokens"])
    text_fields = list(spec.get("text_fields") or ["text"])
    images = [tuple(s) for s in spec.get("image_sizes") or []]  # (width, height) in pixels
    image_files = _write_images(out / "images", images, rng) if images else []
    rows = []
    lengths = []
    image_counts = []
    for i in range(int(spec["count"])):
        n = rng.randint(lo, hi)
        words = " ".join(f"w{rng.randrange(vocab.WORDS)}" for _ in range(n))
        half = " ".join(words.split()[: max(1, n // 3)])
        rest = " ".join(words.split()[max(1, n // 3) :]) or "w0"
        row: dict[str, Any] = {field: words for field in text_fields}
        k = rng.choice((0, 1, 1, 2)) if image_files else 0
        chosen = [image_files[(i + j) % len(image_files)] for j in range(k)]
        row["messages"] = [
            {"role": "user", "content": "<image>" * k + half},
            {"role": "assistant", "content": rest},
        ]
        row["images"] = [path for path, _ in chosen]
        row["img_size"] = [[w, h] for _, (w, h) in chosen]
        rows.append(row)
        lengths.append(n)
        image_counts.append(k)
    path = out / "rows.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return {
        "rows": len(rows),
        "path": str(path),
        "words": [min(lengths), max(lengths)],
        "images_per_row": sorted(set(image_counts)),
        "image_sizes": [f"{w}x{h}" for w, h in images],
    }


def _write_images(folder: Path, sizes: list[tuple[int, int]], rng: random.Random) -> list[tuple[str, tuple[int, int]]]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, (w, h) in enumerate(sizes):
        image = Image.new("RGB", (w, h))
        image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(w * h)])
        path = folder / f"image-{i}-{w}x{h}.png"
        image.save(path)
        out.append((str(path), (w, h)))
    return out


def read_rows(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
