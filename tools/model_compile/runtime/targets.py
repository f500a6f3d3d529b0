"""The runtime target check: count compiled modules against what each target implies.

Pure Python (no torch), so the matching rules are unit-tested without a model:

* a pattern is matched per dotted segment: `layers.*` names `layers.0`, never
  `layers.0.mlp` (a `*` never crosses a dot, unlike fnmatch over the whole name);
* every module a pattern names must be compiled: a regional target
  `model.language_model.layers.*` expects each block of the container, and
  "27 of 28 blocks compiled" is a failure;
* a pattern without a wildcard (a submodule, or "" for the model itself, as the
  kit compiles it) expects exactly that module to be compiled; compiling its
  children instead does not count.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

WILDCARDS = ("*", "?", "[")


def segment_match(pattern: str, name: str) -> bool:
    """`name` matches `pattern` segment by segment ("" matches only the model itself)."""
    if pattern == "" or name == "":
        return pattern == name
    p_parts, n_parts = pattern.split("."), name.split(".")
    return len(p_parts) == len(n_parts) and all(fnmatchcase(n, p) for p, n in zip(p_parts, n_parts, strict=True))


def _label(name: str) -> str:
    return f"`{name}`" if name else "the model itself"


def check_target(pattern: str, module_names: Iterable[str], compiled: set[str]) -> dict[str, Any]:
    """One target: the modules it names, how many are compiled, and a one-line verdict."""
    expected = [n for n in module_names if segment_match(pattern, n)]
    hits = [n for n in expected if n in compiled]
    missing = [n for n in expected if n not in compiled]
    wildcard = any(w in pattern for w in WILDCARDS)
    if not expected:
        text = f"{pattern!r}: no module of the model matches (the target does not exist at run time)"
    elif wildcard:
        what = "blocks" if pattern.endswith(".*") or pattern == "*" else "modules"
        text = f"{pattern!r}: {len(hits)} of {len(expected)} {what} compiled"
        if missing:
            text += f" (not compiled: {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})"
    elif hits:
        text = f"{pattern!r}: {_label(pattern)} compiled"
    else:
        below = [c for c in compiled if pattern == "" or c.startswith(pattern + ".")]
        text = f"{pattern!r}: {_label(pattern)} is not compiled"
        if below:
            text += f" ({len(below)} module(s) inside it are, e.g. {below[0]!r}: that is not the same scope)"
    return {
        "pattern": pattern,
        "expected": len(expected),
        "compiled": len(hits),
        "missing": missing[:20],
        "ok": bool(expected) and not missing,
        "text": text,
    }


def check_targets(module_names: Iterable[str], compiled: Iterable[str], patterns: Iterable[str]) -> dict[str, Any]:
    """Every target checked; compiled modules no target names are listed, not failed."""
    names = list(module_names)
    done = set(compiled)
    checks = [check_target(p, names, done) for p in patterns]
    pats = [c["pattern"] for c in checks]
    others = sorted(c for c in done if not any(segment_match(p, c) for p in pats))
    return {
        "target_checks": checks,
        "missing_targets": [c["pattern"] for c in checks if not c["ok"]],
        "target_failures": [c["text"] for c in checks if not c["ok"]],
        "other_compiled": others[:20],
        "other_compiled_count": len(others),
    }
