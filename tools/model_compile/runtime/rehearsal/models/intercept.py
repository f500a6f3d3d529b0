"""Every model a recipe builds, whatever builds it, at tiny width and its real depth: the child's hooks.

Installed in each training child before the recipe's engine is imported (`install`), they see:

- every `from_pretrained` of a model, a config, a tokenizer or a processor (transformers' base classes and
  every `Auto*` class; a recipe-local or remote-code class inherits them), whatever path it names. The
  rehearsal's own checkpoints pass as they are. Any other name is answered from a stand-in checkpoint
  (`stand_in.py`): its real config (`--model-config NAME=PATH`, a local folder's `config.json`, the local
  Hugging Face cache; never fetched), widths shrunk, random weights from a fixed seed, the rehearsal's
  tokenizer (and its model type's processor for a vision model). Real weights are never read. A model or config
  whose config is on none of those raises `ModelConfigMissing`: the rehearsal is not run, and the reason
  names the path and the option that supplies it.
- every construction of a transformers model (`PreTrainedModel.__init__`: `Model(config)`, `from_config`,
  a second tower, an encoder, a teacher): its config is shrunk in place before a layer is built (idempotent:
  a config shrunk already, or a sub-config of one, changes nothing). The vocabulary follows the tokenizer: a
  config the recipe built itself keeps its vocabulary (its own tokenizer or data make the ids).
- every construction of a module class the repository defines (`nn.Module` subclasses in its files): a
  config object passed to it (a dataclass, a pydantic model, an OmegaConf node, a namespace) has its widths
  above 256 shrunk in place, heads with them (`shrink.shrink_fields`); the outermost one is recorded.

What was loaded, built and shrunk is kept in `STATE` for the record (`built.py` measures the modules).
"""

from __future__ import annotations

import functools
import os
import weakref
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.models import architecture, names, shrink, stand_in
from model_compile.runtime.rehearsal.models.configs import (
    apply_values,
    mark_shrunk,
    shrink_config,
    shrink_object,
    view_of,
)
from model_compile.runtime.rehearsal.models.state import (
    STATE,
    ModelConfigMissing,
    StandInRefused,
    TinyModelRefused,
    out_dir,
)
from model_compile.runtime.rehearsal.record import short_error


def _is_tool_path(name: str) -> bool:
    try:
        path = str(Path(os.path.expanduser(name)).resolve())
    except (OSError, RuntimeError, ValueError):
        return False
    root = out_dir()
    return path == root or path.startswith(root + os.sep)


def _kind(cls: Any) -> str:
    import transformers

    tokenizer = transformers.PreTrainedTokenizerBase
    if isinstance(cls, type):
        if issubclass(cls, transformers.PreTrainedModel) or cls.__name__.startswith("AutoModel"):
            return "model"
        if issubclass(cls, transformers.PretrainedConfig) or cls.__name__ == "AutoConfig":
            return "config"
        if issubclass(cls, tokenizer) or cls.__name__ == "AutoTokenizer":
            return "tokenizer"
    return "processor"


# -- hooks -------------------------------------------------------------------


def _record_built(model: Any, config: Any, changed: list[str]) -> None:
    name = str(getattr(config, "_name_or_path", "") or "")
    source = "a config the recipe built from its own values"
    if name:
        stand_in = next((info for info in STATE["stand_ins"].values() if info["dir"] == name), None)
        if stand_in is not None:
            source = f"{stand_in['name']} ({stand_in['source']})"
            changed = list(stand_in.get("shrunk") or []) + changed
        else:
            source = f"the rehearsal's checkpoint {name}" if _is_tool_path(name) else name
    STATE["built"].append(
        {
            "ref": weakref.ref(model),
            "class": type(model).__name__,
            "config": type(config).__name__,
            "shrunk": changed,
            "source": source,
        }
    )


