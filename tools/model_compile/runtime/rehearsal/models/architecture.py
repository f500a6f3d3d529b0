"""The architecture of a model whose config is not on this machine: the config class the recipe's own load call
resolves, at that class's default structure. No table of families: transformers' registry in this interpreter
and the repository's vendored config classes are the only lists.

For `Cls.from_pretrained(name, **kwargs)` (the recipe's call, seen by the hooks):

1. the model types `name` names, read against transformers' registry (`CONFIG_MAPPING_NAMES`: every model type
   this transformers knows); where it names none, what the recipe says of the same model (the static plan's
   hints: the recipe's other stages, its README, its own code), the first place that names one deciding;
2. the class the call builds: a concrete model class builds its own `config_class` (a name that says another
   is said and the call's taken); an `AutoModel*` class builds the named type when its mapping has it;
3. remote code: a call with `trust_remote_code=True` in a repository that vendors config classes
   (`configuration_*.py`, beside its model code) builds the vendored class its name or the recipe names, or
   the only one there; also when the name names a type the Auto class cannot build (said, the call's taken).
   The stand-in then holds the vendored code files and an `auto_map` for the call's Auto class;
4. the config is that class's defaults (its structure), each stack at `UNKNOWN_DEPTH` layers (the depth is not
   known: the policy sets it above the recompile limit, where a guard that differs per layer shows), said so.

Nothing decides: `ArchitectureUnknown` (a stand-in's config is missing), naming `--model-config NAME=PATH`.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.models import names, shrink
from model_compile.runtime.rehearsal.models.state import ModelConfigMissing

RECOMPILE_LIMIT = shrink.RECOMPILE_LIMIT
UNKNOWN_DEPTH = shrink.UNKNOWN_DEPTH


class ArchitectureUnknown(ModelConfigMissing):
    """No config class the recipe's call can build is named anywhere: the stand-in's config is missing."""

    fault = "stand-in"


def registry() -> dict[str, str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return dict(CONFIG_MAPPING_NAMES)


def _places(name: str, hints: list[dict[str, str]]) -> list[tuple[str, list[str]]]:
    """(where, texts) in the order they decide: the name itself, then each of the recipe's places."""
    out: list[tuple[str, list[str]]] = [(f"its name {name!r}", [name])]
    by_place: dict[str, list[dict[str, str]]] = {}
    for hint in hints:
        by_place.setdefault(hint.get("place", ""), []).append(hint)
    for place, seen in by_place.items():
        out.append((place, [h.get("text", "") for h in seen]))
    return out


def _named(
    name: str, hints: list[dict[str, str]], types: dict[str, Any], vendored_types: dict[str, Any] | None = None
) -> tuple[list[str], list[str], str]:
    """(registry types, vendored types, where): the first place that names any, the name first. A vendored
    type is matched only where the call trusts remote code (`vendored_types` given)."""
    by_place: dict[str, list[dict[str, str]]] = {}
    for hint in hints:
        by_place.setdefault(hint.get("place", ""), []).append(hint)
    for place, texts in _places(name, hints):
        found_r: list[str] = []
        found_v: list[str] = []
        wheres: list[str] = []
        for i, text in enumerate(texts):
            r = names.types_named(text, types)
            v = names.types_named(text, vendored_types or {})
            if r or v:
                found_r += r
                found_v += v
                if place in by_place:
                    wheres.append(by_place[place][i].get("where", ""))
        if found_r or found_v:
            where = place if place.startswith("its name") else f"{place} ({'; '.join(dict.fromkeys(wheres[:2]))})"
            return list(dict.fromkeys(found_r)), list(dict.fromkeys(found_v)), where
    return [], [], ""


def _accepts(cls: Any, model_type: str) -> bool | None:
    """Whether the call's class builds `model_type`: an Auto class by its mapping; None for a non-Auto class."""
    if not cls.__name__.startswith("Auto"):
        return None
    if cls.__name__ == "AutoConfig":
        return True
    mapping = getattr(getattr(cls, "_model_mapping", None), "_model_mapping", None)
    return isinstance(mapping, dict) and model_type in mapping


