"""What per-block FSDP2 sharding means for a whole-model compile, said where generate enables or adds it.

A stage whose `parallel.mesh.shard` is > 1 or -1 makes the repository's mesh-driven
wrapper apply fully_shard block by block (rule MC407). A whole-model compile placed
before it traces the FSDP2 hooks of every block inside one graph; the regional path
compiles each block before it is sharded. generate says so, with the regional
command on the recipe's block container when the model's layout is known statically.
"""

from __future__ import annotations

from model_compile.generate.planning import locate
from model_compile.parse.models import StageFacts

WHOLE_MODEL_PATHS = ("kit", "direct", "fallback:post-wrap", "fallback:graph-break")


def sharding_notes(
    files: locate.RecipeFiles, stages: list[str], facts: dict[str, StageFacts], path: str, model_var: str = "model"
) -> list[str]:
    """What per-block FSDP2 (mesh shard > 1 or -1) in the enabled stages means for a whole-model compile."""
    sharded = [s for s in stages if facts[s].wrapping == "fsdp2"]
    if not sharded or path not in WHOLE_MODEL_PATHS:
        return []
    shards = ", ".join(f"{s} (parallel.mesh.shard: {facts[s].mesh.get('shard')})" for s in sharded)
    verb = "shards" if len(sharded) == 1 else "shard"
    out = [
        f"{shards} {verb} the model block by block with FSDP2: the {path} path compiles the whole model before "
        "fully_shard wraps each block, so one whole-model graph spans the FSDP2 hooks of every block "
        "(`model-compile rules MC407`); compiling each block before it is sharded (regional, as torchtitan does) "
        "keeps the hooks between the compiled graphs. Not measured here: compare both on the stage's smoke test."
    ]
    layout = locate.model_layout(files)
    recipe = files.rel(files.recipe)
    container = layout.targets.get("regional") if layout is not None else None
    if layout is not None and container:
        out.append(
            f"regional instead: model-compile generate {recipe} --path regional --switch --target "
            f'{model_var}.{container} --reason "..."  (block container from the {layout.why})'
        )
    else:
        out.append(
            f'regional instead: model-compile generate {recipe} --path regional --switch --target <blocks> --reason "..." '
            "(the block container is not known statically: the ModuleList of the model's repeated layers)"
        )
    return out