def _model_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        if STATE["suspended"]:
            return original(self, config, *args, **kwargs)
        if _is_tool_path(str(getattr(config, "_name_or_path", "") or "")):
            mark_shrunk(config)  # read from the rehearsal's own checkpoint or a stand-in: its widths are chosen
        real = view_of(config) if config is not None and hasattr(config, "to_dict") else None
        changed = shrink_config(config, vocab_too=False)
        try:
            original(self, config, *args, **kwargs)
        except Exception as first:
            if not changed or real is None:
                raise
            # the model's own check refused the tiny widths: once more, each head at its real size
            relaxed, changed = shrink.shrink(real, vocab_too=False, keep_head=True)
            apply_values(config, view_of(config) or {}, relaxed)
            try:
                original(self, config, *args, **kwargs)
            except Exception as second:
                raise TinyModelRefused(
                    f"{type(self).__name__}: built with the rehearsal's tiny widths it raised {short_error(first)}; with "
                    f"each head at its real size, {short_error(second)} (the real widths were not tried: they may not fit)"
                ) from second
            changed.append(f"(each attention head kept at its real size: the tiny widths raised {short_error(first)})")
        _record_built(self, config, changed)

    __init__._model_compile_hook = True  # type: ignore[attr-defined]
    return __init__


def _from_pretrained(func: Any) -> Any:
    @functools.wraps(func)
    def from_pretrained(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if STATE["suspended"]:
            return func(cls, *args, **kwargs)
        key = "pretrained_model_name_or_path"
        name = args[0] if args else kwargs.get(key)
        if isinstance(name, os.PathLike):
            name = os.fspath(name)
        if not isinstance(name, str) or not name:
            return func(cls, *args, **kwargs)
        if _is_tool_path(name):
            if not STATE["depth_load"]:
                STATE["loads"].append({"class": cls.__name__, "kind": _kind(cls), "name": name, "to": name})
            if _kind(cls) == "processor" and os.path.isdir(name):
                _has_processor(cls, name, name)
            STATE["depth_load"] += 1
            try:
                return func(cls, *args, **kwargs)
            except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as exc:
                if isinstance(exc, ModuleNotFoundError) or STATE["depth_load"] > 1:
                    raise  # a package this environment lacks; an inner load: said by the outer one
                raise _refused(cls, name, name, exc) from exc
            finally:
                STATE["depth_load"] -= 1
        to = redirect(cls, name, kwargs)
        if to is None:
            return func(cls, *args, **kwargs)
        if _kind(cls) == "processor":
            _has_processor(cls, name, to)
        if args:
            args = (to, *args[1:])
        else:
            kwargs[key] = to
        STATE["depth_load"] += 1
        try:
            return func(cls, *args, **kwargs)
        except OSError as exc:
            if _kind(cls) != "processor":
                raise _refused(cls, name, to, exc) from exc
            raise ModelConfigMissing(  # a processor whose settings are not beside the config the rehearsal read
                f"{cls.__name__}.from_pretrained({name!r}): the rehearsal's stand-in of it has no processor settings "
                "(preprocessor_config.json or processor_config.json beside the config it read); put the real ones "
                f"beside the config.json you supply with --model-config {name}=PATH"
            ) from exc
        except (ValueError, KeyError, TypeError, AttributeError, ImportError) as exc:
            if isinstance(exc, ModuleNotFoundError):
                raise  # a package this environment lacks: said as the environment's
            raise _refused(cls, name, to, exc) from exc
        finally:
            STATE["depth_load"] -= 1

    from_pretrained._model_compile_hook = True  # type: ignore[attr-defined]
    return from_pretrained


def _has_processor(cls: Any, name: str, to: str) -> None:
    """A multimodal model's stand-in holds a processor (its model type's, from transformers' registry, or the
    real settings beside a supplied config); one without any would make the recipe's processor call quietly load
    a bare tokenizer instead, and the recipe fail on it: the stand-in's processor is missing, said so."""
    import json

    folder = Path(to)
    if any((folder / f).is_file() for f in stand_in.PROCESSOR_FILES):
        return
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    multimodal = [k for k, v in config.items() if k.endswith("_config") and k != "text_config" and isinstance(v, dict)]
    if multimodal:
        raise ModelConfigMissing(
            f"{cls.__name__}.from_pretrained({name!r}): the rehearsal's stand-in of it (model_type "
            f"{config.get('model_type')!r}, with {', '.join(multimodal)}) has no processor: transformers' registry has "
            "none for that model type and no processor settings are beside a config of it here; put the real "
            f"preprocessor_config.json / processor_config.json beside the config.json you supply with --model-config "
            f"{name}=PATH"
        )


def _refused(cls: Any, name: str, to: str, exc: BaseException) -> StandInRefused:
    """The recipe's call raised on the stand-in it was handed (not on anything of the recipe's own)."""
    made = names.lookup(STATE["stand_ins"], name, STATE["spec"].get("repo_root")) or {}
    source = made.get("source") or ("the rehearsal's tiny checkpoint" if to else "a stand-in")
    return StandInRefused(
        f"{cls.__name__}.from_pretrained({name!r}) raised on the rehearsal's stand-in of it ({source}): "
        f"{short_error(exc)}; the stand-in does not fit what the recipe's call accepts, so this is not the recipe's "
        f"failure: supply the real config with --model-config {name}=PATH"
    )


def _missing(cls: Any, name: str) -> ModelConfigMissing:
    return ModelConfigMissing(
        f"{cls.__name__}.from_pretrained({name!r}): no config.json of it on this machine (not a local folder, not "
        f"in the Hugging Face cache); supply one with --model-config {name}=PATH"
    )


def redirect(cls: Any, name: str, kwargs: dict[str, Any]) -> str | None:
    """The folder a `from_pretrained(name)` reads instead (a stand-in), or None to read `name` itself."""
    kind = _kind(cls)
    spec = STATE["spec"]
    repo = spec.get("repo_root")
    alias = names.lookup(spec.get("aliases") or {}, name, repo)
    if alias:
        STATE["loads"].append({"class": cls.__name__, "kind": kind, "name": name, "to": alias, "source": "planned"})
        return str(alias)
    made = names.lookup(STATE["stand_ins"], name, repo)
    if made is None:
        passed = kwargs.get("config") if kind == "model" else None
        found = stand_in.real_config(name, spec, passed)
        if found is None and (kind in ("model", "config") or not stand_in.on_machine(name, repo)):
            # nothing of it here: the architecture the recipe's call resolves (a tokenizer's or processor's
            # call resolves the model its name names)
            call, call_kwargs = (cls, kwargs) if kind == "model" else architecture.model_call(spec, kwargs)
            found = architecture.resolve(call, name, call_kwargs, spec)
        elif found is None:
            return None  # a tokenizer or processor that is on this machine: the recipe's own
        made = stand_in.make(name, found, kind)
        STATE["stand_ins"][name] = made
    if kind in ("model", "config") and not os.path.isfile(os.path.join(made["dir"], "config.json")):
        raise _missing(cls, name)  # a stand-in made for its tokenizer alone: no config of it here
    if kind == "model":
        if made.get("depth_unknown") and cls.__name__.startswith("AutoModel"):
            added = architecture.add_model_class(cls, Path(made["dir"]))  # made for a processor's call first
            if added:
                made.setdefault("notes", []).append(f"{cls.__name__} builds {added}")
        stand_in.weights(made, cls)
        if STATE.get("wide") and not made["dir"].endswith(f"-{STATE['wide']}"):
            made = stand_in.widened(made, STATE["wide"])  # the reference twin computes wider
            STATE["stand_ins"][name] = made
    load = {"class": cls.__name__, "kind": kind, "name": name, "to": made["dir"], "source": made["source"]}
    if made.get("depth_unknown"):  # resolved at this call: its depth is the policy's, and what was said of it
        load.update(depth_unknown=True, depth_set=made.get("depth_set") or [], notes=made.get("notes") or [])
    STATE["loads"].append(load)
    return str(made["dir"])


def _repo_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        outer = STATE["depth"] == 0 and not STATE["suspended"]
        changed: list[str] = []
        if not STATE["suspended"]:  # every level: a config object of a nested module too (idempotent)
            for value in [*args, *kwargs.values()]:
                try:
                    done = shrink_object(value)
                except Exception as exc:  # noqa: BLE001 - a hook never fails the recipe's construction: said instead
                    done = [f"{type(value).__name__} not shrunk (the hook could not read it: {short_error(exc)})"]
                if done:
                    STATE["objects"].append({"object": type(value).__name__, "shrunk": done})
                changed += done
        STATE["depth"] += 1
        try:
            original(self, *args, **kwargs)
        finally:
            STATE["depth"] -= 1
        if outer:
            STATE["built"].append(
                {
                    "ref": weakref.ref(self),
                    "class": type(self).__name__,
                    "config": "",
                    "shrunk": changed,
                    "source": "the recipe's own module class",
                }
            )

    __init__._model_compile_hook = True  # type: ignore[attr-defined]
    return __init__


def _in_repo(cls: type) -> bool:
    import sys

    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None) or ""
    repo = str(Path(STATE["spec"].get("repo_root", "/nonexistent")).resolve())
    try:
        resolved = str(Path(path).resolve())
    except (OSError, RuntimeError):
        return False
    return bool(path) and resolved.startswith(repo + os.sep) and "site-packages" not in resolved


