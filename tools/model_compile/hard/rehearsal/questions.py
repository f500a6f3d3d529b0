"""One rehearsal for recipes that ask a change the same question (review --hard on a change): the key of the
question, and another recipe's rehearsal given as the answer."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.command import Options, plan_for
from model_compile.hard.rehearsal.planning.plan import NotPlanned

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport


def question(
    recipe: RecipeReport | None, recipe_root: Path, repo_root: Path, options: Options, changed: list[str]
) -> str | None:
    """What this recipe's rehearsal asks of a change, as a key: the changed files its run imports, its compile
    path and call, its prepare_model() steps and the stage's values of the config keys they read, the model it
    builds (its tiny config) and depth, wrap, data regime and backend. Two recipes with one key ask
    the same question, and one rehearsal answers both. None when the recipe cannot be planned (it is then
    rehearsed on its own)."""

    if recipe is None or not changed:
        return None
    try:
        planned = plan_for(
            recipe, recipe_root, repo_root, Path(tempfile.gettempdir()) / "model-compile-question", options
        )
    except NotPlanned:
        return None
    call = (planned.compile_call or "").split(": ", 1)[-1]
    steps = [(e.kind, " ".join(e.call.split()), e.condition) for ledger in recipe.ledger[:1] for e in ledger.events]
    return json.dumps(
        {
            "changed": sorted(changed),
            "compile": [recipe.compile_path, call, sorted(planned.spec.get("targets") or [])],
            "prepare": steps,
            "model": [planned.model.model_type, planned.model.depth, _model_identity(planned)],
            "settings": _settings(planned, steps),
            "wrap": [planned.world.wrap, planned.world.world_size],
            "data": [planned.data.mode, planned.data.regime, planned.data.max_seq_len, planned.data.accumulation],
            "backend": [planned.backend, planned.mode, planned.steps],
        },
        sort_keys=True,
        default=str,
    )


def _model_identity(planned: Any) -> str:
    """The model the run builds: its tiny config (what the checkpoint's name led to, not the name), else the
    recipe's own builder (its source)."""
    config = planned.model.config
    if isinstance(config, dict):
        shown = {k: v for k, v in config.items() if k not in ("_name_or_path", "name_or_path", "transformers_version")}
        return hashlib.sha1(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    return str(planned.model.source).split(" from ", 1)[0]


def _settings(planned: Any, steps: list[Any]) -> dict[str, Any]:
    """The stage's values of the config keys prepare_model() reads (`self.config.model.freeze_vit`, the
    checkpointing switch: named in its steps' calls and conditions), less what the rehearsal overrides."""
    import re

    from model_compile.hard.rehearsal.planning.plan import load_stage

    text = " ".join(f"{call} {' '.join(cond)}" for _, call, cond in steps)
    # getattr(self.config.model, "x", default) reads model.x
    text = re.sub(r"getattr\(\s*self\.config\.((?:\w+\.)*\w+)\s*,\s*[\"'](\w+)[\"'][^)]*\)", r"self.config.\1.\2", text)
    read = set()
    for m in re.finditer(r"\bconfig\.((?:\w+\.)*\w+)(\s*\()?", text):
        read.add(m.group(1).rsplit(".", 1)[0] if m.group(2) else m.group(1))  # `x.model_dump()` reads x
    try:
        data = load_stage(Path(str(planned.spec.get("config_file"))))
    except NotPlanned:
        return {}
    set_here = {o.split("=", 1)[0] for o in planned.overrides}
    out: dict[str, Any] = {}
    for key in sorted(read - set_here):
        value: Any = data
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        out[key] = value
    return out


def answered(facts: RehearsalFacts, by: str) -> RehearsalFacts:
    """Another recipe's rehearsal, given as this recipe's answer: the same facts, saying whose they are."""
    copy = facts.model_copy(deep=True)
    copy.answered_by = by
    copy.notes.insert(
        0,
        f"not rehearsed again: the change reaches this recipe as it reaches {by} (the same changed files, compile "
        f"path, prepare_model() steps and the settings they read, model, depth, wrap, data regime and backend), so "
        f"{by}'s rehearsal answers for both (its gradient figures are {by}'s own: the optimizer's settings, which "
        "move them slightly, are not part of the question)",
    )
    return copy
