"""MC202: are backend, mode and enabled values allowed (schema defaults, Literal choices, stage YAMLs, call arguments)?"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.parse.models import FieldFact, StageFacts
from model_compile.parse.python import literal_of
from model_compile.rules.base import Example, Rule, compile_events
from model_compile.rules.finding import Finding
from model_compile.rules.placement import _FSDP2_PER_BLOCK
from model_compile.rules.scaffold import CANONICAL_BODY, SCHEMA, STAGE, mark, replace_once
from model_compile.rules.wrapping import _mesh, wrapper_name
from model_compile.vocabulary import BACKENDS, CUDA_GRAPH_MODES, MODES

ALLOWED = {"backend": list(BACKENDS), "mode": list(MODES)}


class InvalidCompileValue(Rule):
    id = "MC202"
    severity = "error"
    title = "backend or mode outside the allowed sets"
    what = (
        "Flags backend/mode values (schema defaults, Literal choices, stage YAMLs) outside the allowed sets and non-bool "
        "`enabled`. A stage value OmegaConf resolves at run time (`${oc.env:NAME,inductor}`) is no literal: its "
        "default is checked when it has one, and one without (`${model.other}`) is shown as dynamic by `inspect`."
    )
    why = "An unknown backend or mode fails only at the first training step, on the accelerator, after the job queued."
    example = "compile:\n  enabled: yes-please\n  backend: inductr"
    use_instead = "backend: inductor | aot_eager | eager; mode: default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs"
    fix = "use an allowed value"
    VALID = [
        Example(),
        Example(stages={"train": replace_once(STAGE, "backend: inductor", "backend: aot_eager")}),
        Example(
            stages={"train": replace_once(STAGE, "mode: default", "mode: max-autotune-no-cudagraphs")},
            note="longest allowed mode",
        ),
        Example(
            stages={"train": replace_once(STAGE, "backend: inductor", 'backend: "${oc.env:COMPILE_BACKEND,inductor}"')},
            note="OmegaConf interpolation with a valid default",
        ),
        Example(
            stages={"train": replace_once(STAGE, "backend: inductor", "backend: ${model.compile_backend}")},
            note="interpolation with no default: dynamic, not checked as a literal",
        ),
        Example(
            stages={"train": replace_once(STAGE, "enabled: false", 'enabled: "${oc.env:USE_COMPILE,false}"')},
            note="enabled from the environment, default false",
        ),
    ]
    INVALID = [
        Example(stages={"train": replace_once(STAGE, "backend: inductor", "backend: inductr  # <- MC202")}),
        Example(stages={"train": replace_once(STAGE, "enabled: false", "enabled: sometimes  # <- MC202")}),
        Example(
            stages={
                "train": replace_once(
                    STAGE, "backend: inductor", 'backend: "${oc.env:COMPILE_BACKEND,bogus}"  # <- MC202'
                )
            },
            note="interpolation whose default is invalid",
        ),
        Example(
            stages={
                "train": replace_once(
                    STAGE,
                    "mode: default",
                    "mode: ${oc.select:train.compile_mode,max-autotune-no-cudagraph}  # <- MC202",
                )
            },
            note="oc.select with a misspelled default",
        ),
        Example(
            schema=replace_once(
                SCHEMA,
                'mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"',
                'mode: str = "fast"  # <- MC202',
            )
        ),
        Example(
            schema=replace_once(
                SCHEMA,
                'backend: Literal["inductor", "aot_eager", "eager"] = "inductor"',
                'backend: Literal["inductor", "tensorrt"] = "inductor"  # <- MC202',
            )
        ),
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, "mode=self.config.model.compile.mode", 'mode="max-autotune-no-cudagraph"'),
                "apply_model_compile(",
                "MC202",
            ),
            note="a misspelled mode hard-coded in the compile call",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        schema = ctx.config.schema_
        if schema.file is None:  # no schema file: no fields either
            return
        for name in ("backend", "mode"):
            fact = schema.fields.get(name)
            if fact and fact.present:
                if fact.default is not None and fact.default not in ALLOWED[name]:
                    yield self.finding(
                        ctx,
                        schema.file,
                        fact.line or 1,
                        f"default {name} {fact.default!r} is not one of {ALLOWED[name]}",
                        _typed_hint(fact, name),
                        subject=f"schema default {name} | {fact.default!r}",
                    )
                bad = [v for v in fact.allowed or [] if v not in ALLOWED[name]]
                if bad:
                    yield self.finding(
                        ctx,
                        schema.file,
                        fact.line or 1,
                        f"{name} type admits {bad}, outside {ALLOWED[name]}",
                        subject=f"schema type {name}",
                    )
        enabled = schema.fields.get("enabled")
        if enabled and enabled.present:
            if (
                enabled.default_text is not None
                and enabled.default is not None
                and not isinstance(enabled.default, bool)
            ):
                yield self.finding(
                    ctx,
                    schema.file,
                    enabled.line or 1,
                    f"default enabled {enabled.default!r} is not a bool",
                    subject="schema default enabled",
                )
            if enabled.annotation and enabled.annotation.replace(" ", "") not in (
                "bool",
                "StrictBool",
                "pydantic.StrictBool",
            ):
                yield self.finding(
                    ctx,
                    schema.file,
                    enabled.line or 1,
                    f"enabled is typed `{enabled.annotation}`, not bool",
                    subject="schema type enabled",
                )
        for _, event, _events in compile_events(ctx):
            for name in ("backend", "mode"):
                value = _literal_string(event.arguments.get(name))
                if value is not None and value not in ALLOWED[name]:
                    yield self.finding(
                        ctx,
                        event.file,
                        event.line,
                        f"the compile call passes {name}={value!r}, which is not one of {ALLOWED[name]}: "
                        "torch.compile rejects it when compile is enabled",
                        f"pass {name}=self.config.model.compile.{name} and set an allowed value in the config",
                        subject=f"compile argument {name}",
                    )
        for stage in ctx.config.stages:
            # A value resolved at run time (an OmegaConf interpolation) is no literal: only its default,
            # when it has one, is checked; `${model.other}` is dynamic and nothing here can judge it.
            for name in ("backend", "mode"):
                known, value = stage.static_value(name)
                if known and value not in ALLOWED[name]:
                    yield self.finding(
                        ctx,
                        stage.file,
                        stage.lines.get(name, 1),
                        f"{stage.name}: {name} {_stage_value(stage, name, value)} is not one of {ALLOWED[name]}",
                        subject=f"stage {stage.name} {name} | {value!r}",
                    )
            known, value = stage.static_value("enabled")
            if known and not _bool_like(value, dynamic="enabled" in stage.dynamic):
                yield self.finding(
                    ctx,
                    stage.file,
                    stage.lines.get("enabled", 1),
                    f"{stage.name}: enabled {_stage_value(stage, 'enabled', value)} is not a bool",
                    subject=f"stage {stage.name} enabled",
                )


def _stage_value(stage: StageFacts, name: str, value: object) -> str:
    """A stage value as the message names it: the literal, or a dynamic field's default."""
    if name in stage.dynamic:
        return f"{value!r} (the default of `{stage.dynamic[name]}`, resolved at run time)"
    return repr(value)


