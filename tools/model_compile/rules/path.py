"""MC101-MC104: does compile go through the kit, and is every exception documented?"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from model_compile.ledger.classify import is_graph_break_call, is_graph_break_decorator
from model_compile.ledger.recipe import RecipeContext
from model_compile.ledger.summary import code_shapes, fallback_doc, is_direct
from model_compile.parse.python import unparse, walk
from model_compile.rules.base import Example, Rule, call_subject, compile_events, step_ref
from model_compile.rules.finding import Finding
from model_compile.rules.scaffold import CANONICAL_BODY, mark, replace_once
from model_compile.vocabulary import FALLBACK_KINDS

KIT_CALL = "self.model_kit.apply_model_compile(\n    model,\n    backend=self.config.model.compile.backend,\n    mode=self.config.model.compile.mode,\n)"
_COMPILE_KW = "backend=self.config.model.compile.backend, mode=self.config.model.compile.mode"
_KIT_BLOCK = "    model = " + KIT_CALL.replace("\n", "\n    ") + "\n"
_REGIONAL_LOOP = f"    for layer in model.model.language_model.layers:\n        layer.compile({_COMPILE_KW})\n"
REGIONAL_BODY = replace_once(
    CANONICAL_BODY,
    _KIT_BLOCK,
    "    # model-compile: regional - compile each decoder layer; the vision tower breaks graphs\n" + _REGIONAL_LOOP,
)
DIRECT_BODY = replace_once(CANONICAL_BODY, _KIT_BLOCK, _REGIONAL_LOOP)


class CompileOutsideKit(Rule):
    id = "MC101"
    severity = "error"
    title = "compile outside the kit without a documented fallback"
    what = "Flags a recipe-local `torch.compile` / `module.compile()` when no fallback is documented for it."
    why = (
        "The kit's apply_model_compile() is the one place that knows the model family's graph-break "
        "regions and compiles in place; recipe-local compile drifts from it. Exceptions (submodule scope, "
        "special graph breaks, a wrapper forcing another placement, regional compile) must say why."
    )
    example = "if self.config.model.compile.enabled:\n    model.compile(backend=cfg.backend, mode=cfg.mode)"
    use_instead = (
        "model = self.model_kit.apply_model_compile(model, backend=..., mode=...), or document the fallback:\n"
        "# model-compile: submodule - only the language model is on the hot path"
    )
    fix = "use self.model_kit.apply_model_compile(...), or document it: `# model-compile: <kind> - <reason>`"
    VALID = [
        Example(),
        Example(body=REGIONAL_BODY, note="documented regional fallback"),
        Example(
            body=DIRECT_BODY,
            readme="# Example\n\n## Compile\n\nWe use regional compilation: each decoder layer is compiled "
            "because whole-model compile recompiles on every image size.\n",
            note="documented in the README",
        ),
    ]
    INVALID = [Example(body=mark(DIRECT_BODY, "layer.compile(", "MC101"))]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for _, event, _ in compile_events(ctx):
            if is_direct(event) and fallback_doc(ctx, event) is None:
                yield self.finding(
                    ctx,
                    event.file,
                    event.line,
                    f"{step_ref(event)} compiles {event.target or 'the model'} outside the kit and no fallback is documented",
                    subject=call_subject(event),
                )


class UndocumentedGraphBreak(Rule):
    id = "MC102"
    severity = "warning"
    title = "undocumented graph-break region"
    what = "Flags `torch.compiler.disable` / `torch._dynamo.disable` in recipe code without a graph-break note."
    why = (
        "A disabled region runs eager inside a compiled model: it is a deliberate graph break that "
        "costs speed and hides code from the compiler. Reviewers need to know why it is there."
    )
    example = "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)"
    use_instead = (
        "# model-compile: graph-break - the vision tower calls .tolist() on grid sizes\n"
        "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)"
    )
    fix = "add `# model-compile: graph-break - <reason>` above it, or a README Compile section"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "# model-compile: graph-break - the vision tower calls .tolist() on grid sizes\n"
                "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)\n"
                "if self.config.model.compile.enabled:\n",
            )
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)\n"
                "if self.config.model.compile.enabled:\n",
            ),
            readme="# Example\n\n## Compile\n\nThe vision tower is a graph-break region: it calls .tolist() on the image grid sizes.\n",
            note="documented in the README",
        ),
    ]
    INVALID = [
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)  # <- MC102\n"
                "if self.config.model.compile.enabled:\n",
            )
        ),
        Example(
            files={
                "model/vision.py": "import torch\n\n\n@torch.compiler.disable  # <- MC102\ndef rot_pos_emb(grid):\n    return grid.tolist()\n"
            },
            note="decorator in recipe model code",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        if ctx.readme_documents("graph-break"):
            return
        for path, mod in ctx.modules.items():
            if "disable" not in mod.text:
                continue
            for node in walk(mod.tree):
                line = None
                if isinstance(node, ast.Call):
                    if is_graph_break_call(node):
                        line = node.lineno
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for dec in node.decorator_list:
                        if is_graph_break_decorator(dec):
                            line = dec.lineno
                if line is None:
                    continue
                if ctx.documented("graph-break", path, line):
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if ctx.documented("graph-break", path, node.lineno):
                        continue
                yield self.finding(
                    ctx,
                    path,
                    line,
                    f"graph-break region `{mod.line(line)}` has no documented reason",
                    subject=f"graph-break {_region(node)}",
                )


class TorchCompileWrapper(Rule):
    id = "MC103"
    severity = "error"
    title = "torch.compile wrapper replaces the model"
    what = "Flags `x = torch.compile(module)` whose result is kept as the model or stored into it."
    why = (
        "torch.compile(module) returns an OptimizedModule wrapper: every state_dict() key and parameter "
        "name gains an `_orig_mod.` prefix, so checkpoints stop loading and FSDP auto-wrap no longer "
        "sees the block classes. In-place `module.compile()` keeps names unchanged."
    )
    example = "model = torch.compile(model, backend=cfg.backend, mode=cfg.mode)"
    use_instead = "model.compile(backend=cfg.backend, mode=cfg.mode)  # in place, keys unchanged"
    fix = "compile in place: `module.compile(backend=..., mode=...)` (or the kit's apply_model_compile)"
    VALID = [
        Example(),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                KIT_CALL.replace("\n", "\n    "),
                "model\n    # model-compile: submodule - forward only\n"
                "    model.forward = torch.compile(model.forward, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)",
            ),
            note="compiling a bound forward keeps keys",
        ),
    ]
    INVALID = [
        Example(
            body=replace_once(
                CANONICAL_BODY,
                KIT_CALL.replace("\n", "\n    "),
                "torch.compile(model, backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)  # <- MC103\n"
                "    # model-compile: submodule - placeholder",
            )
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "    model = " + KIT_CALL.replace("\n", "\n    "),
                "    # model-compile: regional - per layer\n"
                "    for i, layer in enumerate(model.model.language_model.layers):\n"
                "        model.model.language_model.layers[i] = torch.compile(layer, "
                "backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)  # <- MC103",
            ),
            note="per-layer wrapper stored into the model",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for _, event, _ in compile_events(ctx):
            if event.compile_style == "wrapper" and event.replaces_model:
                yield self.finding(
                    ctx,
                    event.file,
                    event.line,
                    f"{step_ref(event)} wraps {event.target or 'the module'} in an OptimizedModule: "
                    "state_dict keys and parameter names gain `_orig_mod.`",
                    subject=call_subject(event),
                )


class FallbackKindMismatch(Rule):
    id = "MC104"
    severity = "warning"
    title = "documented fallback does not match the code"
    what = "Flags a `# model-compile: <kind>` note whose kind does not describe the compile it sits on."
    why = "A note that says `regional` on a whole-model compile misleads reviewers and the report."
    example = "# model-compile: regional - per block\nmodel.compile(...)"
    use_instead = "Name the kind the code implements (submodule, graph-break, post-wrap, regional)."
    fix = "correct the kind in the comment, or change the code to match it"
    VALID = [Example(), Example(body=REGIONAL_BODY)]
    INVALID = [
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "    model = " + KIT_CALL.replace("\n", "\n    "),
                f"    # model-compile: regional - per block  # <- MC104\n    model.compile({_COMPILE_KW})",
            )
        )
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        for _, event, _ in compile_events(ctx):
            if not is_direct(event):
                continue
            for kind in FALLBACK_KINDS:
                doc = ctx.documented(kind, event.file, event.line)
                if doc is None:
                    continue
                shapes = code_shapes(ctx, event)
                if kind not in shapes:
                    seen = ", ".join(sorted(shapes)) or "whole-model compile"
                    yield self.finding(
                        ctx,
                        doc.file,
                        doc.line,
                        f"documented as `{kind}` but the code looks like: {seen}",
                        subject=f"{kind} note on {call_subject(event)}",
                    )
                break


def _region(node: ast.AST) -> str:
    """What a graph-break call or decorated function disables, for the finding's subject."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name
    if isinstance(node, ast.Call) and node.args:
        return unparse(node.args[0])
    return unparse(node)[:80]
