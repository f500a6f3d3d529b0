"""Keep a builder that forwards the whole model config working once the config gains `compile`.

`TransformerConfig(**config.model_dump())` would hand the new `compile` section to the
model's own config, which rejects it: the recipe would stop building with compile off.
The edit excludes it where the config is dumped (`model_dump(exclude={"compile"})`); a
spread generate cannot rewrite in place (`**dict(config)`, `**config`) into a constructor
known to lack the field is refused, nothing written.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from model_compile.discover.tree import DiskTree
from model_compile.errors import InputError
from model_compile.parse.forwarding import Forward, model_config_forwards
from model_compile.parse.python import PyModule, parse_module

EXCLUDE = 'exclude={"compile"}'


def recipe_forwards(root: Path, recipe_rel: str) -> tuple[list[Forward], dict[str, PyModule]]:
    """The recipe's calls that spread its whole model config, and its parsed modules (paths from `root`)."""
    tree = DiskTree(root)
    modules: dict[str, PyModule] = {}
    for path in tree.files():
        if path.startswith(recipe_rel + "/") and path.endswith(".py") and "/tests/" not in path:
            parsed = parse_module(tree, path)
            if isinstance(parsed, PyModule):
                modules[path] = parsed
    engines = [p for p in modules if p.startswith(f"{recipe_rel}/engine/")]
    return model_config_forwards(modules, engines), modules


def _edited_dump(f: Forward, mod: PyModule) -> tuple[str, str]:
    """(the dump call as written, the same call excluding compile)."""
    assert f.dump is not None
    old = ast.get_source_segment(mod.text, f.dump)
    if old is None or not old.endswith(")"):
        raise InputError(f"{f.file}:{f.line}: cannot read `{f.call}` to exclude `compile` from it")
    exclude = next((kw for kw in f.dump.keywords if kw.arg == "exclude"), None)
    if exclude is None:
        sep = ", " if f.dump.args or f.dump.keywords else ""
        return old, f"{old[:-1]}{sep}{EXCLUDE})"
    if isinstance(exclude.value, ast.Set):
        literal = ast.get_source_segment(mod.text, exclude.value) or ""
        return old, old.replace(literal, literal[:-1].rstrip() + ', "compile"}', 1)
    raise InputError(
        f"{f.file}:{f.line}: `{f.call}` forwards the model config with an `exclude=` generate cannot extend: "
        'add "compile" to it by hand, then rerun'
    )


def exclude_compile(root: Path, recipe_rel: str, text_of: Callable[[str], str]) -> tuple[dict[str, str], list[str]]:
    """The recipe files rewritten so no whole-model-config spread hands `compile` on: {path: new text} and notes.

    `text_of(path)` gives a file's text as the plan has it so far (another edit may have changed it)."""
    forwards, modules = recipe_forwards(root, recipe_rel)
    out: dict[str, str] = {}
    notes: list[str] = []
    for f in forwards:
        if f.excludes_compile or (f.target_fields is not None and "compile" in f.target_fields):
            continue
        if f.dump is None:
            if f.target_fields is None:
                notes.append(
                    f"{f.file}:{f.line}: `{f.call}` spreads the whole model config, the new `compile` section "
                    f"included, into {f.target} (not a recipe class: whether it takes `compile` is not known here)"
                )
                continue
            raise InputError(
                f"{f.file}:{f.line}: `{f.call}` spreads the whole model config into {f.target}, which has no `compile` "
                "field: the recipe would stop building; exclude it by hand "
                '(`**config.model_dump(exclude={"compile"})`), then rerun'
            )
        old, new = _edited_dump(f, modules[f.file])
        text = out.get(f.file, text_of(f.file))
        if text.count(old) != 1:
            raise InputError(
                f"{f.file}:{f.line}: `{old}` is not found once in the planned file: cannot edit it cleanly"
            )
        out[f.file] = text.replace(old, new)
        notes.append(
            f"{f.file}:{f.line}: `{f.call}` would hand the new `compile` section to {f.target}"
            + (" (its fields have no `compile`)" if f.target_fields is not None else "")
            + f": excluded (`{new}`)"
        )
    return out, notes