def _bool_like(value: object, dynamic: bool) -> bool:
    """A bool; for a run-time default also the strings pydantic reads as one (oc.env yields strings)."""
    if isinstance(value, bool):
        return True
    return dynamic and isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "on", "off", "1", "0")


@functools.lru_cache(maxsize=4096)
def _literal_string(source: str | None) -> str | None:
    """The value of a string literal argument (`"max-autotune"`), or None for anything else."""
    if not source:
        return None
    try:
        value = literal_of(source)
    except (ValueError, SyntaxError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def plain_str(fact: FieldFact) -> bool:
    return fact.allowed is None and (fact.annotation or "").replace(" ", "") in ("str", "str|None", "Optional[str]")


def _typed_hint(fact: FieldFact, name: str) -> str:
    """MC202's fix hint, with the Literal suggestion folded in when the field is a plain `str`."""
    allowed = ", ".join(ALLOWED[name])
    if plain_str(fact):
        return f"use one of {allowed}; typing the field Literal[...] makes the config loader reject such typos"
    return f"use one of {allowed}"


class CudaGraphModeUnsuited(Rule):
    id = "MC208"
    severity = "warning"
    title = "CUDA-graph mode on a stage that shards per block or feeds varying shapes"
    what = (
        "Flags a stage whose `mode` turns on CUDA graphs (reduce-overhead, max-autotune) while the stage shards block "
        "by block with FSDP2 (`parallel.mesh.shard` > 1 or -1 under a per-block wrapper) or packs its data with a "
        "strategy that closes packs short of `max_seq_len` (`data.packing_selection_strategy: best_fit`). A stage "
        "with compile off is named too: the mode applies once compile is on."
    )
    why = (
        "CUDA graphs record one graph per input shape and keep its memory pool: packs whose length changes per step "
        "record graph after graph. Under per-block FSDP2 a whole-model compile graph-breaks at every block's "
        "sharding hooks, so the graphs cover only the pieces between them; max-autotune-no-cudagraphs tunes kernels "
        "without CUDA graphs."
    )
    example = "compile:\n  enabled: true\n  mode: reduce-overhead   # FSDP2 stage, best_fit packs"
    use_instead = (
        "mode: max-autotune-no-cudagraphs (or default), unless a run on the accelerator shows CUDA graphs pay off"
    )
    fix = "use mode max-autotune-no-cudagraphs or default for this stage, or measure memory and recompiles with CUDA graphs on the accelerator first"
    VALID = [
        Example(),
        Example(
            stages={"train": replace_once(STAGE, "mode: default", "mode: reduce-overhead") + _mesh(1)},
            files=_FSDP2_PER_BLOCK,
            note="CUDA graphs on a DDP stage with no varying packs",
        ),
        Example(
            stages={"train": replace_once(STAGE, "mode: default", "mode: max-autotune-no-cudagraphs") + _mesh(8)},
            files=_FSDP2_PER_BLOCK,
            note="kernel tuning without CUDA graphs on an FSDP2 stage",
        ),
    ]
    INVALID = [
        Example(
            stages={"train": replace_once(STAGE, "mode: default", "mode: reduce-overhead  # <- MC208") + _mesh(8)},
            files=_FSDP2_PER_BLOCK,
            note="reduce-overhead on a stage that shards per block (compile off: applies once on)",
        ),
        Example(
            stages={
                "train": replace_once(STAGE, "mode: default", "mode: max-autotune  # <- MC208")
                + _mesh(1)
                + "data:\n  packing_selection_strategy: best_fit\n  max_seq_len: 4096\n"
            },
            files=_FSDP2_PER_BLOCK,
            note="max-autotune on DDP, best_fit packs of varying length",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        if not compile_events(ctx):
            return
        per_block = _shards_per_block(ctx)
        for stage in ctx.config.stages:
            known, mode = stage.static_value("mode")
            if not known or mode not in CUDA_GRAPH_MODES:
                continue
            why: list[str] = []
            if per_block and stage.wrapping == "fsdp2":
                why.append(
                    f"it shards block by block with FSDP2 (parallel.mesh.shard: {stage.mesh.get('shard')}), whose "
                    "hooks split a whole-model graph at every block"
                )
            if stage.packing == "best_fit":
                why.append(
                    "its packs (data.packing_selection_strategy: best_fit) can close short of max_seq_len, so input "
                    "shapes change from step to step and each new one records another graph"
                )
            if not why:
                continue
            on = stage.static_value("enabled")
            state = "" if on == (True, True) else "; compile is off in this stage today: this applies once enabled"
            yield self.finding(
                ctx,
                stage.file,
                stage.lines.get("mode", 1),
                f"{stage.name}: mode {mode} turns on CUDA graphs (triton.cudagraphs) and " + "; and ".join(why) + state,
                subject=f"stage {stage.name} mode cuda graphs | {mode}",
            )


def _shards_per_block(ctx: RecipeContext) -> bool:
    """prepare_model() wraps with a wrapper the repository makes shard block by block (FSDP2 per block)."""
    return any(
        e.kind == "wrap" and wrapper_name(e) in ctx.repo.per_block_wrappers
        for ledger in ctx.ledgers
        for e in ledger.events
    )
