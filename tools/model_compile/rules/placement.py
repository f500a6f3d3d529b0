"""MC301 and MC401-MC406: what is compiled, and where compile sits relative to the other steps
(distributed wrapping: rules/wrapping.py)."""

from __future__ import annotations

from collections.abc import Iterable

from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.rules.base import Example, Rule, call_subject, compile_events, exclusive, same_model, step_ref
from model_compile.rules.finding import Finding
from model_compile.rules.path import KIT_CALL, PER_BLOCK_BODY
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
    what = (
        "Flags compile applied to a copy, to a model rebuilt afterwards, or a torch.compile result that is thrown away. "
        "A second model the engine keeps (`self.teacher_model`, compiled in place or assigned back to itself) is not "
        "flagged; `self.model` is no such place (the engine sets it from what prepare_model() returns)."
    )
    why = "Training uses what prepare_model() returns; compiling anything else costs compile time and changes nothing."
    example = "eval_model = copy.deepcopy(model)\neval_model.compile()\nreturn parallelize_model(model, ...)"
    use_instead = "compile the module that prepare_model() returns (in place), before wrapping it"
    fix = "compile the model that prepare_model() returns"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                "self.ema_model = copy.deepcopy(model)\nif self.config.model.compile.enabled:",
            ),
            note="a copy is kept, the returned model is compiled",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                _RETURN,
                "self.teacher_model = copy.deepcopy(model)\n"
                "if self.config.model.compile.enabled:\n"
                "    self.teacher_model.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
                + _RETURN,
            ),
            note="a teacher kept on the engine for distillation, compiled in place beside the student",
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
                replace_once(
                    CANONICAL_BODY, _RETURN, "model = self.model_kit.build_model(self.config.model.path)\n" + _RETURN
                ),
                "apply_model_compile(",
                "MC301",
            ),
            note="model rebuilt after compile",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                _RETURN,
                "self.teacher_model = copy.deepcopy(model)\n"
                "if self.config.model.compile.enabled:\n"
                "    # model-compile: submodule - the teacher only\n"
                "    teacher = torch.compile(self.teacher_model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)  # <- MC301\n"
                + _RETURN,
            ),
            note="the teacher's compiled result goes to a local that nothing keeps (near miss of the kept teacher)",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                _RETURN,
                "if self.config.model.compile.enabled:\n"
                "    shadow = copy.deepcopy(model)\n"
                "    # model-compile: submodule - the copy only\n"
                "    self.model = torch.compile(shadow, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)  # <- MC301\n"
                + _RETURN,
            ),
            note="stored on self.model, which the engine overwrites with what prepare_model() returns",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for ledger in ctx.ledgers:
            for e in ledger.events:
                if e.kind != "compile" or not e.reachable:
                    continue
                if e.compile_style == "wrapper" and not e.replaces_model:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"the result of {step_ref(e)} is discarded: nothing is compiled",
                        subject=call_subject(e),
                    )
                elif (
                    ledger.returned_identity is not None
                    and e.model_identity is not None
                    and e.model_identity != ledger.returned_identity
                    and kept_on_engine(e) is None
                ):
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"{step_ref(e)} compiles {e.target}, which is not the model prepare_model() returns "
                        "(a copy, or the model was rebuilt afterwards)",
                        subject=call_subject(e),
                    )


def kept_on_engine(e: Event) -> str | None:
    """`self.teacher_model` when a compile's result stays on the engine as a second model (a distillation
    teacher, an EMA copy): compiled in place on that attribute, or its result assigned back to one. Not
    `self.model`: the engine sets that from what prepare_model() returns."""
    target = (e.target or "").removeprefix("each of ")
    holder = e.kept_as if e.compile_style == "wrapper" else target
    if holder is None or not holder.startswith("self.") or holder.split(".")[1] == "model":
        return None
    if e.compile_style == "wrapper" and e.kept_as != target:
        return None  # the result went somewhere else than the model it compiles
    return holder


class _AfterCompile(Rule):
    """Shared check: an event of `kinds` reached after compile on the same model."""

    kinds: tuple[str, ...] = ()
    noun = ""

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for idx, c, events in compile_events(ctx):
            for later in events[idx + 1 :]:
                if later.kind in self.kinds and later.reachable and not exclusive(c, later) and same_model(c, later):
                    yield self.finding(
                        ctx,
                        later.file,
                        later.line,
                        f"{self.noun} {step_ref(later)} runs after compile {step_ref(c, later.file)}",
                        subject=f"{call_subject(later)} after {call_subject(c)}",
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
                replace_once(
                    CANONICAL_BODY, "model = self.model_kit.apply_model_patches(model, [patch_attention])\n", ""
                ),
                _RETURN,
                "else:\n    model = self.model_kit.apply_model_patches(model, [patch_attention])\n" + _RETURN,
            ),
            note="eager-only patch in the else arm",
        ),
    ]
    INVALID = [
        Example(
            body=mark(
                _move_compile_before("model = self.model_kit.apply_model_patches"), "apply_model_patches", "MC401"
            )
        )
    ]


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
        Example(
            body=replace_once(replace_once(CANONICAL_BODY, _UPCAST, ""), _GATED_KIT, _UPCAST + _GATED_KIT),
            note="upcast right before compile",
        ),
    ]
    INVALID = [
        Example(
            body=mark(
                mark(
                    _move_compile_before("model = self.model_kit.apply_freeze_policy"), "apply_freeze_policy", "MC402"
                ),
                "parameter.data = parameter.data.to(",
                "MC402",
            ),
            note="freeze and upcast after compile",
        ),
        Example(
            body=mark(
                _move_compile_before("for parameter in model.parameters():"),
                "parameter.data = parameter.data.to(",
                "MC402",
            ),
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
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:",
                "if self.config.eval_only:\n    return model\nif self.config.model.compile.enabled:",
            ),
            note="early return in a branch before compile",
        ),
    ]
    INVALID = [Example(body=mark(_WITHOUT_COMPILE + _GATED_KIT, "apply_model_compile(", "MC405"))]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for ledger in ctx.ledgers:
            for e in ledger.events:
                if e.kind == "compile" and not e.reachable:
                    yield self.finding(
                        ctx,
                        e.file,
                        e.line,
                        f"compile {step_ref(e)} is never reached (it follows a `return`, or sits under a test that never holds): "
                        "the model trains eager",
                        subject=call_subject(e),
                    )


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
        Example(body=PER_BLOCK_BODY, note="attention and MLP of each block: two compiles, no module compiled twice"),
    ]
    INVALID = [
        Example(
            body=replace_once(
                PER_BLOCK_BODY,
                "mode=self.config.model.compile.mode)\nreturn parallelize_model(",
                "mode=self.config.model.compile.mode)\n"
                "        layer.compile(backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)"
                "  # <- MC406\nreturn parallelize_model(",
            ),
            note="each block compiled, and its attention inside it again",
        ),
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
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        seen = compile_events(ctx)
        for i, (_, a, _) in enumerate(seen):
            for _, b, _ in seen[i + 1 :]:
                if exclusive(a, b) or not same_model(a, b):
                    continue
                if _overlap(a.target or "", b.target or ""):
                    yield self.finding(
                        ctx,
                        b.file,
                        b.line,
                        f"{step_ref(b)} compiles again what {step_ref(a, b.file)} already compiles",
                        subject=f"{call_subject(b)} after {call_subject(a)}",
                    )


def _overlap(a: str, b: str) -> bool:
    a, b = a.removeprefix("each of "), b.removeprefix("each of ")
    return a == b or b.startswith(a + ".") or a.startswith(b + ".") or not a or not b