def wrap_repo_class(cls: type) -> None:
    import torch
    import transformers

    if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
        return
    if issubclass(cls, transformers.PreTrainedModel) or not _in_repo(cls):
        return
    init = cls.__dict__.get("__init__")
    if init is None or getattr(init, "_model_compile_hook", False):
        return
    setattr(cls, "__init__", _repo_init(init))  # noqa: B010 - the class's own __init__, wrapped


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    todo: list[type] = [cls]
    while todo:
        subs: list[type] = todo.pop().__subclasses__()
        out += subs
        todo += subs
    return out


def install(spec: dict[str, Any], wide: str | None = None) -> None:
    """Install every hook (once per process). `wide`: the reference twin's dtype, which its stand-ins' weights
    are read in (float32 for a recipe that trains in bf16/fp16, float64 for an fp32 one)."""
    if STATE["installed"]:
        return
    import torch
    import transformers

    STATE["spec"] = spec
    STATE["wide"] = wide
    STATE["installed"] = True
    model = transformers.PreTrainedModel
    model.__init__ = _model_init(model.__init__)  # type: ignore[method-assign]
    owners: list[Any] = [model, transformers.PretrainedConfig, transformers.PreTrainedTokenizerBase]
    for dotted in (
        "transformers.processing_utils.ProcessorMixin",
        "transformers.image_processing_base.ImageProcessingMixin",
        "transformers.feature_extraction_utils.FeatureExtractionMixin",
        "transformers.video_processing_utils.BaseVideoProcessor",
        "transformers.models.auto.auto_factory._BaseAutoModelClass",
    ):
        module, _, attr = dotted.rpartition(".")
        try:
            import importlib

            owners.append(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            continue
    for attr in dir(transformers):
        if attr.startswith("Auto"):
            try:
                owners.append(getattr(transformers, attr))
            except Exception:  # noqa: BLE001, S112 - a lazy name that does not import here is not used either
                continue
    owners += [sub for owner in list(owners) if isinstance(owner, type) for sub in _subclasses(owner)]
    for owner in owners:  # the bases, and every class already defined that overrides from_pretrained
        raw = owner.__dict__.get("from_pretrained") if isinstance(owner, type) else None
        if isinstance(raw, classmethod) and not getattr(raw.__func__, "_model_compile_hook", False):
            owner.from_pretrained = classmethod(_from_pretrained(raw.__func__))
    for cls in _subclasses(torch.nn.Module):
        wrap_repo_class(cls)
    previous = torch.nn.Module.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if previous is not None:
            previous.__get__(None, cls)(**kwargs)
        else:
            super(torch.nn.Module, cls).__init_subclass__(**kwargs)  # type: ignore[misc]
        try:
            wrap_repo_class(cls)
        except Exception:  # noqa: BLE001, S110 - a class the hook cannot wrap is built as the recipe wrote it
            pass

    torch.nn.Module.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
