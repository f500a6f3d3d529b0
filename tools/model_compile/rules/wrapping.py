"""MC404, MC407, MC408: compile relative to distributed wrapping.

Advice that depends on how a stage is wrapped reads each stage YAML's
`parallel.mesh.shard` (parse/stages.py): a mesh-driven wrapper such as
`parallelize_model` uses DDP where `shard` is 1 and FSDP2 block by block where
it is > 1 or -1. Stages that set no mesh are "unknown" and named as such.
"""

from __future__ import annotations

from collections.abc import Iterable

from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.ledger.stage_gates import load_stages, stages_with
from model_compile.ledger.summary import code_shapes
from model_compile.parse.models import ConfigFacts
from model_compile.rules.base import Example, Rule, call_subject, compile_events, exclusive, step_ref
from model_compile.rules.finding import Finding
from model_compile.rules.path import KIT_CALL, PER_BLOCK_BODY, REGIONAL_BODY
from model_compile.rules.placement import _FSDP2_PER_BLOCK, _GATED_KIT, _RETURN, _WITHOUT_COMPILE
from model_compile.rules.scaffold import CANONICAL_BODY, STAGE, mark, replace_once

_DDP_NAMES = {"DistributedDataParallel", "DDP"}
_LOCAL_COMPILE = "    model.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
_WRAP = "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
_KIT_AFTER_WRAP = replace_once(_WITHOUT_COMPILE, _RETURN, _WRAP + _GATED_KIT + "return model\n")
_LOCAL_AFTER_WRAP = replace_once(
    _WITHOUT_COMPILE, _RETURN, _WRAP + "if self.config.model.compile.enabled:\n" + _LOCAL_COMPILE + "return model\n"
)
_POST_WRAP_NOTE = "    # model-compile: post-wrap - the DeepSpeed engine must own the module first\n"
_KIT_UNGATED = "model = " + KIT_CALL + "\n"
# Real trainers gate compile with an early return on the compile-off branch: the wrap in that
# branch and the kit call after it are on different paths through prepare_model().
_EARLY_EAGER_EXIT = replace_once(
    CANONICAL_BODY,
    _GATED_KIT,
    "if not self.config.model.compile.enabled:\n    " + _RETURN + _KIT_UNGATED,
)
_EARLY_EAGER_EXIT_ELSE = replace_once(
    CANONICAL_BODY,
    _GATED_KIT,
    "if self.config.model.compile.enabled:\n    pass\nelse:\n    model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    "    return model\n" + _KIT_UNGATED,
)
# Near misses: the early return on the compile-ON branch, after a wrap on that same path; an
# early return on another flag, and a wrap before the kit call on the path that goes on.
_EARLY_COMPILED_EXIT = replace_once(
    CANONICAL_BODY,
    _GATED_KIT,
    "if self.config.model.compile.enabled:\n    "
    + _WRAP
    + "    model = self.model_kit.apply_model_compile(model, backend=self.config.model.compile.backend, "
    "mode=self.config.model.compile.mode)  # <- MC408\n    return model\n",
)
_EARLY_EVAL_EXIT = replace_once(
    _WITHOUT_COMPILE,
    _RETURN,
    "if self.config.eval_only:\n    " + _RETURN + _WRAP + "if self.config.model.compile.enabled:\n"
    "    model = self.model_kit.apply_model_compile(model, backend=self.config.model.compile.backend, "
    "mode=self.config.model.compile.mode)  # <- MC408\nreturn model\n",
)


def _mesh(shard: int) -> str:
    return "\n".join(["parallel:", "  mesh:", "    replicate: -1", f"    shard: {shard}", "    tensor: 1", ""])


def wrapper_name(event: Event) -> str:
    """The callee of a wrap event: `parallelize_model`, `fully_shard`, `DistributedDataParallel`."""
    return event.call.split("(")[0].split("=")[-1].strip().split(".")[-1]


def stage_split(ctx: RecipeContext) -> tuple[list[str], list[str], list[str]]:
    """Stage names by how a mesh-driven wrapper treats them: (DDP, FSDP2 per block, unknown)."""
    ddp = [s.name for s in ctx.config.stages if s.wrapping == "ddp"]
    fsdp = [s.name for s in ctx.config.stages if s.wrapping == "fsdp2"]
    unknown = [s.name for s in ctx.config.stages if s.wrapping is None]
    return ddp, fsdp, unknown


def compile_state(config: ConfigFacts) -> dict[str, bool | None]:
    """Whether each stage trains compiled, as far as the files say: its own `enabled` (a literal or a
    run-time default), else the schema default; None when neither is known."""
    enabled = config.schema_.fields.get("enabled")
    default = enabled.default if enabled is not None and enabled.present and isinstance(enabled.default, bool) else None
    out: dict[str, bool | None] = {}
    for s in config.stages:
        if "enabled" in s.values:
            known, value = s.static_value("enabled")
            out[s.name] = value if known and isinstance(value, bool) else None
        else:
            out[s.name] = default
    return out