# -- vendored config classes (remote code) ------------------------------------------------------------------


def vendored(spec: dict[str, Any]) -> list[dict[str, str]]:
    """{"file", "class", "model_type"} of each top-level config class in the repository's vendored
    `configuration_*.py` (read with ast: a class assigning `model_type`, not a sub-config of another: no
    `base_config_key`, not a `sub_configs` value)."""
    out: list[dict[str, str]] = []
    for file in spec.get("vendored_configs") or []:
        try:
            tree = ast.parse(Path(file).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        subs: set[str] = set()
        found: list[dict[str, str]] = []
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields: dict[str, ast.expr] = {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            fields[target.id] = stmt.value
            sub_configs = fields.get("sub_configs")
            if isinstance(sub_configs, ast.Dict):
                subs |= {ast.unparse(v) for v in sub_configs.values}
            model_type = fields.get("model_type")
            if (
                isinstance(model_type, ast.Constant)
                and isinstance(model_type.value, str)
                and "base_config_key" not in fields
            ):
                found.append({"file": str(file), "class": node.name, "model_type": model_type.value})
        out += [f for f in found if f["class"] not in subs]
    return out


def _remote(name: str, hints: list[dict[str, str]], spec: dict[str, Any]) -> tuple[dict[str, str] | None, str]:
    configs = vendored(spec)
    if not configs:
        return None, "the repository vendors no configuration_*.py"
    types = {c["model_type"]: c["class"] for c in configs}
    _, named, where = _named(name, hints, {}, types)
    if named:
        chosen = next(c for c in configs if c["model_type"] == named[0])
        return chosen, f"{where} names its vendored {chosen['class']} (model_type {chosen['model_type']!r})"
    recipe = str(Path(spec.get("recipe_root") or "/nonexistent").resolve())
    own = [c for c in configs if str(Path(c["file"]).resolve()).startswith(recipe + os.sep)]
    if len({c["model_type"] for c in own}) == 1:  # one beside the recipe's own code (another recipe's: named only)
        return own[0], (
            f"the only config class the recipe vendors, {own[0]['class']} (model_type {own[0]['model_type']!r}, "
            f"{_rel(own[0]['file'], spec)}); neither the name nor the recipe names it"
        )
    return None, (
        "neither the name nor the recipe names one of the config classes the repository vendors ("
        + ", ".join(f"{c['class']} ({c['model_type']}, {_rel(c['file'], spec)})" for c in configs[:4])
        + ")"
    )


def _rel(path: str, spec: dict[str, Any]) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(spec.get("repo_root", "/")).resolve()))
    except ValueError:
        return path


def _dynamic(ref: str, folder: Path) -> Any:
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    return get_class_from_dynamic_module(ref, str(folder))


