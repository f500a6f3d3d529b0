"""MC101-MC104: does compile go through the kit, and is every exception documented?"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from model_compile.ledger.classify import is_graph_break_call, is_graph_break_decorator
from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.ledger.repo import KitFacts, RepoFacts
from model_compile.ledger.summary import code_shapes, fallback_doc, is_direct
from model_compile.parse.python import PyModule, unparse, walk
from model_compile.rules.base import NO_KIT, Example, Rule, call_subject, compile_events, orig_mod_effects, step_ref
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
# Each block's attention and MLP, compiled in place inside the block (and inside its gradient checkpoint).
PER_BLOCK_LOOP = (
    "    for layer in model.model.language_model.layers:\n"
    f"        layer.self_attn.compile({_COMPILE_KW})\n"
    f"        layer.mlp.compile({_COMPILE_KW})\n"
)
PER_BLOCK_BODY = replace_once(
    CANONICAL_BODY,
    _KIT_BLOCK,
    "    # model-compile: regional - attention and MLP of each block compile inside the gradient checkpoint\n"
    + PER_BLOCK_LOOP,
)


class CompileOutsideKit(Rule):
    id = "MC101"
    severity = "error"
    title = "compile outside the kit without a documented fallback"
    what = (
        "Flags a recipe-local `torch.compile` / `module.compile()` when no fallback is documented for it. In a "
        "repository without a model kit (no `apply_model_compile`), the message and fix say so and ask only for the note."
    )
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
        Example(body=PER_BLOCK_BODY, note="documented regional fallback on each block's attention and MLP"),
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
                kit = bool(ctx.repo.kit)
                yield self.finding(
                    ctx,
                    event.file,
                    event.line,
                    f"{step_ref(event)} compiles {event.target or 'the model'} "
                    + ("outside the kit" if kit else f"in the recipe ({NO_KIT})")
                    + " and no fallback is documented",
                    fix=None
                    if kit
                    else "document the fallback it is: `# model-compile: <kind> - <reason>` at the compile "
                    "(kind: submodule, graph-break, post-wrap or regional)",
                    subject=call_subject(event),
                )


class UndocumentedGraphBreak(Rule):
    id = "MC102"
    severity = "warning"
    title = "undocumented graph-break region"
    what = (
        "Flags `torch.compiler.disable` / `torch._dynamo.disable` in recipe code without a graph-break note. A reason "
        "written as a comment of a few words directly above the region, or above the `if` whose first statement it "
        "is, counts as documented (no blank line between; a commented-out statement is no reason)."
    )
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
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "if self.config.model.compile.enabled:\n"
                "    # The vision encoder computes data-dependent sequence lengths that dynamo\n"
                "    # cannot trace: run it eagerly.\n"
                "    if hasattr(model, 'model') and hasattr(model.model, 'visual'):\n"
                "        model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)\n",
            ),
            note="a prose reason right above the `if` that guards the region",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "# the tower calls .tolist() on grid sizes\n"
                "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)\n"
                "if self.config.model.compile.enabled:\n",
            ),
            note="a prose reason right above the region",
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
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "# the tower calls .tolist() on grid sizes\n\n"
                "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)  # <- MC102\n"
                "if self.config.model.compile.enabled:\n",
            ),
            note="the comment is separated from the region by a blank line",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "# model.model.visual.forward = model.model.visual.forward\n"
                "model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)  # <- MC102\n"
                "if self.config.model.compile.enabled:\n",
            ),
            note="a commented-out statement above is no reason",
        ),
        Example(
            body=replace_once(
                CANONICAL_BODY,
                "if self.config.model.compile.enabled:\n",
                "# Freeze the tower before anything else runs.\n"
                "if self.config.model.freeze_vit:\n"
                "    model.model.visual.requires_grad_(False)\n"
                "    model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)  # <- MC102\n"
                "if self.config.model.compile.enabled:\n",
            ),
            note="prose above the `if`, but about the statement before the region",
        ),
    ]

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        if ctx.readme_documents("graph-break"):
            return
        for path, mod in ctx.modules.items():
            if "disable" not in mod.text:
                continue
            heads = _statement_heads(mod.tree)
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
                if _prose_reason(mod, heads.get(line, [line])):
                    continue  # a reason written as a comment right above the region (or the `if` that guards it)
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
        "torch.compile(module) returns an OptimizedModule wrapper: every state_dict() key and parameter name gains "
        "an `_orig_mod.` prefix. What that breaks is read from the repository's code that saves and unwraps the "
        "model, and the message names it: checkpoints saved from `module.state_dict()` (the DDP path) carry the "
        'prefix, and unwrap helpers such as `getattr(model, "_orig_mod", model)` see it only as the outermost '
        "module; DCP's get_model_state_dict drops it. In-place `module.compile()` keeps names unchanged."
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
        for _, event, events in compile_events(ctx):
            if event.compile_style == "wrapper" and event.replaces_model:
                yield self.finding(
                    ctx,
                    event.file,
                    event.line,
                    f"{step_ref(event)} wraps {event.target or 'the module'} in an OptimizedModule: "
                    "state_dict keys and parameter names gain `_orig_mod.`; "
                    + orig_mod_effects(ctx.repo.key_readers, _before_wrap(event, events)),
                    fix=None if ctx.repo.kit else "compile in place: `module.compile(backend=..., mode=...)`",
                    subject=call_subject(event),
                )

    def check_kit(self, kit: KitFacts, repo: RepoFacts) -> Iterable[Finding]:
        if kit.in_place or kit.call_line is None:
            return
        yield self.kit_finding(
            kit,
            kit.call_line,
            f"{kit.class_name}.apply_model_compile does not compile in place (`{_short(kit.call)}`): state_dict keys "
            "and parameter names gain `_orig_mod.` in every recipe that calls it; "
            + orig_mod_effects(repo.key_readers, None),
            "use module.compile(backend=backend, mode=mode) inside the kit and return the module",
            what="",
        )


def _before_wrap(event: Event, events: list[Event]) -> bool:
    """A wrap of the same prepare_model() follows the compile (on a path that reaches it)."""
    i = events.index(event)
    return any(e.kind == "wrap" and e.reachable for e in events[i + 1 :])


def _short(call: str, limit: int = 80) -> str:
    return call if len(call) <= limit else call[: limit - 1] + "…"


class FallbackKindMismatch(Rule):
    id = "MC104"
    severity = "warning"
    title = "documented fallback does not match the code"
    what = "Flags a `# model-compile: <kind>` note whose kind does not describe the compile it sits on."
    why = "A note that says `regional` on a whole-model compile misleads reviewers and the report."
    example = "# model-compile: regional - per block\nmodel.compile(...)"
    use_instead = "Name the kind the code implements (submodule, graph-break, post-wrap, regional)."
    fix = "correct the kind in the comment, or change the code to match it"
    VALID = [
        Example(),
        Example(body=REGIONAL_BODY),
        Example(body=PER_BLOCK_BODY, note="regional: a submodule of each block is compiled"),
        Example(
            body=PER_BLOCK_BODY.replace("# model-compile: regional -", "# model-compile: submodule -"),
            note="submodule: the same code reads as each block's submodules",
        ),
    ]
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


def _statement_heads(tree: ast.Module) -> dict[int, list[int]]:
    """For each line that starts a statement: that line, then the first line of each enclosing block whose
    first statement it is (`if ...:` above a `forward = torch.compiler.disable(...)`), innermost first."""
    heads: dict[int, list[int]] = {}
    todo: list[tuple[ast.AST, list[int]]] = [(tree, [])]
    while todo:
        node, above = todo.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                if not isinstance(stmt, ast.AST) or not hasattr(stmt, "lineno"):
                    continue
                first = stmt.lineno - len(getattr(stmt, "decorator_list", []) or [])
                chain = [first, *above] if i == 0 and name == "body" and above else [first]
                heads.setdefault(stmt.lineno, chain)
                todo.append((stmt, chain if isinstance(stmt, _BLOCKS) else []))
    return heads


_BLOCKS = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)
MIN_PROSE_WORDS = 3


def _prose_reason(mod: PyModule, lines: list[int]) -> bool:
    """A comment of a few words directly above one of `lines` (no blank line between, not a code line)."""
    for line in lines:
        words = 0
        above = line - 1
        while above >= 1 and mod.lines[above - 1].lstrip().startswith("#"):
            text = mod.lines[above - 1].lstrip().lstrip("#").strip()
            if not _looks_like_code(text):
                words += len(text.split())
            above -= 1
        if words >= MIN_PROSE_WORDS:
            return True
    return False


def _looks_like_code(text: str) -> bool:
    """A commented-out statement (`# model.compile()`), not prose."""
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return bool(text) and not text.replace(" ", "").isalpha()
