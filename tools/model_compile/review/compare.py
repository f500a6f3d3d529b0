"""Compare two analyses of the same recipe: ledger, config, findings."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from model_compile.findings.models import RecipeReport
from model_compile.ledger.compiled_scope import scope_changes
from model_compile.ledger.models import Event, Ledger
from model_compile.ledger.repo import KitFacts
from model_compile.review.models import (
    DiffFinding,
    EventView,
    LedgerView,
    Side,
    ValueChange,
)
from model_compile.rules.finding import SEVERITY_ORDER, Finding

COMPILE_FIELDS = ("enabled", "backend", "mode")
NEAR = 3  # lines: a finding this close to a changed line is "near the change"
MOVED = 20  # lines: a compile call this close to a gone one, in the same file, is where it moved to
# Steps whose order relative to compile matters.
_ORDERED_KINDS = ("build", "patch", "freeze", "upcast", "checkpointing", "graph_break", "wrap")
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def step_name(event: Event) -> str:
    """Short name of an event: the callee (`parallelize_model`), else its kind."""
    call = re.sub(r"^\s*(return\s+|[\w.\[\]'\"]+(\s*,\s*[\w.]+)*\s*=(?!=)\s*)", "", event.call or "")
    m = _CALL.search(call)
    if m:
        name = m.group(1).rsplit(".", 1)[-1]
        if name not in ("compile", "disable"):
            return f"{name} ({event.kind})"
        return f"{m.group(1)} ({event.kind})"
    return event.kind


def side_view(report: RecipeReport | None) -> Side | None:
    if report is None:
        return None
    return Side(
        compile_path=report.compile_path,
        compiled_target=list(report.compiled_target),
        scope=report.scope.summary,
        placement=report.placement,
        ledger=[
            LedgerView(
                engine_class=lg.engine_class,
                file=lg.file,
                events=[
                    EventView(
                        kind=e.kind, line=e.line, call=e.call, target=e.target, condition=list(e.condition), file=e.file
                    )
                    for e in lg.events
                ],
            )
            for lg in report.ledger
        ],
    )


def _pair_ledgers(
    before: RecipeReport, after: RecipeReport
) -> tuple[list[tuple[Ledger, Ledger]], list[Ledger], list[Ledger]]:
    b = {lg.engine_class: lg for lg in before.ledger}
    a = {lg.engine_class: lg for lg in after.ledger}
    pairs = [(b[k], a[k]) for k in b if k in a]
    rest_b = [lg for k, lg in b.items() if k not in a]
    rest_a = [lg for k, lg in a.items() if k not in b]
    if len(rest_b) == 1 and len(rest_a) == 1:  # class renamed with its recipe
        pairs.append((rest_b[0], rest_a[0]))
        rest_b, rest_a = [], []
    return pairs, rest_b, rest_a


def _placement(text: str) -> str:
    """Placement without its `Engine.prepare_model:` prefix (a renamed class is no move)."""
    head, sep, rest = text.partition(": ")
    return rest if sep and "." in head else text


def _cond(conds: list[str]) -> str:
    return " and ".join(conds) if conds else "always"


def _order_changes(before_events: list[Event], after_events: list[Event], bc: Event, ac: Event) -> list[str]:
    """Which steps moved from one side of compile to the other."""
    bi, ai = before_events.index(bc), after_events.index(ac)
    before_names = {step_name(e): i < bi for i, e in enumerate(before_events) if e.kind in _ORDERED_KINDS}
    after_names = {step_name(e): i < ai for i, e in enumerate(after_events) if e.kind in _ORDERED_KINDS}
    out = []
    for name, was_before in before_names.items():
        if name in after_names and after_names[name] != was_before:
            out.append(f"compile moved: now {'after' if after_names[name] else 'before'} {name}")
    return out


def ledger_changes(
    before: RecipeReport, after: RecipeReport, modules: Callable[[], tuple[list[str], str] | None] | None = None
) -> list[str]:
    """What changed in the compile wiring, one line per change (per-call lines win over the summary's); `modules`
    reads the model's own modules outside the head side's compiled parts, asked only when the scope changed."""
    out: list[str] = []
    path_changed = before.compile_path != after.compile_path
    if path_changed:
        out.append(f"compile path changed: {before.compile_path} -> {after.compile_path}")
    per_call = _per_call_changes(before, after, path_changed)
    covered = any(
        kind in c for c in per_call for kind in ("compile target changed:", "compile added:", "compile removed:")
    )
    if sorted(before.compiled_target) != sorted(after.compiled_target) and not covered:
        out.append(
            f"compile target changed: {', '.join(before.compiled_target) or 'nothing'}"
            f" -> {', '.join(after.compiled_target) or 'nothing'}"
        )
    changed = scope_changes(before.scope, after.scope)
    if changed and modules is not None and any(c.startswith("moved to eager: what ") for c in changed):
        changed = scope_changes(before.scope, after.scope, modules())
    out.extend(changed)
    out.extend(per_call)
    if not out and _placement(before.placement) != _placement(after.placement) and after.placement:
        out.append(f"placement: {before.placement or '?'} -> {after.placement}")
    return out


def _per_call_changes(before: RecipeReport, after: RecipeReport, path_changed: bool) -> list[str]:
    out: list[str] = []
    pairs, gone, new = _pair_ledgers(before, after)
    for lg in gone:
        out.append(f"engine {lg.engine_class}: prepare_model no longer found")
    for lg in new:
        out.append(f"engine {lg.engine_class}: new prepare_model ({len(lg.of('compile'))} compile call(s))")
    for lb, la in pairs:
        prefix = "" if len(pairs) == 1 else f"{la.engine_class}: "
        bcs, acs = lb.of("compile"), la.of("compile")
        for e in acs[len(bcs) :]:
            out.append(f"{prefix}compile added: `{e.call}` (line {e.line}, when {_cond(e.condition)})")
        for e in bcs[len(acs) :]:
            out.append(f"{prefix}compile removed: `{e.call}` (was line {e.line})")
        for bc, ac in zip(bcs, acs, strict=False):
            for msg in _order_changes(lb.events, la.events, bc, ac):
                out.append(prefix + msg)
            if bc.target != ac.target:
                out.append(f"{prefix}compile target changed: {bc.target or '?'} -> {ac.target or '?'}")
            if bc.condition != ac.condition:
                out.append(f"{prefix}compile gate changed: {_cond(bc.condition)} -> {_cond(ac.condition)}")
            if bc.compile_style != ac.compile_style and not path_changed:
                out.append(f"{prefix}compile style changed: {bc.compile_style} -> {ac.compile_style}")
            for key in sorted(set(bc.arguments) | set(ac.arguments)):
                if bc.arguments.get(key) != ac.arguments.get(key):
                    out.append(
                        f"{prefix}compile argument {key}: {bc.arguments.get(key, '(unset)')} -> {ac.arguments.get(key, '(unset)')}"
                    )
            if bc.reachable != ac.reachable:
                out.append(f"{prefix}compile {'now reachable' if ac.reachable else 'no longer reachable'}")
        # Steps added or removed around compile (wrapping, checkpointing, ...).
        bn = Counter(step_name(e) for e in lb.events if e.kind in _ORDERED_KINDS)
        an = Counter(step_name(e) for e in la.events if e.kind in _ORDERED_KINDS)
        for name in sorted(an - bn):
            out.append(f"{prefix}step added: {name}")
        for name in sorted(bn - an):
            out.append(f"{prefix}step removed: {name}")
    return out


def config_changes(before: RecipeReport, after: RecipeReport, path_map: dict[str, str]) -> list[ValueChange]:
    out: list[ValueChange] = []
    bf, af = before.config.schema_.fields, after.config.schema_.fields
    for key in COMPILE_FIELDS:
        b, a = bf.get(key), af.get(key)
        bp, ap = bool(b and b.present), bool(a and a.present)
        bv = (b.default if b.default is not None else b.default_text) if bp and b is not None else None
        av = (a.default if a.default is not None else a.default_text) if ap and a is not None else None
        if bp != ap or bv != av:
            out.append(
                ValueChange(
                    where="schema",
                    field=key,
                    before=bv if bp else "(absent)",
                    after=av if ap else "(absent)",
                    effect=_dead_default(after, key),
                )
            )
    bstages = {path_map.get(s.file, s.file): s for s in before.config.stages}
    astages = {s.file: s for s in after.config.stages}
    for file in sorted(set(bstages) | set(astages)):
        sb, sa = bstages.get(file), astages.get(file)
        if sb is None or sa is None:
            out.append(
                ValueChange(
                    where=file,
                    field="(stage)",
                    before="present" if sb else "(absent)",
                    after="present" if sa else "(absent)",
                )
            )
            continue
        for key in COMPILE_FIELDS:
            bv = sb.values.get(key, "(unset)")
            av = sa.values.get(key, "(unset)")
            if bv != av:
                out.append(ValueChange(where=file, field=key, before=bv, after=av))
    return out


def _dead_default(report: RecipeReport, key: str) -> str | None:
    """Why a schema default change does nothing: every stage YAML sets the field itself."""
    stages = report.config.stages
    if stages and all(key in s.values for s in stages):
        return f"no effect at run time: every stage YAML sets {key} ({', '.join(s.name for s in stages)})"
    return None


def remap(f: Finding, recipe_map: dict[str, str], path_map: dict[str, str]) -> Finding:
    """A base-side finding as it would be named on the head side (renames)."""
    update = {}
    if f.recipe and f.recipe in recipe_map:
        update["recipe"] = recipe_map[f.recipe]
    if f.file in path_map:
        update["file"] = path_map[f.file]
    return f.model_copy(update=update) if update else f


def split_findings(
    base: list[Finding],
    head: list[Finding],
    recipe_map: dict[str, str],
    path_map: dict[str, str],
    changed_lines: dict[str, set[int]],
) -> tuple[list[DiffFinding], list[DiffFinding], list[DiffFinding], list[DiffFinding]]:
    """(new, fixed, superseded, unchanged), matched by fingerprint (rule, recipe, file, subject) as a multiset.

    Findings suppressed by an ignore comment take no part. A base finding that
    disappears while a new finding of a rule at least as severe lands on the
    same subject (the same compile call, field or stage) is superseded, not fixed. A finding whose
    subject keeps what it is about but changes its scope (`... | <stages or value>`: compile turned on
    in a stage that shards, a default changed) is new on the head side and supersedes its base self.
    """
    base = [f for f in base if f.suppressed is None]
    head = [f for f in head if f.suppressed is None]
    pool = Counter(remap(f, recipe_map, path_map).fingerprint for f in base)
    new, unchanged = [], []
    for f in head:
        lines = changed_lines.get(f.file, ())
        on = f.line in lines
        near = on or any(abs(f.line - n) <= NEAR for n in lines)
        df = DiffFinding(**f.model_dump(), side="head", on_changed_line=on, near_change=near)
        if pool[f.fingerprint] > 0:
            pool[f.fingerprint] -= 1
            unchanged.append(df)
        else:
            new.append(df)
    head_pool = Counter(f.fingerprint for f in head)
    fixed, superseded = [], []
    for f in base:
        fp = remap(f, recipe_map, path_map).fingerprint
        if head_pool[fp] > 0:
            head_pool[fp] -= 1
            continue
        df = DiffFinding(**f.model_dump(), side="base", on_changed_line=False)
        by = _stronger(remap(f, recipe_map, path_map), new, head)
        if by is not None:
            superseded.append(df.model_copy(update={"superseded_by": by.rule}))
        else:
            fixed.append(df)

    def key(f: DiffFinding) -> tuple[bool, bool, int, str, int, str]:
        return (not f.on_changed_line, not f.near_change, SEVERITY_ORDER.get(f.severity, 9), f.file, f.line, f.rule)

    return sorted(new, key=key), sorted(fixed, key=key), sorted(superseded, key=key), sorted(unchanged, key=key)


def subject_scope(subject: str) -> tuple[str, str]:
    """(what, scope) of a subject: `compile apply_model_compile model | FSDP2 in stage2; compile on in stage2`.

    The scope is what the finding applies to (its stages, its value); part of the
    fingerprint, so a change of scope makes the head finding new.
    """
    what, _, scope = subject.partition(" | ")
    return what, scope


def _subject_key(subject: str) -> str:
    """A call subject (`compile apply_model_compile model`) keyed by kind and callee: the target may be renamed."""
    head = subject_scope(subject)[0].split(" after ")[0]
    parts = head.split()
    return " ".join(parts[:2]) if parts and parts[0] == "compile" else head


def _stronger(gone: Finding, new: list[DiffFinding], head: list[Finding]) -> DiffFinding | None:
    """A new finding of another rule, at least as severe, on the same recipe and subject; or of the
    same rule on the same subject with another scope (it now applies to other stages or values); or, where the
    compile call it was about has no finding left on the head side, on a compile call within MOVED lines of the
    same file (the compile moved: the kit call became a `torch.compile` wrapper after the wrap, say)."""
    if not gone.subject:
        return None
    what, _ = subject_scope(gone.subject)
    for f in new:
        if f.rule == gone.rule and f.recipe == gone.recipe and f.subject and f.subject != gone.subject:
            if subject_scope(f.subject)[0] == what:
                return f
    key = _subject_key(gone.subject)
    by = _as_severe(gone, new, lambda f: _subject_key(f.subject or "") == key)
    if by is not None:
        return by
    # The same rule, new at the same place of the same file (its subject changed with the code it is about, e.g.
    # the kit call became `torch.compile`): the finding is still there, so it is not fixed.
    for f in new:
        if f.rule == gone.rule and f.recipe == gone.recipe and f.file == gone.file and abs(f.line - gone.line) <= NEAR:
            return f
    if not _is_compile(gone.subject) or any(
        f.subject and _subject_key(f.subject) == key and f.recipe == gone.recipe for f in head
    ):
        return None
    return _as_severe(
        gone, new, lambda f: f.file == gone.file and abs(f.line - gone.line) <= MOVED and _is_compile(f.subject)
    )


def _as_severe(gone: Finding, new: list[DiffFinding], where: Callable[[DiffFinding], bool]) -> DiffFinding | None:
    """The first new finding of another rule of the same recipe, at least as severe, with a subject, `where` it
    holds: most severe first; among equals, the same rule family (MC4xx placement for MC407) names the cause best."""
    family = gone.rule[:3]
    for f in sorted(new, key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), f.rule[:3] != family, f.rule)):
        if (
            f.rule != gone.rule
            and f.recipe == gone.recipe
            and f.subject
            and SEVERITY_ORDER.get(f.severity, 9) <= SEVERITY_ORDER.get(gone.severity, 9)
            and where(f)
        ):
            return f
    return None


def _is_compile(subject: str | None) -> bool:
    return bool(subject) and _subject_key(subject or "").split()[:1] == ["compile"]


def kit_changes(before: list[KitFacts], after: list[KitFacts], path_map: dict[str, str]) -> tuple[list[str], list[str]]:
    """Differences between the kits' `apply_model_compile` (KitFacts) of two sides, in words, and the kit classes
    whose method changed (its code, comments and layout aside): the recipes calling those are the ones affected."""
    out: list[str] = []
    changed: list[str] = []
    b = {(path_map.get(k.file, k.file), k.class_name): k for k in before}
    a = {(k.file, k.class_name): k for k in after}
    for key in sorted(set(b) | set(a)):
        kb, ka = b.get(key), a.get(key)
        where = f"{key[1]}.apply_model_compile ({key[0]})"
        lines: list[str] = []
        if kb is None:
            assert ka is not None  # the key comes from one side or the other
            lines.append(f"{where} added ({'in place' if ka.in_place else 'NOT in place'})")
        elif ka is None:
            lines.append(f"{where} removed")
        else:
            if kb.in_place != ka.in_place:
                lines.append(
                    f"{where}: {'in place' if kb.in_place else 'not in place'} -> {'in place' if ka.in_place else 'not in place'}"
                )
            if sorted(kb.disables) != sorted(ka.disables):
                lines.append(
                    f"{where}: compiler.disable regions {sorted(kb.disables) or 'none'} -> {sorted(ka.disables) or 'none'}"
                )
            for name in sorted(set(kb.options) | set(ka.options)):
                if kb.options.get(name) != ka.options.get(name):
                    lines.append(
                        f"{where}: compile argument {name}: {kb.options.get(name, '(unset)')} -> {ka.options.get(name, '(unset)')}"
                    )
            if not lines and kb.digest != ka.digest:
                lines.append(f"{where}: its code changed")
        out.extend(lines)
        if lines and key[1] not in changed:
            changed.append(key[1])
    return out, changed
