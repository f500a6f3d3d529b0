"""MC301 and MC401-MC407: what is compiled, and where compile sits."""

from __future__ import annotations

from collections.abc import Iterable

from model_compile.ledger.recipe import RecipeContext
from model_compile.ledger.summary import code_shapes
from model_compile.rules.base import Example, Rule, compile_events, exclusive, same_model
from model_compile.rules.finding import Finding
from model_compile.rules.path import KIT_CALL, REGIONAL_BODY
from model_compile.rules.scaffold import CANONICAL_BODY, mark, replace_once

_KIT = "    model = " + KIT_CALL.replace("\n", "\n    ")
_GATED_KIT = "if self.config.model.compile.enabled:\n" + _KIT + "\n"
_WITHOUT_COMPILE = replace_once(CANONICAL_BODY, _GATED_KIT, "")
_RETURN = "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
_UPCAST = (
    "for parameter in model.parameters():\n"
    "    if parameter.requires_grad:\n"
    "        parameter.data = parameter.data.to(dtype=torch.float32)\n"
)
_FSDP2_PER_BLOCK = {
    "example_engine/distributed/fsdp2.py": "def parallelize_model(model, parallel_mesh=None):\n"
    "    for block in model.model.language_model.layers:\n        fully_shard(block)\n"
    "    fully_shard(model)\n    return model\n"
}


def _move_compile_before(marker: str) -> str:
    """The canonical body with the compile block moved before `marker`."""
    return replace_once(_WITHOUT_COMPILE, marker, _GATED_KIT + marker)


class CompiledObjectNotReturned(Rule):
    id = "MC301"
    severity = "error"
    title = "compiled object is not the returned model"
    what = "Flags compile applied to a copy, to a model rebuilt afterwards, or a torch.compile result that is thrown away."
    why = "Training uses what prepare_model() returns; compiling anything else costs compile time and changes nothing."
    example = "eval_model = copy.deepcopy(model)\neval_model.compile()\nreturn parallelize_model(model, ...)"
    use_instead = "compile the module that prepare_model() returns (in place), before wrapping it"
    fix = "compile the model that prepare_model() returns"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY, "if self.config.model.compile.enabled:", "self.ema_model = copy.deepcopy(model)\nif self.config.model.compile.enabled:"
            ),
            note="a copy is kept, the returned model is compiled",
        ),
    ]
    INVALID = [
        Example(
            body=replace_once(
                _WITHOUT_COMPILE,
                _RETURN,
                "if self.config.model.compile.enabled:\n"
                "    shadow = copy.deepcopy(model)\n"
                "    shadow = self.model_kit.apply_model_compile(shadow, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)  # <- MC301\n"
                + _RETURN,
            ),
            note="compiled a copy",
        ),
        Example(
            body=mark(
                replace_once(CANONICAL_BODY, _RETURN, "model = self.model_kit.build_model(self.config.model.path)\n" + _RETURN),
                "apply_model_compile(",
                "MC301",
            ),
            note="model rebuilt after compile",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for ledger in ctx.ledgers:
            for e in ledger.events:
                if e.kind != "compile" or not e.reachable:
                    continue
                if e.compile_style == "wrapper" and not e.replaces_model:
                    yield self.finding(ctx, e.file, e.line, f"the result of `{e.call}` is discarded: nothing is compiled")
                elif (
                    ledger.returned_identity is not None
                    and e.model_identity is not None
                    and e.model_identity != ledger.returned_identity
                ):
                    yield self.finding(
                        ctx, e.file, e.line,
                        f"`{e.call}` compiles {e.target}, which is not the model prepare_model() returns "
                        "(a copy, or the model was rebuilt afterwards)",
                    )


class _AfterCompile(Rule):
    """Shared check: an event of `kinds` reached after compile on the same model."""

    kinds: tuple[str, ...] = ()
    noun = ""

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            for later in events[idx + 1 :]:
                if later.kind in self.kinds and later.reachable and not exclusive(c, later) and same_model(c, later):
                    yield self.finding(
                        ctx, later.file, later.line,
                        f"{self.noun} `{later.call}` runs after compile (`{c.call}`, line {c.line})",
                    )


class PatchAfterCompile(_AfterCompile):
    id = "MC401"
    severity = "error"
    title = "patches applied after compile"
    kinds = ("patch",)
    noun = "patch"
    what = "Flags a model patch reached after compile in prepare_model()."
    why = "Dynamo traces the code as it is at the first call; patches applied after compile may be skipped by cached graphs or force recompiles, and the compiled graph no longer matches the recipe's model."
    example = "model = kit.apply_model_compile(model, ...)\nmodel = kit.apply_model_patches(model, [patch])"
    use_instead = "apply every patch first, then compile"
    fix = "move the compile block after the last patch"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                replace_once(CANONICAL_BODY, "model = self.model_kit.apply_model_patches(model, [patch_attention])\n", ""),
                _RETURN,
                "else:\n    model = self.model_kit.apply_model_patches(model, [patch_attention])\n" + _RETURN,
            ),
            note="eager-only patch in the else arm",
        ),
    ]
    INVALID = [Example(body=mark(_move_compile_before("model = self.model_kit.apply_model_patches"), "apply_model_patches", "MC401"))]