def _consequence(ctx: RecipeContext, on: list[str]) -> str:
    """What a whole-model compile does in the stages `on` (compile on, FSDP2 per block), with gradient checkpointing
    read from the stage YAMLs where its gate is a config switch."""
    events = [e for lg in ctx.ledgers for e in lg.of("checkpointing") if e.reachable]
    if "stage_data" not in ctx.memo:
        ctx.memo["stage_data"] = load_stages(ctx.stage_texts)
    data = ctx.memo["stage_data"]
    checkpointed = stages_with(events, data, ctx.config.schema_.defaults) if events else {}  # type: ignore[arg-type]
    ckpt = [n for n in on if checkpointed.get(n) is True]
    maybe = [n for n in on if checkpointed.get(n) is None]
    text = (
        "there the frame that loops over the blocks breaks at the first FSDP2 hook and runs eager, and each block "
        "compiles as a frame of its own at best"
    )
    if ckpt:
        text += (
            f"; with gradient checkpointing on ({', '.join(ckpt)}) not even that: no block compiles and the decoder "
            "layers run eager while compile still costs its cold start (measured on a Qwen3-VL recipe, 2 CPU ranks, "
            "transformers 5.3.0 and 5.25: 0 of 59 compiled graphs held an attention projection)"
        )
    elif maybe:
        text += (
            f"; where gradient checkpointing wraps the blocks ({', '.join(maybe)}: its switch is not set in the "
            "stage file) no block compiles at all"
        )
    return text


def _shard_values(ctx: RecipeContext, names: list[str]) -> str:
    values = sorted({str(s.mesh.get("shard")) for s in ctx.config.stages if s.name in names})
    return ", ".join(values)


def _wraps_before(idx: int, c: Event, events: list[Event]) -> list[Event]:
    return [w for w in events[:idx] if w.kind == "wrap" and w.reachable and not exclusive(w, c)]


class CompileAfterWrap(Rule):
    id = "MC404"
    severity = "error"
    title = "recipe-local compile after distributed wrapping"
    what = (
        "Flags a recipe-local compile (`module.compile()`, `torch.compile`) reached after DDP/FSDP/fully_shard/"
        "parallelize_* unless documented as `post-wrap`. The kit's compile after a wrap is MC408."
    )
    why = "Compiling a DDP/FSDP wrapper traces its hooks and communication (PyTorch's where-to-apply-compile guide); FSDP2 expects compiled blocks before sharding."
    example = "model = parallelize_model(model, ...)\nmodel.compile()"
    use_instead = "compile before parallelize_model(...), or document `# model-compile: post-wrap - <reason>`"
    fix = "move compile before the wrap, or document `# model-compile: post-wrap - <reason>`"
    VALID = [
        Example(),
        Example(
            body=replace_once(_LOCAL_AFTER_WRAP, _LOCAL_COMPILE, _POST_WRAP_NOTE + _LOCAL_COMPILE),
            note="documented post-wrap",
        ),
        Example(
            body=_LOCAL_AFTER_WRAP,
            readme="# Example\n\n## Compile\n\nCompile runs post-wrap: the DeepSpeed engine must own the module before it is compiled.\n",
            note="post-wrap documented in the README",
        ),
        Example(body=_KIT_AFTER_WRAP, note="a kit call after the wrap is MC408's, not MC404's"),
        Example(
            body=replace_once(
                _WITHOUT_COMPILE,
                _RETURN,
                "if not self.config.model.compile.enabled:\n    " + _RETURN + _LOCAL_COMPILE.strip() + "\n" + _RETURN,
            ),
            note="early eager return, then recipe-local compile before the wrap",
        ),
    ]
    INVALID = [Example(body=mark(_LOCAL_AFTER_WRAP, "model.compile(", "MC404"))]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            wraps = _wraps_before(idx, c, events)
            if not wraps or c.compile_style == "kit":
                continue
            if ctx.documented("post-wrap", c.file, c.line) or ctx.readme_documents("post-wrap"):
                continue
            yield self.finding(
                ctx,
                c.file,
                c.line,
                f"{step_ref(c)} runs after distributed wrapping {step_ref(wraps[-1], c.file)}",
                subject=call_subject(c),
            )


