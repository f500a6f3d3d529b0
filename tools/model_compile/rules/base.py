"""Rules as self-testing units (after Fixit): each rule class carries its id,
severity, documentation (what / why / example / use instead) and VALID and
INVALID recipes that run as its tests."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from model_compile.ledger.models import Event
from model_compile.ledger.recipe import RecipeContext
from model_compile.ledger.repo import KeyReader, KitFacts, RepoFacts
from model_compile.parse.documentation import yaml_lines
from model_compile.parse.python import unparse
from model_compile.rules.finding import Finding, Severity


@dataclass
class Example:
    """A recipe for a rule's tests: `prepare_model` body plus optional files.

    Missing parts come from a canonical kit recipe (see rules/scaffold.py).

    An INVALID example marks each line its rule must flag with a trailing
    `  # <- MC404` (the rule's id) in its own text - body, engine, schema, a
    stage, README or any file - and the test requires the rule's findings to be
    exactly those lines, in those files:

        body=CANONICAL_BODY + "model.compile()  # <- MC405\n"
        body=mark(body, "apply_model_patches", "MC401")  # for a shared line

    The marker is stripped before the rule sees the text, so line numbers are
    counted in the text as written and cannot drift from it. VALID examples
    carry no markers.
    """

    body: str | None = None
    engine: str | None = None  # a whole engine file instead of a body
    init: str | None = None  # extra __init__ lines
    schema: str | None = None
    stages: dict[str, str] | None = None
    readme: str | None = None
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # bytes: e.g. a file that is not UTF-8 ("/x": x
    # at the repository root)
    note: str = ""
    severity: Severity | None = None  # an INVALID example's findings' severity where the stage decides it


class Rule:
    """Base class: subclasses set the class attributes and implement check()."""

    id: ClassVar[str]
    severity: ClassVar[Severity]
    title: ClassVar[str]
    what: ClassVar[str]
    why: ClassVar[str]
    example: ClassVar[str]
    use_instead: ClassVar[str]
    fix: ClassVar[str]
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []
    # its findings say what a stage will do (compile that does nothing on the hot path, a test that cannot pass):
    # listed first among findings of their severity
    leads: ClassVar[bool] = False
    # the rule whose finding already says this one's root: where it reports on the same recipe, this rule's
    # findings are dropped there (one defect, one finding); it says what this one would have added
    same_root: ClassVar[str | None] = None

    def check(self, ctx: RecipeContext) -> Iterable[Finding]:
        """The rule's findings on one recipe."""
        raise NotImplementedError

    def check_kit(self, kit: KitFacts, repo: RepoFacts) -> Iterable[Finding]:
        """The rule's findings on the shared kit's apply_model_compile (once per repository, not per recipe)."""
        return ()

    def kit_finding(self, kit: KitFacts, line: int, message: str, fix: str | None = None, *, what: str) -> Finding:
        """A finding of this rule in the kit; its subject starts with `kit <Class>.apply_model_compile`, which
        ties it to the recipes that call that class."""
        return Finding(
            rule=self.id,
            severity=self.severity,
            file=kit.file,
            line=line,
            message=message,
            fix=fix or self.fix,
            code=kit.call,
            subject=f"{kit_subject(kit.class_name)} {what}".rstrip(),
        )

    def finding(
        self,
        ctx: RecipeContext,
        file: str,
        line: int,
        message: str,
        fix: str | None = None,
        *,
        subject: str,
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of this rule; `subject` names what it is about (a field, call or stage), not where.
        `severity`: where what the stage does decides it (the rule's own severity otherwise)."""
        code = _source_line(ctx, file, line)
        return Finding(
            rule=self.id,
            severity=severity or self.severity,
            file=file,
            line=line,
            message=message,
            fix=fix or self.fix,
            recipe=ctx.loc.name,
            code=code,
            subject=subject,
        )


def kit_subject(class_name: str) -> str:
    """The subject prefix of a kit finding: `kit MLLMModelKit.apply_model_compile`."""
    return f"kit {class_name}.apply_model_compile"


def _source_line(ctx: RecipeContext, file: str, line: int) -> str:
    """The text of `file:line` in the recipe, each kind of file split into lines as it numbers them."""
    mod = ctx.modules.get(file)
    if mod:
        return mod.line(line)
    if file in ctx.stage_texts:
        lines = yaml_lines(ctx.stage_texts[file])
    elif file.endswith("README.md") and ctx.readme:
        lines = ctx.readme.splitlines()
    else:
        return ""
    return lines[line - 1].strip() if 1 <= line <= len(lines) else ""


# -- shared predicates -----------------------------------------------------

NO_KIT = "this repository has no model kit with apply_model_compile"


def generate_hint(ctx: RecipeContext) -> str:
    """The `generate` command that adds compile to this recipe, naming only what the repository has."""
    path = ctx.loc.display_path
    if ctx.repo.kit:
        return f"model-compile generate {path} --path kit"
    return f'model-compile generate {path} --path regional|submodule|graph-break|post-wrap --reason "..." ({NO_KIT})'


ENABLED_KEY = "model.compile.enabled"


@functools.lru_cache(maxsize=64)
def _key_re(key: str) -> re.Pattern[str]:
    return re.compile(r"(^|\.)" + re.escape(key) + "$")


@functools.lru_cache(maxsize=4096)
def _conjuncts(condition: str) -> tuple[ast.expr, ...]:
    """The `and`-ed parts of a gating condition (cached: recipes repeat the same few conditions)."""
    try:
        expr = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return ()
    out: list[ast.expr] = []
    todo = [expr]  # a stack, not a recursive closure (that would be a reference cycle)
    while todo:
        e = todo.pop()
        if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.And):
            todo.extend(reversed(e.values))
        else:
            out.append(e)
    return tuple(out)


def _switch_ref(e: ast.expr, key: str) -> bool:
    """`e` reads the switch `key` (`model.compile.enabled`; `model.compile` in the flat form): as an attribute
    chain, through bool(), or as `getattr(<...>.model.compile, "enabled", ...)`."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "bool" and e.args:
        e = e.args[0]
    parent, _, last = key.rpartition(".")
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr" and len(e.args) >= 2:
        if isinstance(e.args[1], ast.Constant) and e.args[1].value == last:
            return bool(_key_re(parent).search(unparse(e.args[0])))
    return isinstance(e, (ast.Attribute, ast.Name)) and bool(_key_re(key).search(unparse(e)))


def gate_state(event: Event, key: str = ENABLED_KEY) -> str:
    """'gated' (by the switch `key`), 'inverted', or 'ungated'."""
    state = "ungated"
    for cond in event.condition:
        for c in _conjuncts(cond):
            if _switch_ref(c, key):
                state = "gated" if state != "inverted" else state
            elif isinstance(c, ast.UnaryOp) and isinstance(c.op, ast.Not) and _switch_ref(c.operand, key):
                return "inverted"
            elif isinstance(c, ast.Compare) and len(c.ops) == 1 and _switch_ref(c.left, key):
                right = c.comparators[0]
                if isinstance(right, ast.Constant) and isinstance(c.ops[0], (ast.Is, ast.Eq)):
                    if right.value is True:
                        state = "gated"
                    elif right.value is False:
                        return "inverted"
                if isinstance(right, ast.Constant) and isinstance(c.ops[0], (ast.IsNot, ast.NotEq)):
                    if right.value is False:
                        state = "gated"
                    elif right.value is True:
                        return "inverted"
    return state


def exclusive(a: Event, b: Event) -> bool:
    """True when the two events sit in different arms of the same `if`."""
    arms = {br.node: br.arm for br in a.branches if br.arm != "loop"}
    return any(br.node in arms and arms[br.node] != br.arm for br in b.branches if br.arm != "loop")


def same_model(a: Event, b: Event) -> bool:
    """Unknown identities are assumed to be the same model (conservative)."""
    return a.model_identity is None or b.model_identity is None or a.model_identity == b.model_identity


_CALLEE_RE = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def call_subject(event: Event) -> str:
    """A compile (or other) call named by its callee and target: stable when arguments or lines change."""
    call = re.sub(r"^\s*(return\s+|[\w.\[\]'\"]+(\s*,\s*[\w.]+)*\s*=(?!=)\s*)", "", event.call or "")
    m = _CALLEE_RE.search(call)
    callee = m.group(1).rsplit(".", 1)[-1] if m else event.kind
    if callee in ("compile", "disable") and m:
        callee = m.group(1)
    return f"{event.kind} {callee}" + (f" {event.target}" if event.target else "")


_LEAD_RE = re.compile(r"^\s*(return\s+|(?:[\w.\[\]'\"]+(?:\s*,\s*[\w.]+)*)\s*=(?!=)\s*)")


def short_call(event: Event) -> str:
    """How a finding names a step: its callee, `apply_gradient_checkpointing(...)`, `model.compile(...)`,
    `torch.compile(...)` (a `self.` kit or method call by its last name); an assignment by its target."""
    text = event.call or event.kind
    rest = _LEAD_RE.sub("", text, count=1)
    m = _CALLEE_RE.match(rest.lstrip())
    if m:
        callee = m.group(1)
        if callee.startswith("self."):
            callee = callee.rsplit(".", 1)[-1]
        return f"{callee}(...)"
    first = text.strip().splitlines()[0] if text.strip() else event.kind
    if len(first) <= 60:
        return first
    lhs, eq, _ = first.partition(" = ")
    return f"{lhs} = ..." if eq else first[:57] + "..."


def line_ref(event: Event, in_file: str | None = None) -> str:
    """`L190`; `path:190` when the step sits in another file than the finding's."""
    return f"L{event.line}" if in_file is None or event.file == in_file else f"{event.file}:{event.line}"


def step_ref(event: Event, in_file: str | None = None) -> str:
    """`apply_gradient_checkpointing(...)` (L190)`, for a message."""
    return f"`{short_call(event)}` ({line_ref(event, in_file)})"


def compile_events(ctx: RecipeContext, reachable: bool = True) -> tuple[tuple[int, Event, list[Event]], ...]:
    """(index, compile event, all events of its ledger); computed once per recipe (a dozen rules ask)."""
    key = ("compile_events", reachable)
    if key not in ctx.memo:
        ctx.memo[key] = tuple(
            (i, e, ledger.events)
            for ledger in ctx.ledgers
            for i, e in enumerate(ledger.events)
            if e.kind == "compile" and (e.reachable or not reachable)
        )
    return ctx.memo[key]  # type: ignore[return-value]


def _where(readers: list[KeyReader]) -> str:
    first = readers[0]
    more = f", +{len(readers) - 1} more" if len(readers) > 1 else ""
    return f"{first.file}:{first.line}{more}"


def orig_mod_effects(readers: list[KeyReader], before_wrap: bool | None) -> str:
    """What an OptimizedModule's `_orig_mod.` prefix breaks in this repository, read from the code that saves and
    unwraps the model (`before_wrap`: the compile sits before the distributed wrap; None: it depends on the recipe)."""
    saves = [r for r in readers if r.kind == "module-save"]
    unwraps = [r for r in readers if r.kind == "unwrap"]
    dcp = [r for r in readers if r.kind == "dcp"]
    parts: list[str] = []
    if before_wrap is not False:
        if saves:
            parts.append(
                f"checkpoints saved from the wrapped module's `.module.state_dict()` ({_where(saves)}) carry those keys"
            )
        if unwraps:
            parts.append(
                f'`getattr(model, "_orig_mod", model)` ({_where(unwraps)}) unwraps it only as the outermost module, '
                "not inside the DDP/FSDP2 wrapper it is put under"
            )
        if parts and before_wrap is None:
            parts[0] = "where a recipe compiles before its distributed wrap (the kit's placement), " + parts[0]
    elif unwraps:
        parts.append(f'`getattr(model, "_orig_mod", model)` ({_where(unwraps)}) unwraps it (compiled after the wrap)')
    if dcp:
        parts.append(f"get_model_state_dict ({_where(dcp)}) drops the prefix, so its checkpoints keep their keys")
    if not parts:
        return "no code of the repository that saves or unwraps the model was found to say what reads those names"
    return "; ".join(parts)
