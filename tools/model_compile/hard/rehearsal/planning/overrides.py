"""A user's `--config-override K=V`: checked before anything runs, applied as the recipe's launcher applies them.

The launcher merges the stage YAML with an OmegaConf dotlist (`OmegaConf.merge(OmegaConf.load(stage),
OmegaConf.from_dotlist(overrides))`); the rehearsal's child does the same, with the user's overrides first and
the rehearsal's own (computed from the overridden config) after them. The static plan reads the overridden
config (`apply`).

An override for a key the config lacks is bad input (a typo would otherwise add a key nothing reads): the key
must be in the stage YAML, or a field of the recipe's pydantic schema (read statically, through the classes
its file defines). Where the schema's type at some point of the key is not one the file defines (a dict, an
imported class), the rest of the key cannot be checked statically and is let through. A width-named field
(`hidden_size`, `num_attention_heads`, ...) must be a positive integer. A `--model-config [NAME=]PATH` is read
and checked here too (a readable JSON object, its widths positive). Pure Python: nothing imported.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml

from model_compile.errors import InputError
from model_compile.parse.python import PyModule
from model_compile.parse.schema import _aliases, _classes, _field_type, _fields
from model_compile.runtime.rehearsal.models.shrink import WIDTH_NAMES, bad_widths


def parse(items: list[str]) -> list[tuple[str, Any]]:
    """(dotted key, value) of each `K=V`; a value is read as YAML (as OmegaConf's dotlist reads it)."""
    out = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise InputError(f"--config-override {item!r} is not KEY=VALUE (a dotted key, e.g. data.batch_size=2)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        leaf = key.rsplit(".", 1)[-1]
        if leaf in WIDTH_NAMES and (
            (isinstance(value, int) and not isinstance(value, bool) and value <= 0) or isinstance(value, float)
        ):
            raise InputError(f"--config-override {item}: {leaf} is a width, it must be a positive integer")
        out.append((key, value))
    return out


def _has(data: Any, key: str) -> bool:
    node = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def schema_knows(schema_file: Path | None, root_class: str | None, key: str) -> bool | None:
    """True: a field path of the schema; False: a class the file defines has no such field; None: cannot tell."""
    if schema_file is None or root_class is None or not schema_file.is_file():
        return None
    try:
        text = schema_file.read_text(encoding="utf-8")
        mod = PyModule(path=str(schema_file), text=text, tree=ast.parse(text), lines=text.splitlines())
    except (OSError, SyntaxError, ValueError):
        return None
    classes = _classes(mod)
    aliases = _aliases(mod)
    cls = classes.get(root_class)
    if cls is None:
        return None
    parts = key.split(".")
    for i, part in enumerate(parts):
        if _allows_extra(cls):
            return None
        fields = _fields(cls, classes)
        if part not in fields:
            return False if not _opaque_bases(cls, classes) else None
        if i == len(parts) - 1:
            return True
        nxt = _field_type(fields[part], classes, aliases)
        if nxt is None:
            return None  # a type the file does not define (dict, Any, an imported model): not checked here
        cls = nxt
    return True


def _allows_extra(cls: ast.ClassDef) -> bool:
    text = ast.unparse(cls)
    return "extra=" in text and ("'allow'" in text or '"allow"' in text)


def _opaque_bases(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
    """A base class the file does not define (other than BaseModel) may hold the field."""
    for base in cls.bases:
        name = ast.unparse(base).rsplit(".", 1)[-1]
        if name in classes:
            if _opaque_bases(classes[name], classes):
                return True
        elif name not in ("BaseModel", "object"):
            return True
    return False


def has(stage: dict[str, Any], key: str) -> bool:
    """Whether the stage's config holds the dotted key."""
    return _has(stage, key)


def check(
    items: list[str], stage: dict[str, Any], stage_name: str, schema_file: Path | None, root_class: str | None
) -> None:
    """Bad input (InputError, one line) for an override the stage's config lacks."""
    for key, _ in parse(items):
        if _has(stage, key):
            continue
        known = schema_knows(schema_file, root_class, key)
        if known is False or (known is None and schema_file is None):
            where = f" nor the schema ({root_class})" if schema_file is not None and root_class else ""
            raise InputError(
                f"--config-override {key}=...: configs/{stage_name}.yaml has no key {key}{where}; "
                "an override sets a key the config has (check its spelling)"
            )


def apply(stage: dict[str, Any], items: list[str]) -> dict[str, Any]:
    """The stage's data with the overrides set (the static plan reads this)."""
    data = copy.deepcopy(stage)
    for key, value in parse(items):
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = value
    return data


_CONFIG_REF = re.compile(r"self\.config\.((?:\w+\.)*\w+)|select\(\s*self\.config\s*,\s*['\"]([\w.]+)['\"]")


def read_keys(event: Any, paths: dict[str, Any]) -> dict[str, str]:
    """The config keys the recipe's compile call reads (its gate, its backend and mode arguments), where the stage
    has them: a recipe whose switch lives elsewhere than `model.compile` (`optim.compile`, say) is turned on by
    its own switch."""
    found: dict[str, str] = {}
    sources = {"enabled": " ".join(event.condition or []), **{k: str(v) for k, v in (event.arguments or {}).items()}}
    for name in ("enabled", "backend", "mode"):
        refs = [a or b for a, b in _CONFIG_REF.findall(sources.get(name) or "")]
        refs = [r for r in refs if r in paths and not isinstance(paths[r], dict)]
        if refs:
            found[name] = next((r for r in refs if "compile" in r), refs[0])
    return found


def model_config_options(items: list[str]) -> tuple[Path | None, dict[str, Path]]:
    """`--model-config` values: a bare PATH is the main model's config; NAME=PATH the config of the model the
    recipe loads by NAME (a hub id, a cluster path, a local folder). Bad input raises InputError."""
    bare: Path | None = None
    named: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.rpartition("=")
        if sep and name and not Path(item).is_file():
            named[name.strip()] = Path(path)
        elif bare is None:
            bare = Path(item)
        else:
            raise InputError(f"--model-config {item}: a second bare PATH (name the model it is for: NAME=PATH)")
    return bare, named


def read_model_config(path: Path, flag: str) -> dict[str, Any]:
    """A supplied config.json, read and checked (bad input is one line)."""
    if not path.is_file():
        raise InputError(f"{flag}: {path}: no such file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{flag}: {path} is not a readable JSON file ({exc})") from exc
    if not isinstance(data, dict):
        raise InputError(f"{flag}: {path} is not a config (a JSON object)")
    bad = bad_widths(data)
    if bad:
        raise InputError(f"{flag}: {path} has a width that is not a positive integer: {', '.join(bad[:3])}")
    return data
