"""Stand-in checkpoints: what a `from_pretrained(name)` reads in the rehearsal when `name` is not one of its own.

The real config of `name` comes from, in order: `--model-config NAME=PATH` (the spec's `model_configs`), a
config object the recipe passed with the call, a local folder's `config.json`, the local Hugging Face cache
(read from disk, never fetched). The stand-in is written under the rehearsal's folder (`models/<name>`), once
for every twin and rank (written aside, then renamed: ranks racing to write it write the same bytes): the
config with its widths shrunk, the rehearsal's word-level tokenizer, its model type's processor for a vision
model, and, when a model is loaded from it, random weights from a fixed seed (the recipe's random state is
left as it was). A remote-code model keeps its `auto_map` and the code files of its local folder; a supplied
config whose code is not here is said so.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.models import names, shrink
from model_compile.runtime.rehearsal.models.names import hub_cache_dir
from model_compile.runtime.rehearsal.models.state import (
    STATE,
    ModelConfigMissing,
    StandInRefused,
    TinyModelRefused,
    suspended,
)
from model_compile.runtime.rehearsal.record import short_error

SEED = 0
KEPT = ("source", "shrunk", "model_type", "depth_unknown", "depth_set", "notes")  # what a stand-in's record says
PROCESSOR_FILES = names.PROCESSOR_FILES


def _local(name: str, repo: str | None) -> Path:
    path = Path(os.path.expanduser(name))
    return path if path.is_absolute() or not repo else Path(repo) / path


def on_machine(name: str, repo: str | None) -> bool:
    """A local file or folder, or a hub id with a folder in the local cache."""
    if _local(name, repo).exists():
        return True
    return (hub_cache_dir() / ("models--" + name.replace("/", "--"))).is_dir()


def real_config(name: str, spec: dict[str, Any], passed: Any = None) -> dict[str, Any] | None:
    """{"config", "source", "code_dir"} of `name`'s real config, or None when none is on this machine."""
    repo = spec.get("repo_root")
    supplied = names.lookup(spec.get("model_configs") or {}, name, repo)
    if isinstance(supplied, dict):
        folder = str(Path(supplied["file"]).parent)  # its code and processor files are read from beside it
        return {"config": supplied["config"], "source": f"--model-config {supplied['file']}", "code_dir": folder}
    if passed is not None and hasattr(passed, "to_dict"):
        return {"config": passed.to_dict(), "source": "the config the recipe passed with it", "code_dir": None}
    local = _local(name, repo)
    if (local / "config.json").is_file():
        data = _read(local / "config.json")
        if data is not None:
            return {"config": data, "source": f"{name}/config.json", "code_dir": str(local)}
    cached = names.hub_config(name)
    if cached is not None:
        data = _read(cached)
        if data is not None:
            return {"config": data, "source": f"{name}'s config.json in the Hugging Face cache", "code_dir": None}
    return None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _code_files(config: dict[str, Any], code_dir: str | None, name: str) -> list[Path]:
    """The remote-code files a config's `auto_map` needs: from the real folder, else from the repository's vendored
    code that holds them all (the recipe's `third_party/`, say); a config whose code is on neither is a model whose
    code is not on this machine."""
    files = names.code_modules(config)
    if not files:
        return []
    if any("--" in f for f in files):  # code in another hub repository: not read offline
        raise ModelConfigMissing(
            f"{name}: its config's code lives in another repository ({files[0]}), which is not on this machine"
        )
    folder = names.code_folder(files, [*([code_dir] if code_dir else []), *names.vendored_folders(STATE["spec"])])
    if folder is None:
        raise ModelConfigMissing(
            f"{name}: its config names remote code ({', '.join(files)}, model_type {config.get('model_type')!r}) "
            "that is not on this machine (not beside its config, not vendored in the repository); put the "
            "checkpoint folder's *.py files beside the config.json you supply"
        )
    return [p for p in folder.glob("*.py") if p.name != "__init__.py"]


