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
    path and call, its prepare_model() steps, the content of every file its run imports (its own files by their
    place in the recipe, so a copied recipe is the same code), its stage's values whole (data, optimizer,
    training), the model it builds (its tiny config) and depth, wrap, data regime and backend. Two recipes with
    one key would run the same training, and one rehearsal answers both: any difference in what the run reads
    (a learning rate, an image bound, the engine's own code) makes two questions. None when the recipe cannot be
    planned (it is then rehearsed on its own)."""

    if recipe is None or not changed:
        return None
    try:
        planned = plan_for(
            recipe, recipe_root, repo_root, Path(tempfile.gettempdir()) / "model-compile-question", options
        )
    except NotPlanned:
        return None
    call = (planned.compile_call or "").split(": ", 1)[-1]
    config_file = Path(str(planned.spec.get("config_file")))
    steps = [(e.kind, " ".join(e.call.split()), e.condition) for ledger in recipe.ledger[:1] for e in ledger.events]
    return json.dumps(
        {
            "changed": sorted(changed),
            "compile": [recipe.compile_path, call, sorted(planned.spec.get("targets") or [])],
            "prepare": steps,
            "model": [planned.model.model_type, planned.model.depth, _model_identity(planned)],
            "code": _code(recipe_root, repo_root),
            "stage": _stage(config_file, planned.overrides),
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


def answered(facts: RehearsalFacts, by: str) -> RehearsalFacts:
    """Another recipe's rehearsal, given as this recipe's answer: the same facts, saying whose they are."""
    copy = facts.model_copy(deep=True)
    copy.answered_by = by
    copy.notes.insert(
        0,
        f"not rehearsed again: the change reaches this recipe as it reaches {by} with the same run: the same code (every file "
        f"its run imports, its own by their place in the recipe), the same stage values, model, depth, wrap, data "
        f"and backend, so {by}'s rehearsal answers for both",
    )
    return copy


def _code(recipe_root: Path, repo_root: Path) -> str:
    """One hash of the files the recipe's run imports: the recipe's own by their path in the recipe, the rest by
    their path in the repository."""
    from model_compile.hard.rehearsal.reading.keys import run_closure

    tree, closure = run_closure(repo_root, recipe_root)
    try:
        rel = recipe_root.resolve().relative_to(repo_root.resolve()).as_posix() + "/"
    except ValueError:
        rel = "\0"
    h = hashlib.sha1()
    for path in closure:
        shown = "<recipe>/" + path[len(rel) :] if path.startswith(rel) else path
        h.update(f"{shown}\0".encode())
        h.update(tree.read_bytes(path) or b"\0<unreadable>")
    return h.hexdigest()


def _stage(config_file: Path, overrides: list[str]) -> Any:
    """The stage's values as its run sees them: the file's data and the rehearsal's overrides."""
    from model_compile.hard.rehearsal.planning.plan import load_stage

    try:
        data = load_stage(config_file)
    except NotPlanned:
        return None
    return [data, sorted(overrides)]
