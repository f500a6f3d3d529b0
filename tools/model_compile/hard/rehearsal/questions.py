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
    path and call, its prepare_model() steps, the model it builds (its tiny config) and depth, the stage's model
    settings, wrap, data regime and backend. Two recipes with one key ask
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
            "settings": _settings(planned),
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


def _settings(planned: Any) -> dict[str, Any]:
    """The stage's model settings the run keeps (freeze, checkpointing, sizes: what prepare_model and the data
    path read), less what the rehearsal overrides and paths of the team's machines."""
    from model_compile.hard.rehearsal.planning.plan import load_stage

    try:
        data = load_stage(Path(str(planned.spec.get("config_file"))))
    except NotPlanned:
        return {}
    set_here = {o.split("=", 1)[0] for o in planned.overrides}
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}", v)
        elif prefix not in set_here and not (isinstance(value, str) and "/" in value):
            out[prefix] = value

    walk("model", data.get("model") or {})
    return out


def answered(facts: RehearsalFacts, by: str) -> RehearsalFacts:
    """Another recipe's rehearsal, given as this recipe's answer: the same facts, saying whose they are."""
    copy = facts.model_copy(deep=True)
    copy.answered_by = by
    copy.notes.insert(
        0,
        f"not rehearsed again: the change reaches this recipe as it reaches {by} (the same changed files, compile "
        f"path, prepare_model() steps, model, depth, model settings, wrap, data regime and backend), so {by}'s "
        "rehearsal answers for both",
    )
    return copy