class FreezeAfterCompile(_AfterCompile):
    id = "MC402"
    severity = "error"
    title = "freeze or trainable-dtype upcast after compile"
    kinds = ("freeze", "upcast")
    noun = "freeze/upcast"
    what = "Flags requires_grad changes or dtype upcasts of parameters reached after compile."
    why = "Graphs are guarded on requires_grad and dtype: changing them after compile forces recompiles or bakes the wrong autograd graph."
    example = "model.compile()\nkit.apply_freeze_policy(model, freeze_vit=True)"
    use_instead = "freeze and upcast before compiling"
    fix = "move the compile block after freezing and the fp32 upcast"
    VALID = [
        Example(),
        Example(body=replace_once(replace_once(CANONICAL_BODY, _UPCAST, ""), _GATED_KIT, _UPCAST + _GATED_KIT), note="upcast right before compile"),
    ]
    INVALID = [
        Example(
            body=mark(
                mark(_move_compile_before("model = self.model_kit.apply_freeze_policy"), "apply_freeze_policy", "MC402"),
                "parameter.data = parameter.data.to(",
                "MC402",
            ),
            note="freeze and upcast after compile",
        ),
        Example(
            body=mark(_move_compile_before("for parameter in model.parameters():"), "parameter.data = parameter.data.to(", "MC402"),
            note="upcast after compile",
        ),
    ]


class CheckpointingAfterCompile(_AfterCompile):
    id = "MC403"
    severity = "error"
    title = "activation checkpointing after compile"
    kinds = ("checkpointing",)
    noun = "checkpointing"
    what = "Flags gradient/activation checkpointing enabled after compile."
    why = "Checkpoint wrappers change the module tree and forward the compiled code was traced from (pytorch #97436); torchtitan and accelerate apply checkpointing before compile."
    example = "model.compile()\nmodel.gradient_checkpointing_enable()"
    use_instead = "enable checkpointing, then compile"
    fix = "move the compile block after checkpointing"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.gradient_checkpointing.enabled:\n    model = self.model_kit.apply_gradient_checkpointing(model)\n",
                "model.gradient_checkpointing_enable()\n",
            ),
            note="HF checkpointing call right before compile",
        ),
    ]
    INVALID = [
        Example(
            body=mark(
                _move_compile_before("if self.config.model.gradient_checkpointing.enabled:"),
                "apply_gradient_checkpointing",
                "MC403",
            )
        )
    ]


