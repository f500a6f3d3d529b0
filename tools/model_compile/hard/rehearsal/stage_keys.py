"""The stage a rehearsal would run and the `--config-override` keys it knows.

`check_overrides` refuses, before anything runs, an override naming a key the stage does not have;
`base_overrides` splits a change's overrides into those its base's stage knows and those it does not (the change
adds the key: the base runs without it rather than fail on an input of the head's). Both read the stage the
rehearsal picks (hard.rehearsal.planning.plan.choose_stage), with the recipe tests' default `--config-name`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_compile.hard.rehearsal.planning import overrides
from model_compile.hard.rehearsal.planning.plan import NotPlanned, choose_stage, load_stage, schema_file_of
from model_compile.hard.stages import stage_files
from model_compile.parse import recipe_test_options as test_options
from model_compile.parse.recipe_test_options import CONFIG_NAME

if TYPE_CHECKING:
    from model_compile.findings.models import RecipeReport


def conftest_default(recipe_root: Path, repo_root: Path) -> str | None:
    """The `--config-name` the recipe's tests run by default (their registered option, else their smoke stage)."""
    conv = test_options.read(recipe_root, repo_root)
    default = conv.default_of(CONFIG_NAME) if conv.registers(CONFIG_NAME) else conv.smoke_config_name
    return default if isinstance(default, str) else None


def _stage(
    recipe: RecipeReport, recipe_root: Path, repo_root: Path, config_name: str | None
) -> tuple[str, dict[str, Any]]:
    name, _ = choose_stage(recipe, recipe_root, config_name, conftest_default(recipe_root, repo_root))
    return name, load_stage(stage_files(recipe_root)[name])


def check_overrides(
    recipe: RecipeReport | None,
    recipe_root: Path,
    repo_root: Path,
    config_overrides: list[str],
    config_name: str | None,
) -> None:
    """Before anything runs: each --config-override names a key of the stage the rehearsal would run (InputError
    otherwise). A recipe the rehearsal cannot plan is left to say so when it runs."""
    if not config_overrides or recipe is None:
        return
    try:
        name, data = _stage(recipe, recipe_root, repo_root, config_name)
    except NotPlanned:
        return
    overrides.check(config_overrides, data, name, schema_file_of(recipe, recipe_root), recipe.config.schema_.root_class)


def base_overrides(
    recipe: RecipeReport | None,
    recipe_root: Path,
    repo_root: Path,
    config_overrides: list[str],
    config_name: str | None,
) -> tuple[list[str], list[str]]:
    """(the --config-override items the base's stage knows, those it does not): a key neither the base's stage
    file nor its schema is known to have (the change adds it) is not the base's, and the base runs without it
    rather than fail on an input of the head's."""
    if not config_overrides or recipe is None:
        return list(config_overrides), []
    try:
        _, data = _stage(recipe, recipe_root, repo_root, config_name)
    except NotPlanned:
        return list(config_overrides), []
    schema = schema_file_of(recipe, recipe_root)
    kept: list[str] = []
    dropped: list[str] = []
    for item in config_overrides:
        key = item.split("=", 1)[0]
        known = overrides.has(data, key) or overrides.schema_knows(schema, recipe.config.schema_.root_class, key)
        (kept if known else dropped).append(item)
    return kept, dropped
