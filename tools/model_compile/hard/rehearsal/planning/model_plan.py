"""The rehearsal's model, statically: the real architecture at its real depth, only its width shrunk.

Where the architecture comes from, in order: `--model-config` (a config.json), a local checkpoint folder with a
`config.json` at the stage's pretrained path, that hub id's `config.json` in the local Hugging Face cache (read
from disk, never fetched). Then the tiny checkpoint is written from it (widths shrunk, every depth and structure
field kept; a remote-code config keeps its `auto_map`, and its code files, from beside the config or vendored in
the repository, go beside the tiny checkpoint).

Where none is here, nothing is decided statically: the child resolves the architecture at the recipe's own load
call (`runtime/rehearsal/models/architecture.py`: the config class that call resolves, from transformers'
registry or the repository's vendored config classes, at its default structure, each stack at the policy's
unknown depth), with what the recipe says of the model (`hints.py`) to read against the registry. A recipe that
builds its model from its own size fields (no checkpoint) keeps those fields, only widths above `WIDE` shrunk.

Pure Python: no torch, nothing of the repository imported.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.models import names
from model_compile.runtime.rehearsal.models import shrink as shrinking

RECOMPILE_LIMIT = shrinking.RECOMPILE_LIMIT
UNKNOWN_DEPTH = shrinking.UNKNOWN_DEPTH
WIDE = shrinking.WIDE
BUILDER_WIDTH = shrinking.BUILDER_WIDTH
DEPTH_KEYS = shrinking.DEPTH_KEYS


class NotPlanned(Exception):
    """The rehearsal cannot run as asked; the message says why and what fixes it, `owner` whose it is (the recipe:
    its files, its wiring; a stand-in: the config it would be made from)."""

    def __init__(self, message: str, owner: str = "recipe", part: str = "") -> None:
        super().__init__(message)
        self.owner, self.part = owner, part


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
    code_files: list[str] = field(default_factory=list)  # a remote-code config's files, put beside the checkpoint
    resolved_at_call: bool = False  # no config here: the child resolves it at the recipe's load call

    @property
    def vision(self) -> bool:
        """The synthetic rows carry images: a config with a vision tower, or one resolved only at the recipe's call
        (after the rows are written: a text model's data path reads their text)."""
        return self.resolved_at_call or bool(self.config and isinstance(self.config.get("vision_config"), dict))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotPlanned(f"{path} is not a readable config.json: {exc}", "stand-in", "config") from exc
    if not isinstance(data, dict) or not data.get("model_type"):
        raise NotPlanned(f"{path} is not a model config.json (no model_type)", "stand-in", "config")
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
    A remote-code config keeps its `auto_map`: its code files go beside the tiny checkpoint (`code_files`)."""
    return shrinking.shrink(real, vocab_too=True)


def code_files(real: dict[str, Any], beside: Path | None, vendored: list[str]) -> list[str]:
    """The files a remote-code config's `auto_map` needs, from beside the config, else the repository's vendored
    code that holds them all; NotPlanned when neither does."""
    files = names.code_modules(real)
    if not files:
        return []
    if any("--" in f for f in files):
        raise NotPlanned(
            f"its config's code lives in another hub repository ({files[0]}), which is not read offline",
            "stand-in",
            "config",
        )
    folders: list[str | Path] = [*([beside] if beside is not None else [])]
    folders += list(dict.fromkeys(str(Path(v).parent) for v in vendored))
    folder = names.code_folder(files, folders)
    if folder is None:
        raise NotPlanned(
            f"its config names remote code ({', '.join(files)}, model_type {real.get('model_type')!r}) that is not on "
            "this machine, neither beside the config nor vendored in the repository: put the checkpoint folder's "
            "*.py files beside the config.json you supply"
            "stand-in",
            "config",
        )
    return [str(p) for p in sorted(folder.glob("*.py")) if p.name != "__init__.py"]


depth_of = shrinking.depth_of


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
    vendored: list[str] | None = None,
) -> ModelPlan:
    """The model the rehearsal builds. `builder_fields`: {dotted key: value} of the model section, for a
    recipe that builds from its own fields; `bounds`: the stage's image pixel bounds (min/max_pixels);
    `vendored`: the repository's vendored config modules (a remote-code config's files may be there)."""
    real, where = real_config(pretrained, repo_root, model_config)
    if real is not None:
        beside = model_config.parent if model_config is not None else None
        if beside is None and pretrained is not None:
            local = Path(pretrained) if os.path.isabs(pretrained) else repo_root / pretrained
            beside = local if (local / "config.json").is_file() else None
        files = code_files(real, beside, vendored or [])
        config, shrunk = shrink(real)
        depth = depth_of(config)
        return ModelPlan(
            source=f"{real.get('model_type')} from {where}, at its real depth"
            + (f" (remote code: {len(files)} code file(s) beside the tiny checkpoint)" if files else ""),
            config=config,
            model_type=str(real.get("model_type")),
            depth=depth,
            shrunk=shrunk,
            processor=_processor(config, bounds),
            code_files=files,
        )
    if pretrained is not None:
        return ModelPlan(
            source=(
                f"{where}: built from the config class the recipe's own load call resolves (transformers' registry "
                "for a model type its name or the recipe names, the repository's vendored config class for remote "
                f"code), at that class's default structure, depth unknown; --model-config {pretrained}=PATH to its "
                "real config.json rehearses the real model"
            ),
            depth_known=False,
            resolved_at_call=True,
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