class CompileAfterWrap(Rule):
    id = "MC404"
    severity = "error"
    title = "compile after distributed wrapping"
    what = "Flags compile reached after DDP/FSDP/fully_shard/parallelize_* unless documented as `post-wrap`."
    why = "Compiling a DDP/FSDP wrapper traces its hooks and communication (PyTorch's where-to-apply-compile guide); FSDP2 expects compiled blocks before sharding."
    example = "model = parallelize_model(model, ...)\nmodel.compile()"
    use_instead = "compile before parallelize_model(...), or document `# model-compile: post-wrap - <reason>`"
    fix = "move compile before the wrap, or document `# model-compile: post-wrap - <reason>`"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                _WITHOUT_COMPILE,
                _RETURN,
                "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
                "if self.config.model.compile.enabled:\n"
                "    # model-compile: post-wrap - the DeepSpeed engine must own the module first\n"
                "    model.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
                "return model\n",
            ),
            note="documented post-wrap",
        ),
        Example(
            body=replace_once(
                _WITHOUT_COMPILE, _RETURN, "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n" + _GATED_KIT + "return model\n"
            ),
            readme="# Example\n\n## Compile\n\nCompile runs post-wrap: the DeepSpeed engine must own the module before it is compiled.\n",
            note="post-wrap documented in the README",
        ),
    ]
    INVALID = [
        Example(
            body=mark(
                replace_once(
                    _WITHOUT_COMPILE, _RETURN, "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n" + _GATED_KIT + "return model\n"
                ),
                "apply_model_compile(",
                "MC404",
            )
        )
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            wraps = [w for w in events[:idx] if w.kind == "wrap" and w.reachable and not exclusive(w, c)]
            if not wraps:
                continue
            if ctx.documented("post-wrap", c.file, c.line) or ctx.readme_documents("post-wrap"):
                continue
            yield self.finding(ctx, c.file, c.line, f"`{c.call}` runs after distributed wrapping (`{wraps[-1].call}`, line {wraps[-1].line})")


class UnreachableCompile(Rule):
    id = "MC405"
    severity = "error"
    title = "compile code is never reached"
    what = "Flags compile calls after a return (or under `if False`) in prepare_model() or a helper it calls."
    why = "Code that never runs looks like compile support in review and in grep, but the model trains eager."
    example = "return parallelize_model(model, ...)\nmodel.compile()"
    use_instead = "place the compile block before the return"
    fix = "move the compile block before the return"
    VALID = [
        Example(),
        Example(
            body=replace_once(CANONICAL_BODY, "if self.config.model.compile.enabled:", "if self.config.eval_only:\n    return model\nif self.config.model.compile.enabled:"),
            note="early return in a branch before compile",
        ),
    ]
    INVALID = [Example(body=mark(_WITHOUT_COMPILE + _GATED_KIT, "apply_model_compile(", "MC405"))]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for ledger in ctx.ledgers:
            for e in ledger.events:
                if e.kind == "compile" and not e.reachable:
                    yield self.finding(ctx, e.file, e.line, f"`{e.call}` is never reached")


class TwoCompilePaths(Rule):
    id = "MC406"
    severity = "warning"
    title = "two compile paths can both run"
    what = "Flags two compile calls on overlapping targets that are not in exclusive branches."
    why = "Compiling a model and then its blocks (or twice) doubles compile time and nests compiled regions; usually a leftover of a migration."
    example = "model = kit.apply_model_compile(model, ...)\nfor layer in model.layers: layer.compile()"
    use_instead = "keep one compile path; put alternatives in if/else"
    fix = "remove one of the compile paths, or make them exclusive (if/else)"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                _GATED_KIT,
                "if self.config.model.compile.enabled and self.config.model.compile.regional:\n"
                "    # model-compile: regional - per layer\n"
                "    for layer in model.model.language_model.layers:\n"
                "        layer.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
                "elif self.config.model.compile.enabled:\n" + _KIT + "\n",
            ),
            note="regional and whole-model compile in exclusive arms",
        ),
    ]
    INVALID = [
        Example(
            body=replace_once(
                CANONICAL_BODY,
                _RETURN,
                "if self.config.model.compile.enabled:\n"
                "    # model-compile: regional - per layer\n"
                "    for layer in model.model.language_model.layers:\n"
                "        layer.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)  # <- MC406\n"
                + _RETURN,
            )
        )
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        seen = compile_events(ctx)
        for i, (_, a, _) in enumerate(seen):
            for _, b, _ in seen[i + 1 :]:
                if exclusive(a, b) or not same_model(a, b):
                    continue
                if _overlap(a.target or "", b.target or ""):
                    yield self.finding(ctx, b.file, b.line, f"`{b.call}` compiles again what `{a.call}` (line {a.line}) already compiles")


def _overlap(a: str, b: str) -> bool:
    a, b = a.removeprefix("each of "), b.removeprefix("each of ")
    return a == b or b.startswith(a + ".") or a.startswith(b + ".") or not a or not b


class WholeModelBeforeBlockSharding(Rule):
    id = "MC407"
    severity = "info"
    title = "whole-model compile before per-block FSDP2 sharding"
    what = "Notes a whole-model compile placed before a wrapper that applies fully_shard block by block."
    why = "Dynamo then traces FSDP2's per-block hooks inside one big graph; torchtitan and VeOmni compile each block (regional) before fully_shard, which also cuts cold-start compile time."
    example = "model.compile()\nfor block in model.layers: fully_shard(block)"
    use_instead = "regional compile: for block in model.model.language_model.layers: block.compile(...)"
    fix = "consider regional compile (model-compile generate RECIPE --path regional) when FSDP2 shards per block"
    VALID = [Example(), Example(body=REGIONAL_BODY, files=_FSDP2_PER_BLOCK, note="regional compile before per-block sharding")]
    INVALID = [Example(body=mark(CANONICAL_BODY, "apply_model_compile(", "MC407"), files=_FSDP2_PER_BLOCK)]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            if "regional" in code_shapes(ctx, c) or "submodule" in code_shapes(ctx, c):
                continue
            for w in events[idx + 1 :]:
                name = w.call.split("(")[0].split(".")[-1]
                in_loop = any(b.arm == "loop" for b in w.branches)
                if w.kind == "wrap" and (name in ctx.repo.per_block_wrappers or (name == "fully_shard" and in_loop)):
                    yield self.finding(ctx, c.file, c.line, f"whole-model compile before `{w.call.split('(')[0]}(...)`, which shards block by block")
                    break