class KitCompileAfterWrap(Rule):
    id = "MC408"
    severity = "error"
    title = "kit compile after distributed wrapping"
    what = (
        "Flags the kit's `apply_model_compile` reached after DDP/FSDP/fully_shard/parallelize_*. Documentation "
        "cannot silence it: `# model-compile: post-wrap` covers recipe-local compile only."
    )
    why = (
        "The kit is written for the unwrapped model: it finds the regions it keeps eager (e.g. the vision tower "
        'at `model.model.visual`, found through `hasattr(model, "model")`) on the module it is given. After DDP '
        "the model sits at `.module`, so the lookup misses and the tower is silently compiled; after per-block "
        "FSDP2 the compile traces the sharding hooks."
    )
    example = "model = parallelize_model(model, ...)\nmodel = self.model_kit.apply_model_compile(model, backend=..., mode=...)"
    use_instead = "model = self.model_kit.apply_model_compile(model, backend=..., mode=...)\nmodel = parallelize_model(model, ...)"
    fix = "move the kit call before the wrap"
    VALID = [
        Example(),
        Example(
            body=replace_once(_LOCAL_AFTER_WRAP, _LOCAL_COMPILE, _POST_WRAP_NOTE + _LOCAL_COMPILE),
            note="documented recipe-local post-wrap compile",
        ),
        Example(
            body=_EARLY_EAGER_EXIT,
            note="early return (wrapped, eager) when compile is off, then the kit call, then the wrap",
        ),
        Example(body=_EARLY_EAGER_EXIT_ELSE, note="the eager wrap-and-return in the else arm"),
    ]
    INVALID = [
        Example(body=mark(_KIT_AFTER_WRAP, "apply_model_compile(", "MC408")),
        Example(body=_EARLY_COMPILED_EXIT, note="early return on the compile-on branch, wrapped before the kit call"),
        Example(
            body=_EARLY_EVAL_EXIT, note="an early return on another flag: the path that goes on wraps, then compiles"
        ),
        Example(
            body=mark(
                replace_once(
                    _KIT_AFTER_WRAP,
                    "if self.config.model.compile.enabled:\n",
                    "if self.config.model.compile.enabled:\n" + _POST_WRAP_NOTE,
                ),
                "apply_model_compile(",
                "MC408",
            ),
            note="post-wrap note does not silence a kit call",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            wraps = _wraps_before(idx, c, events)
            if not wraps or c.compile_style != "kit":
                continue
            wrap = wraps[-1]
            yield self.finding(
                ctx,
                c.file,
                c.line,
                f"kit compile {step_ref(c)} runs after distributed wrapping {step_ref(wrap, c.file)}"
                + self._consequence(ctx, wrap),
                fix=f"move the kit call before {step_ref(wrap, c.file)}; "
                "`# model-compile: post-wrap` applies to recipe-local compile only",
                subject=call_subject(c),
            )

    @staticmethod
    def _consequence(ctx: RecipeContext, wrap: Event) -> str:
        regions = [(r, kit.found_by.get(r)) for kit in ctx.repo.kit for r in kit.disables]
        name = wrapper_name(wrap)
        ddp: list[str]
        fsdp: list[str]
        if name in _DDP_NAMES:
            ddp, fsdp = [s.name for s in ctx.config.stages], []
        elif name in ctx.repo.per_block_wrappers or name == "parallelize_model":
            ddp, fsdp, _ = stage_split(ctx)
        else:
            ddp, fsdp = [], []
        parts = []
        if regions and (ddp or name in _DDP_NAMES):
            where = (
                f" in {', '.join(ddp)} (DDP, parallel.mesh.shard: 1)" if ddp and name not in _DDP_NAMES else " (DDP)"
            )
            for region, guard in regions:
                how = f" through `{guard}`" if guard else ""
                parts.append(
                    f"the kit keeps `{region}` eager only where it finds it{how}; after DDP the model sits at "
                    f"`.module`, so{where} that region is silently compiled"
                )
        elif regions:
            parts.append(f"the kit looks up `{', '.join(r for r, _ in regions)}` on the wrapped module, not the model")
        if fsdp:
            parts.append(f"in {', '.join(fsdp)} (FSDP2 per block) compile traces the sharding hooks")
        return ": " + "; ".join(parts) if parts else ""


class WholeModelBeforeBlockSharding(Rule):
    id = "MC407"
    severity = "warning"
    leads = True
    title = "whole-model compile before per-block FSDP2 sharding"
    what = (
        "Flags a whole-model compile placed before a wrapper that applies fully_shard block by block, naming the "
        "stages whose `parallel.mesh.shard` (> 1 or -1) makes a mesh-driven wrapper shard and what that does in "
        "the stages that compile (with gradient checkpointing on there, read from the stage YAMLs: no block "
        "compiles). A warning where such a stage compiles; `info` only where none does (it applies once one "
        "is enabled); silent when every stage uses DDP (`shard: 1`)."
    )
    why = (
        "The whole-model compile does not give one graph across the sharded blocks: dynamo does not trace FSDP2's "
        "hooks (torch/distributed/fsdp/_fully_shard/_fsdp_common.py), so the frame that loops over the blocks "
        "breaks at the first block's hook and runs eager, and the frames it calls (each block's forward, the "
        "norms, the rotary embedding) compile as graphs of their own, one per code object (measured on 2 CPU "
        "ranks with `model-compile rehearse`, torch 2.13). torchtitan and VeOmni compile each block (regional) "
        "before fully_shard: the same graphs on purpose, with a shorter cold start."
    )
    example = "model.compile()\nfor block in model.layers: fully_shard(block)"
    use_instead = "regional compile: for block in model.model.language_model.layers: block.compile(...)"
    fix = (
        "compile each block before it is sharded: model-compile generate RECIPE --path regional --switch (with "
        "gradient checkpointing on it compiles each block's attention and MLP)"
    )
    VALID = [
        Example(),
        Example(body=REGIONAL_BODY, files=_FSDP2_PER_BLOCK, note="regional compile before per-block sharding"),
        Example(
            body=PER_BLOCK_BODY, files=_FSDP2_PER_BLOCK, note="each block's attention and MLP, inside the FSDP2 units"
        ),
        Example(files=_FSDP2_PER_BLOCK, stages={"train": STAGE + _mesh(1)}, note="every stage uses DDP"),
    ]
    INVALID = [
        Example(
            body=mark(CANONICAL_BODY, "apply_model_compile(", "MC407"),
            files=_FSDP2_PER_BLOCK,
            severity="info",
            note="no stage compiles: it applies once one is enabled",
        ),
        Example(
            body=mark(CANONICAL_BODY, "apply_model_compile(", "MC407"),
            files=_FSDP2_PER_BLOCK,
            stages={"stage1": STAGE + _mesh(1), "stage2": STAGE + _mesh(8)},
            severity="info",
            note="one of two stages shards",
        ),
        Example(
            body=mark(CANONICAL_BODY, "apply_model_compile(", "MC407"),
            files=_FSDP2_PER_BLOCK,
            stages={
                "stage1": STAGE + _mesh(1),
                "stage2": replace_once(STAGE, "enabled: false", "enabled: true  # model-compile: enabled - measured")
                + _mesh(8),
            },
            note="compile on in the stage that shards",
        ),
        Example(
            body=mark(CANONICAL_BODY, "apply_model_compile(", "MC407"),
            files=_FSDP2_PER_BLOCK,
            stages={
                "train": replace_once(
                    STAGE,
                    "  compile:\n    enabled: false\n",
                    "  gradient_checkpointing:\n    enabled: true\n  compile:\n    enabled: true  # model-compile: enabled - x\n",
                )
                + _mesh(8),
            },
            note="compile and gradient checkpointing on in the stage that shards: no block compiles",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            if "regional" in code_shapes(ctx, c) or "submodule" in code_shapes(ctx, c):
                continue
            for w in events[idx + 1 :]:
                if w.kind != "wrap":
                    continue
                name = wrapper_name(w)
                in_loop = any(b.arm == "loop" for b in w.branches)
                scope = ""
                if name == "fully_shard" and in_loop:
                    where = "block by block"
                elif name in ctx.repo.per_block_wrappers:
                    ddp, fsdp, unknown = stage_split(ctx)
                    if fsdp:
                        where = f"block by block (FSDP2) in {', '.join(fsdp)} (parallel.mesh.shard: {_shard_values(ctx, fsdp)})"
                        state = compile_state(ctx.config)
                        on = [n for n in fsdp if state.get(n) is True]
                        off = [n for n in fsdp if state.get(n) is False]
                        if on:
                            where += f"; compile is on in {', '.join(on)}: {_consequence(ctx, on)}"
                        if off:
                            where += f"; {', '.join(off)} {'trains' if len(off) == 1 else 'train'} eager (compile off): this applies once enabled"
                        if ddp:
                            where += f"; {', '.join(ddp)} {'uses' if len(ddp) == 1 else 'use'} DDP"
                        # The subject names the stages it applies to: turning compile on in a sharded stage
                        # (or a new sharded stage) is a new finding in a diff, not an existing one.
                        scope = f" | FSDP2 in {', '.join(fsdp)}; compile on in {', '.join(on) or 'none'}"
                    elif unknown and not ddp:
                        where = "block by block (FSDP2) where parallel.mesh.shard is > 1 or -1 (no stage YAML sets it)"
                        scope = ""
                    else:
                        break  # every stage with a mesh uses DDP: nothing to advise
                else:
                    continue
                state = compile_state(ctx.config)
                shards = fsdp if name in ctx.repo.per_block_wrappers else list(state)
                compiled = any(state.get(n) is True for n in shards)
                yield self.finding(
                    ctx,
                    c.file,
                    c.line,
                    f"whole-model compile before `{name}(...)`, which shards {where}",
                    subject=call_subject(c) + scope,
                    # a stage that compiles and shards per block pays compile for a hot path that runs eager
                    severity="warning" if compiled else "info",
                )
                break
