"""One rehearsal for recipes that ask a change the same question (review --hard on a change): the key of the
question, and another recipe's rehearsal given as the answer."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.command import Options, plan_for
from model_compile.hard.rehearsal.planning.plan import NotPlanned

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport


def question(
    recipe: RecipeReport | None, recipe_root: Path, repo_root: Path, options: Options, changed: list[str]
) -> str | None:
    """What this recipe's rehearsal asks of a change, as a key: the changed files its run imports, its compile
    path and call, the stage's architecture, depth, wrap, data regime and backend. Two recipes with one key ask
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
    return json.dumps(
        {
            "changed": sorted(changed),
            "compile": [recipe.compile_path, call, sorted(planned.spec.get("targets") or [])],
            "model": [planned.model.model_type, planned.model.depth, planned.model.source.split(" from ", 1)[0]],
            "wrap": [planned.world.wrap, planned.world.world_size],
            "data": [planned.data.mode, planned.data.regime, planned.data.max_seq_len, planned.data.accumulation],
            "backend": [planned.backend, planned.mode, planned.steps],
        },
        sort_keys=True,
        default=str,
    )


def answered(facts: RehearsalFacts, by: str) -> RehearsalFacts:
    """Another recipe's rehearsal, given as this recipe's answer: the same facts, saying whose they are."""
    copy = facts.model_copy(deep=True)
    copy.answered_by = by
    copy.notes.insert(
        0,
        f"not rehearsed again: the change reaches this recipe as it reaches {by} (the same changed files, compile "
        f"path, architecture, depth, wrap, data regime and backend), so {by}'s rehearsal answers for both",
    )
    return copy
