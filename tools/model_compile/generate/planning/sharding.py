"""What per-block FSDP2 sharding means for a whole-model compile, said where generate enables or adds it.

A stage whose `parallel.mesh.shard` is > 1 or -1 makes the repository's mesh-driven
wrapper apply fully_shard block by block (rule MC407). A whole-model compile placed
before it does not give one graph across the blocks: dynamo does not trace FSDP2's
hooks, so the frame that loops over the sharded blocks stops at the first hook and
runs eager, and the frames it calls (a block's forward, the norms) compile as graphs
of their own, one per code object (measured with `model-compile rehearse` on 2 CPU
ranks). The regional path compiles each block before it is sharded. generate says so,
with the regional command on the recipe's block container when the model's layout is
known statically.
"""

from __future__ import annotations

import shlex

from model_compile.generate.edits.base_tests import WorldSize, world_size
from model_compile.generate.planning import locate
from model_compile.generate.style.repo_text import RepoText, overrides, smoke_command
from model_compile.parse import recipe_test_options
from model_compile.parse.models import StageFacts

WHOLE_MODEL_PATHS = ("kit", "direct", "fallback:post-wrap", "fallback:graph-break")


def sharding_notes(
    files: locate.RecipeFiles,
    stages: list[str],
    facts: dict[str, StageFacts],
    path: str,
    model_var: str = "model",
    suggested: tuple[list[str], str] | None = None,
) -> list[str]:
    """What per-block FSDP2 (mesh shard > 1 or -1) in the enabled stages means for a whole-model compile.
    `suggested`: the regional targets that compile for this model (structure.suggest_regional), and where the
    model was read."""
    sharded = [s for s in stages if facts[s].wrapping == "fsdp2"]
    if not sharded or path not in WHOLE_MODEL_PATHS:
        return []
    shards = ", ".join(f"{s} (parallel.mesh.shard: {facts[s].mesh.get('shard')})" for s in sharded)
    verb = "shards" if len(sharded) == 1 else "shard"
    recipe = files.rel(files.recipe)
    see = "; ".join(f"`model-compile rehearse {recipe} --config-name {s}`" for s in sharded[:2])
    out = [
        f"{shards} {verb} the model block by block with FSDP2: the {path} path compiles the whole model before "
        "fully_shard wraps each block, and dynamo does not trace FSDP2's hooks: the frame that loops over the "
        "blocks breaks at the first hook and runs eager, and each block's forward compiles as a graph of its own "
        "(`model-compile rules MC407`); compiling each block before it is sharded (regional, as torchtitan does) "
        "is that on purpose, with the loss and the code around the blocks left eager. See it for this stage: "
        f"{see} (2 CPU ranks, the stage's FSDP2 wrap)."
    ]
    if suggested is not None and suggested[0]:
        flags = " ".join(f"--target {shlex.quote(t)}" for t in suggested[0])
        names = " ".join(f"--config-name {shlex.quote(s)}" for s in sharded)
        out.append(
            f'regional instead: model-compile generate {recipe} --path regional --switch {names} {flags} --reason "..."  '
            f"(from {suggested[1]})"
        )
    else:
        out.append(
            f'regional instead: model-compile generate {recipe} --path regional --switch --target <blocks> --reason "..." '
            "(the model's code was not found: its block container is not known statically)"
        )
    return out


def stage_options(conv: recipe_test_options.Conventions, stage: str, world: WorldSize) -> list[str]:
    """What the smoke test needs to run `stage`: `--config-name` and `--world-size` (its mesh's), each only
    when the recipe's conftest.py registers it."""
    options: list[str] = []
    if conv.registers(recipe_test_options.CONFIG_NAME):
        options += [recipe_test_options.CONFIG_NAME, stage]
    if conv.registers(recipe_test_options.WORLD_SIZE) and world.from_mesh:  # no mesh: the option's default runs it
        options += [recipe_test_options.WORLD_SIZE, str(world.size)]
    return options


def smoke_commands(
    files: locate.RecipeFiles,
    stages: list[str],
    facts: dict[str, StageFacts],
    text: RepoText,
    compile_on: bool = False,
) -> list[str]:
    """The recipe's smoke test for each stage, with `stage_options` (the world size from the stage's facts,
    as read already), then the overrides that run it with compile on: asked for (`compile_on`), or needed because
    the recipe's tests turn compile off whatever the stage says (its own override, or one the schema rejects)."""
    if not text.has_smoke_test:
        return []
    conv = text.test_options
    recipe = files.rel(files.recipe)
    switch = (compile_on or text.forces_off) and conv.registers(recipe_test_options.CONFIG_OVERRIDE)
    out = []
    for stage in stages:
        world = world_size(facts[stage])
        where = f"{stage}: {world.size} rank(s), {world.why}"
        if not conv.registers(recipe_test_options.CONFIG_NAME) and conv.smoke_config_name not in (None, stage):
            where += f"; no --config-name option: the smoke test loads {conv.smoke_config_name}, not {stage}"
        extra = overrides(text.compile_on(facts[stage])) if switch else []
        out.append(f"{smoke_command(recipe, conv, [*stage_options(conv, stage, world), *extra])}  # {where}")
    return out


def test_override_note(text: RepoText) -> str | None:
    """What the printed smoke commands carry because of the recipe's own test overrides, said once."""
    if text.rejected:
        o = text.rejected[0]
        return (
            f"{o.file}:{o.line} overrides `{o.key}` with `{o.value}`, which the schema rejects (MC211): the smoke "
            "test fails config validation unless a command-line override follows it, so each smoke command here "
            "carries `model.compile.enabled=true` and the stage's own backend and mode (the rebuilt section would "
            "otherwise take the schema's defaults)"
        )
    off = [o for o in text.test_overrides if o.enables is False]
    if off:
        return (
            f"{off[0].file}:{off[0].line} turns compile off in the smoke test ({off[0].key}: {off[0].value}): each "
            f"smoke command here carries `--config-override {text.switch_on}`, else it would run eager"
        )
    return None


def sharded_smoke_commands(files: locate.RecipeFiles, facts: dict[str, StageFacts], text: RepoText) -> list[str]:
    """Compile on, in each stage whose mesh shards the model (`parallel.mesh.shard` > 1 or -1): the runs
    where a compile path's placement around sharding matters, each on its mesh's world size (empty
    without such a stage, a smoke test, or a --config-override option)."""
    sharded = sorted(s for s in facts if facts[s].wrapping == "fsdp2")
    if not sharded or not text.test_options.registers(recipe_test_options.CONFIG_OVERRIDE):
        return []
    return smoke_commands(files, sharded, facts, text, compile_on=True)
