"""Generate on a recipe that already compiles: a no-op, a refused switch, or a repair.

- the recipe compiles through the requested path (and target, when one is
  given) and its review has no error: "already wired", nothing to do;
- it compiles through another kit/fallback path (or target): refused unless
  the user passes `--switch`; then the output says from what to what;
- it compiles in a way generate never writes (`direct`), or through the
  requested path with error findings: the edit repairs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from model_compile.errors import InputError
from model_compile.findings.models import RecipeReport
from model_compile.vocabulary import fallback_path


@dataclass
class Wiring:
    """What generate should do about the recipe's existing compile."""

    already_wired: bool = False
    note: str | None = None  # what the user is told (switch from/to, repair)


def requested_path(kind: str) -> str:
    """`--path regional` -> `fallback:regional`; `kit` stays `kit`."""
    return "kit" if kind == "kit" else fallback_path(kind)


def _targets(rec: RecipeReport) -> list[str]:
    return [t.removeprefix("each of ").strip() for t in rec.compiled_target]


def _shown(path: str, targets: list[str]) -> str:
    return f"{path} ({', '.join(targets)})" if targets else path


def check_wiring(rec: RecipeReport | None, kind: str, target: list[str] | None, switch: bool) -> Wiring:
    """Decide, from the static review of the recipe, whether and how generate may edit it (`target`: the
    --target values given, None when inferred)."""
    if rec is None or rec.compile_path == "none":
        return Wiring()
    want = requested_path(kind)
    have = rec.compile_path
    targets = _targets(rec)
    same_target = target is None or sorted(target) == sorted(targets)
    if have == "direct":
        return Wiring(note=f"{rec.name}: replaces its direct torch.compile ({', '.join(targets)}) with {want}")
    if have == want and same_target:
        # an error in the recipe's own tests (MC211) is not the wiring's: generate does not edit those files
        repairable = [f for f in rec.errors if "/tests/" not in f"/{f.file}"]
        if repairable:
            rules = ", ".join(sorted({f.rule for f in repairable}))
            return Wiring(note=f"{rec.name}: already compiles through {want} with errors ({rules}); repairing it")
        theirs = sorted({f"{f.rule} {f.file}:{f.line}" for f in rec.errors})
        return Wiring(
            already_wired=True,
            note=f"{rec.name}: already wired: compiles through {_shown(have, targets)} "
            "(read from the files as they are now, committed or not)"
            + (f"; the recipe's own tests have {', '.join(theirs)}: fix them there" if theirs else ""),
        )
    to = _shown(want, list(target or []))
    if not switch:
        raise InputError(
            f"{rec.name} already compiles through {_shown(have, targets)}; generating {to} would switch it: "
            "pass --switch to replace the existing wiring"
        )
    return Wiring(note=f"{rec.name}: switching from {_shown(have, targets)} to {to} (--switch)")