def make(name: str, found: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The stand-in folder of `name` (made once): {"dir", "source", "shrunk"}."""
    base = Path(STATE["spec"]["out_dir"]) / "models" / names.slug(name)
    done = base / "stand-in.json"
    if done.is_file():
        made = json.loads(done.read_text(encoding="utf-8"))
        return {"dir": str(base), "name": name, **{k: made.get(k) for k in KEPT}}
    tmp = base.with_name(f"{base.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from model_compile.runtime.rehearsal.inputs import assets

    info: dict[str, Any] = {"name": name}
    if found is None:
        info.update(source="the rehearsal's word-level tokenizer (nothing else of it is on this machine)", shrunk=[])
    else:
        config, changed = shrink.shrink(found["config"], vocab_too=True)
        for path in _code_files(config, found.get("code_dir"), name):
            shutil.copy2(path, tmp / path.name)
        (tmp / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        info.update(source=found["source"], shrunk=changed, model_type=config.get("model_type"), real=found["config"])
        for key in ("depth_unknown", "depth_set", "notes"):
            if found.get(key):
                info[key] = found[key]
    with suspended():
        tokenizer = assets.write_tokenizer(tmp)
        vision = (found or {}).get("config", {}).get("vision_config")
        if isinstance(vision, dict) and found is not None:
            geometry = {
                "patch_size": vision.get("patch_size"),
                "merge_size": vision.get("spatial_merge_size"),
                "temporal_patch_size": vision.get("temporal_patch_size"),
            }
            try:
                assets.write_processor(
                    tmp, tokenizer, {"model_type": found["config"].get("model_type"), "geometry": geometry}
                )
            except Exception as exc:  # noqa: BLE001 - said in the record; a recipe that needs it fails there
                info["processor"] = f"not built ({type(exc).__name__}: {str(exc)[:120]})"
    folder = Path(found["code_dir"]) if found is not None and found.get("code_dir") else None
    for file in PROCESSOR_FILES:  # the real processor's settings, where they are beside the config
        if folder is not None and (folder / file).is_file() and not (tmp / file).exists():
            shutil.copy2(folder / file, tmp / file)
    (tmp / "stand-in.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    try:
        tmp.rename(base)
    except OSError:  # another rank made it first: the same bytes
        shutil.rmtree(tmp, ignore_errors=True)
    return {"dir": str(base), "name": name, **{k: info.get(k) for k in KEPT}}


def weights(made: dict[str, Any], cls: Any) -> None:
    """Random weights (a fixed seed) in the stand-in folder, for a model class to load; built once."""
    import torch

    folder = Path(made["dir"])
    if any(folder.glob("*.safetensors")) or not (folder / "config.json").is_file():
        # made by another rank or twin, which may have kept each head at its real size: say what it shrank
        try:
            made["shrunk"] = json.loads((folder / "stand-in.json").read_text(encoding="utf-8")).get("shrunk")
        except (OSError, ValueError):
            pass
        return

    tmp = folder.with_name(f"{folder.name}.weights-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    before = torch.get_default_dtype()
    with suspended(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        torch.set_default_dtype(torch.float32)
        try:
            try:
                config = _config_of(cls, folder)
            except (ValueError, KeyError, OSError) as exc:
                raise StandInRefused(
                    f"{made.get('name') or folder.name}: the recipe's call {cls.__name__}.from_pretrained cannot build "
                    f"the stand-in's config (model_type {made.get('model_type')!r}, {made.get('source')}): "
                    f"{short_error(exc)}; supply the real config with --model-config {made.get('name')}=PATH"
                ) from exc
            if not _builds(cls, config):
                raise StandInRefused(
                    f"{made.get('name') or folder.name}: the recipe's call {cls.__name__}.from_pretrained cannot build "
                    f"the stand-in's {type(config).__name__} ({made.get('source')}); supply the real config with "
                    f"--model-config {made.get('name')}=PATH"
                )
            try:
                model = _build(cls, config)
            except ModelConfigMissing:
                raise
            except Exception as first:  # noqa: BLE001 - the model's own check refused the tiny widths: once more
                config = _keep_heads(folder, made, cls, first)
                try:
                    model = _build(cls, config)
                except Exception as second:  # noqa: BLE001 - the reason says both
                    raise TinyModelRefused(
                        f"{made.get('name') or folder.name}: built with the rehearsal's tiny widths it raised "
                        f"{short_error(first)}; with each head at its real size, {short_error(second)} (the real widths were not "
                        "tried: they may not fit)"
                    ) from second
            from model_compile.runtime.rehearsal.inputs.assets import save_model

            tmp.mkdir(parents=True, exist_ok=True)
            save_model(model, tmp)
        finally:
            torch.set_default_dtype(before)
    del model
    for path in tmp.glob("*.safetensors*"):
        os.replace(path, folder / path.name)
    shutil.rmtree(tmp, ignore_errors=True)


def widened(made: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The reference twin's copy of a stand-in: the same weights in `dtype` (float32 for a recipe that trains in
    bf16/fp16, float64 for an fp32 one), its config saying so, as the rehearsal's own checkpoint has its
    reference copy; made once (written aside, then renamed)."""
    import torch
    from safetensors.torch import load_file, save_file

    src = Path(made["dir"])
    dst = src.with_name(f"{src.name}-{dtype}")
    if not (dst / "stand-in.json").is_file():
        tmp = dst.with_name(f"{dst.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("*.safetensors"))
        wide = getattr(torch, dtype)
        for path in src.glob("*.safetensors"):
            tensors = {k: v.to(wide) if v.is_floating_point() else v for k, v in load_file(str(path)).items()}
            save_file(tensors, str(tmp / path.name), metadata={"format": "pt"})
        config = json.loads((tmp / "config.json").read_text(encoding="utf-8"))
        for node in [config] + [v for k, v in config.items() if isinstance(v, dict) and k.endswith("config")]:
            for key in ("torch_dtype", "dtype"):
                if key in node or node is config:
                    node[key] = dtype
        (tmp / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        try:
            tmp.rename(dst)
        except OSError:  # another rank made it first: the same bytes
            shutil.rmtree(tmp, ignore_errors=True)
    return {**made, "dir": str(dst)}


def _config_of(cls: Any, folder: Path) -> Any:
    """The stand-in's config as `cls` reads it: a concrete class (recipe-local too) knows its config class."""
    import transformers

    own = getattr(cls, "config_class", None)
    if own is not None and not cls.__name__.startswith("Auto"):
        return own.from_pretrained(str(folder))
    return transformers.AutoConfig.from_pretrained(str(folder), trust_remote_code=True)


def _builds(cls: Any, config: Any) -> bool:
    """Whether the call's class builds this config: an Auto class by its mapping or the config's `auto_map`."""
    if not cls.__name__.startswith("AutoModel"):
        return True
    auto_map = getattr(config, "auto_map", None) or {}
    if cls.__name__ in auto_map:
        return True
    try:
        return type(config) in cls._model_mapping
    except Exception:  # noqa: BLE001 - a mapping that cannot say: the build itself will
        return True


def _build(cls: Any, config: Any) -> Any:
    if cls.__name__.startswith("Auto") and hasattr(cls, "from_config"):
        return cls.from_config(config, trust_remote_code=True)
    return cls._from_config(config)


def _keep_heads(folder: Path, made: dict[str, Any], cls: Any, first: Exception) -> Any:
    """The stand-in's config rewritten with each head at its real size (`shrink(keep_head=True)`), after the
    model's code refused the tiny widths; a model that refuses those too is not run, saying both."""

    info = json.loads((folder / "stand-in.json").read_text(encoding="utf-8"))
    name = made.get("name") or folder.name
    first_said = short_error(first)
    if not isinstance(info.get("real"), dict):
        raise TinyModelRefused(f"{name}: its code refuses the rehearsal's tiny widths ({first_said})") from first
    config, changed = shrink.shrink(info["real"], vocab_too=True, keep_head=True)
    tmp = folder / f"config.json.{os.getpid()}"
    tmp.write_text(json.dumps(config, indent=2), encoding="utf-8")
    os.replace(tmp, folder / "config.json")  # ranks racing here write the same bytes
    info["shrunk"] = changed + [
        f"(each attention head kept at its real size: the tiny widths failed with {first_said})"
    ]
    tmp = folder / f"stand-in.json.{os.getpid()}"
    tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
    os.replace(tmp, folder / "stand-in.json")
    made["shrunk"] = info["shrunk"]
    STATE["stand_ins"][name] = made
    try:
        return _config_of(cls, folder)
    except Exception as exc:  # noqa: BLE001 - said as the reason
        raise TinyModelRefused(f"{name}: its code refuses the rehearsal's tiny widths ({first_said}); {exc}") from first