def _model_class(cls: Any, config_cls: Any, folder: Path) -> tuple[str, str]:
    """("module.Class", why) of the vendored model class the call's Auto class builds from `config_cls`: a
    `PreTrainedModel` of the vendored modeling files whose `config_class` is it; among several, the one whose name
    ends as the Auto class's own classes do, then the generating one for a generating Auto class, then the
    outermost (not built inside another)."""
    import transformers

    candidates: list[tuple[str, Any]] = []
    for path in sorted(folder.glob("modeling_*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        first = next((n.name for n in tree.body if isinstance(n, ast.ClassDef)), None)
        if first is None:
            continue
        module = sys.modules[_dynamic(f"{path.stem}.{first}", folder).__module__]
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and issubclass(value, transformers.PreTrainedModel)
                and getattr(getattr(value, "config_class", None), "__name__", None) == config_cls.__name__
            ):
                candidates.append((f"{path.stem}.{attr}", value))
    if not candidates:
        raise ArchitectureUnknown(
            f"the vendored {config_cls.__name__} has no model class in the vendored modeling_*.py files of "
            f"{folder} whose config_class it is"
        )
    mapping = getattr(getattr(cls, "_model_mapping", None), "_model_mapping", None) or {}
    suffixes = {_suffix(n) for n in mapping.values() if isinstance(n, str)}
    generating = _generates(mapping)

    def score(item: tuple[str, Any]) -> tuple[int, int, int]:
        _, model = item
        others = [m for _, m in candidates if m is not model]
        inner = any(_builds(other, model) for other in others)
        gen = issubclass(model, transformers.GenerationMixin) if generating is not None else False
        return (int(_suffix(model.__name__) in suffixes), int(gen == bool(generating)), int(not inner))

    ranked = sorted(candidates, key=score, reverse=True)
    ref, model = ranked[0]
    why = f"{model.__name__}, the vendored model class of {config_cls.__name__}"
    if len(candidates) > 1:
        why += f" that {cls.__name__} builds (of {', '.join(m.__name__ for _, m in candidates)})"
    return ref, why


def _suffix(class_name: str) -> str:
    for marker in ("For", "LMHead", "Model"):
        at = class_name.find(marker)
        if at > 0:
            return class_name[at:]
    return class_name


def _generates(mapping: dict[str, Any]) -> bool | None:
    import transformers

    for class_name in list(mapping.values())[:3]:
        model = getattr(transformers, class_name, None) if isinstance(class_name, str) else None
        if isinstance(model, type):
            return issubclass(model, transformers.GenerationMixin)
    return None


def _builds(outer: Any, inner: Any) -> bool:
    try:
        return f"{inner.__name__}(" in inspect.getsource(outer.__init__)
    except (OSError, TypeError):
        return False


# -- resolve ------------------------------------------------------------------------------------------------


def _defaults(config_cls: Any) -> tuple[dict[str, Any], list[str]]:
    """The class's defaults at the unknown-depth policy, rebuilt through the class (its derived fields follow)."""
    data, said = shrink.at_depth(config_cls().to_dict(), UNKNOWN_DEPTH)
    data.pop("transformers_version", None)
    try:
        rebuilt = config_cls(**{k: v for k, v in data.items() if k != "model_type"}).to_dict()
        rebuilt.pop("transformers_version", None)
        data = rebuilt
    except Exception:  # noqa: BLE001, S110 - the dict as cut is the config (its class said nothing of it)
        pass
    return data, said


def resolve(cls: Any, name: str, kwargs: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """{"config", "source", "code_dir", "depth_unknown", "notes"} for a stand-in of `name` as `cls` loads it
    (`code_dir`: the vendored folder whose files the stand-in holds, for remote code)."""
    repo = spec.get("repo_root")
    hints = names.lookup(spec.get("model_hints") or {}, name, repo) or []
    remote_ok = bool(kwargs.get("trust_remote_code"))
    vendored_types = {c["model_type"]: c for c in vendored(spec)} if remote_ok else None
    named, named_vendored, where = _named(name, hints, registry(), vendored_types)
    notes: list[str] = []
    if named_vendored and vendored_types is not None:  # the call trusts remote code, the repository vendors it
        chosen = vendored_types[named_vendored[0]]
        why = f"{where} names its vendored {chosen['class']} (model_type {named_vendored[0]!r})"
        return _remote_config(cls, chosen, why, notes, spec)
    if len(named) > 1:
        notes.append(f"{where} names {', '.join(named)}: the first, {named[0]}, is taken")
    model_type = named[0] if named else None
    own = getattr(cls, "config_class", None) if not cls.__name__.startswith("Auto") else None
    if own is not None and getattr(own, "model_type", None):
        if model_type and model_type != own.model_type:
            notes.append(
                f"{where} names {model_type}, but the recipe's call {cls.__name__}.from_pretrained builds "
                f"{own.__name__} ({own.model_type}): the call's is taken"
            )
        return _registry_config(own, f"{own.__name__}, the config class of the recipe's call {cls.__name__}", notes)
    accepted = model_type is not None and _accepts(cls, model_type) is not False
    if accepted and model_type is not None:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        config_cls = CONFIG_MAPPING[model_type]
        return _registry_config(config_cls, f"{config_cls.__name__} ({model_type}), which {where} names", notes)
    if model_type is not None:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

        disagree = (
            f"{where} names {model_type} ({CONFIG_MAPPING_NAMES.get(model_type)}), which the recipe's call "
            f"{cls.__name__}.from_pretrained cannot build"
        )
        if not remote_ok:
            raise ArchitectureUnknown(
                f"{disagree}, and the call does not trust remote code: the real checkpoint's config must say another "
                f"model type; supply it with --model-config {name}=PATH"
            )
        notes.append(f"{disagree}: the call's (trust_remote_code=True) is taken, the repository's vendored code")
    if not remote_ok:
        raise ArchitectureUnknown(
            f"no architecture for {name!r}: neither its name nor the recipe (its other stages, README, code) names a "
            f"model type transformers {_version()} knows; supply its config.json with --model-config {name}=PATH"
        )
    remote, why = _remote(name, hints, spec)
    if remote is None:
        raise ArchitectureUnknown(
            f"no architecture for {name!r}: the recipe's call trusts remote code but {why}; supply its config.json "
            f"(and code files) with --model-config {name}=PATH"
        )
    return _remote_config(cls, remote, why, notes, spec)


def _version() -> str:
    import transformers

    return str(transformers.__version__)


def _registry_config(config_cls: Any, why: str, notes: list[str]) -> dict[str, Any]:
    data, said = _defaults(config_cls)
    return {
        "config": data,
        "source": f"{why}, at its default structure; depth unknown: {UNKNOWN_DEPTH} layers a stack (the policy "
        f"for an unknown depth: above the recompile limit, {RECOMPILE_LIMIT})",
        "code_dir": None,
        "depth_unknown": True,
        "depth_set": said,
        "notes": notes,
    }


def _remote_config(
    cls: Any, chosen: dict[str, str], why: str, notes: list[str], spec: dict[str, Any]
) -> dict[str, Any]:
    folder = Path(chosen["file"]).parent  # the vendored files are read where they are (copied into the stand-in)
    module = Path(chosen["file"]).stem
    config_cls = _dynamic(f"{module}.{chosen['class']}", folder)
    data, said = _defaults(config_cls)
    auto_map = {"AutoConfig": f"{module}.{chosen['class']}"}
    if cls.__name__.startswith("AutoModel"):
        ref, model_why = _model_class(cls, config_cls, folder)
        auto_map[cls.__name__] = ref
        data["architectures"] = [ref.rsplit(".", 1)[1]]
        why += f"; {model_why}"
    data["auto_map"] = auto_map
    data["model_type"] = chosen["model_type"]
    return {
        "config": data,
        "source": f"the vendored {chosen['class']} ({_rel(chosen['file'], spec)}; remote code, the recipe's call "
        f"trusts it): {why}, at its default structure; depth unknown: {UNKNOWN_DEPTH} layers a stack (the policy "
        f"for an unknown depth)",
        "code_dir": str(folder),
        "depth_unknown": True,
        "depth_set": said,
        "notes": notes,
    }


def model_call(spec: dict[str, Any], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(class, kwargs) a config's, tokenizer's or processor's load of a name resolves the model with: the recipe's
    own model load as the plan read it (the first whose class this transformers has; a processor is often loaded
    first), else AutoConfig with the call's own kwargs."""
    import transformers

    for call in spec.get("model_calls") or []:
        cls = getattr(transformers, str(call.get("class")), None)
        if isinstance(cls, type):
            return cls, {**kwargs, "trust_remote_code": bool(call.get("trust_remote_code"))}
    return transformers.AutoConfig, kwargs


def add_model_class(cls: Any, folder: Path) -> str | None:
    """A stand-in of vendored code made for another call (a processor's, AutoConfig's) gains the model class
    `cls` builds in its `auto_map`; the note says which (None when it had it, or is no remote code)."""
    import json

    path = folder / "config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    auto_map = data.get("auto_map")
    if not isinstance(auto_map, dict) or cls.__name__ in auto_map or "AutoConfig" not in auto_map:
        return None
    config_cls = _dynamic(str(auto_map["AutoConfig"]), folder)
    ref, why = _model_class(cls, config_cls, folder)
    auto_map[cls.__name__] = ref
    data.setdefault("architectures", [ref.rsplit(".", 1)[1]])
    tmp = folder / f"config.json.{os.getpid()}"
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, path)  # ranks racing here write the same bytes
    return why
