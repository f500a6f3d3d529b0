"""The compiled scope of a recipe, in module terms.

What a recipe's compile covers, read from its ledger and the kit's facts:

* the kit: the whole model, minus the regions the kit wraps in
  `torch.compiler.disable` (`KitFacts.disables`);
* regional: every block of a container (`for block in <path>: block.compile()`),
  N blocks, N known only at run time;
* submodule (and any other in-place compile of a named module): `<path>`;
* graph-break: the whole model minus the disabled region; post-wrap: the
  wrapped model.

Paths are kept twice: as written in `prepare_model()` (`model.model.visual`)
and relative to the model, as `named_modules()` names them at run time
(`model.visual`; "" is the model itself). The runtime target check reads the
relative form (`pattern`): `*` stands for one dotted segment (one block).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from model_compile.ledger.models import Event, Ledger
from model_compile.ledger.repo import KitFacts

PartKind = Literal["whole-model", "blocks", "module"]


class ScopePart(BaseModel):
    """One compiled region."""

    kind: PartKind = Field(description="whole-model, blocks (each block of a container) or module")
    module: str = Field(description="the module as prepare_model() names it (the container for blocks)")
    pattern: str = Field(
        description="runtime pattern relative to the model: '' = the model, '<container>.*' = each block"
    )
    minus: list[str] = Field(default_factory=list, description="regions inside it kept eager (compiler.disable)")
    when_present: list[str] = Field(
        default_factory=list, description="regions of `minus` the kit disables only when the model has them (a guard)"
    )
    via: str = Field(default="", description="how: kit, inplace, wrapper, function")
    line: int | None = None

    @property
    def per_block(self) -> tuple[str, str] | None:
        """(container, member) of a part that compiles a submodule of each block (`X.*.self_attn`), else None."""
        container, star, member = self.module.partition(".*.")
        return (container, member) if self.kind == "blocks" and star else None

    def short(self) -> str:
        """The part in a few words: `the blocks of `X``, `the `self_attn` of each block of `X``, `X`."""
        if self.per_block:
            container, member = self.per_block
            return f"the `{member}` of each block of `{container}`"
        return f"the blocks of `{self.module}`" if self.kind == "blocks" else f"`{self.module}`"

    def describe(self) -> str:
        """One phrase: `whole model `model` minus `model.model.visual``."""
        if self.kind == "whole-model":
            text = f"whole model `{self.module}`"
        elif self.per_block:
            container, member = self.per_block
            text = f"`{member}` of each of the N blocks of `{container}` (each compiled; N known at run time)"
        elif self.kind == "blocks":
            text = f"N blocks of `{self.module}` (each compiled; N known at run time)"
        else:
            text = f"`{self.module}`"
        if self.minus:
            text += " minus " + ", ".join(
                f"`{m}`" + (" (when present)" if m in self.when_present else "") for m in self.minus
            )
        return text


class CompiledScope(BaseModel):
    """What a recipe compiles and what that leaves eager."""

    model: str = Field(default="model", description="the model variable of prepare_model()")
    parts: list[ScopePart] = Field(default_factory=list)
    eager: list[str] = Field(default_factory=list, description="what stays eager, in module terms")
    patterns: list[str] = Field(
        default_factory=list, description="what the runtime target check expects compiled (one per part)"
    )
    patches: list[str] = Field(default_factory=list, description="patch calls prepare_model() applies to the model")

    @property
    def summary(self) -> str:
        """One line: the compiled parts, `; `-separated, or `nothing compiled`."""
        return "; ".join(p.describe() for p in self.parts) or "nothing compiled"


def _strip_each(target: str) -> tuple[str, bool]:
    """`each of model.layers` -> (`model.layers`, True)."""
    if target.startswith("each of "):
        return target[len("each of ") :].strip(), True
    return target, False


def _relative(path: str, model_var: str) -> str:
    """`model.model.visual` -> `model.visual` (the name named_modules() gives); the model -> ''."""
    path = path.split("(")[0].strip()
    if path == model_var:
        return ""
    if path.startswith(model_var + "."):
        return path[len(model_var) + 1 :]
    return path  # not under the model variable: kept as written


def _rebase(path: str, kit_var: str, model_var: str) -> str:
    """A path written against the kit's parameter name, written against the recipe's model."""
    if path == kit_var or path.startswith(kit_var + "."):
        return model_var + path[len(kit_var) :]
    return path


def _model_var(ledger: Ledger) -> str:
    """The model's variable: the plain name the steps act on (`model`)."""
    for e in ledger.events:
        if (
            e.kind in ("build", "patch", "freeze", "checkpointing", "compile", "wrap")
            and (e.target or "").isidentifier()
        ):
            return e.target or "model"
    for e in ledger.events:
        if e.kind == "compile" and e.target:
            return _strip_each(e.target)[0].split(".")[0]
    return "model"


def _part(event: Event, model_var: str, kit: KitFacts | None, breaks: list[str]) -> ScopePart | None:
    target = event.target or ""
    path, each = _strip_each(target)
    looped = each or any(b.arm == "loop" for b in event.branches)
    if event.compile_style == "kit":
        minus = [_rebase(d, kit.model_param, path or model_var) for d in kit.disables] if kit else []
        guarded = (
            [_rebase(d, kit.model_param, path or model_var) for d in kit.disables if d in kit.found_by] if kit else []
        )
        return ScopePart(
            kind="whole-model",
            module=path or model_var,
            pattern="",
            minus=minus + breaks,
            when_present=guarded,
            via="kit",
            line=event.line,
        )
    if not path:
        return None
    if looped or "*" in path.split("."):
        container = path
        rel = _relative(container, model_var)
        each = "*" in path.split(".")  # `X.*.self_attn`: the pattern names the modules themselves
        return ScopePart(
            kind="blocks",
            module=container,
            pattern=rel if each else (f"{rel}.*" if rel else "*"),
            via=event.compile_style or "",
            line=event.line,
        )
    rel = _relative(path, model_var)
    if rel == "" or "." not in path:
        inside = [b for b in breaks if b.startswith(path + ".")]
        return ScopePart(
            kind="whole-model", module=path, pattern="", minus=inside, via=event.compile_style or "", line=event.line
        )
    inside = [b for b in breaks if b.startswith(path + ".")]
    return ScopePart(
        kind="module", module=path, pattern=rel, minus=inside, via=event.compile_style or "", line=event.line
    )


def eager_regions(
    parts: list[ScopePart],
    model_var: str,
    patches: list[str],
    kit_regions: list[str] | None = None,
    around: tuple[list[str], str] | None = None,
) -> list[str]:
    """What stays eager, in module terms, for a set of compiled parts.

    `kit_regions`: what the repo's kit keeps eager (`model.model.visual`); named when no part compiles it.
    `around`: the model's own modules outside the compiled parts (relative to the model) and where that list was
    read from, when the model's code was found (`parse/model_tree.py`); without it no module is named.
    """
    if not parts:
        return [f"`{model_var}`: nothing is compiled"]
    out: list[str] = []
    for p in parts:
        for m in p.minus:
            where = " in the kit" if p.via == "kit" else ""
            out.append(
                f"`{m}` (torch.compiler.disable{where}{', when the model has it' if m in p.when_present else ''})"
            )
    if any(p.kind == "whole-model" for p in parts):
        return out
    text = f"everything `{model_var}` runs outside " + " and ".join(p.short() for p in parts)
    if around is not None and around[0]:
        modules = ", ".join(f"`{model_var}.{m}`" for m in around[0])
        text += f": the modules {modules} and the code of the forwards around them, the loss included where the "
        text += f"model computes it (modules read from {around[1]})"
    out.append(text)
    for region in kit_regions or []:
        rel = _relative(region, model_var)
        if not any(_inside(_rel(p, model_var)[0], rel) or _inside(rel, _rel(p, model_var)[0]) for p in parts):
            out.append(f"`{region}`, all of it (the kit keeps it eager too)")
    if patches:
        out.append(f"code patched in by {', '.join(patches)}, unless it runs inside a compiled part")
    return out


def kit_for(event: Event, kits: list[KitFacts], sources: Mapping[str, str]) -> KitFacts | None:
    """The kit a `<receiver>.apply_model_compile(...)` call reaches: the class assigned to the receiver
    in the engine's source (`self.model_kit = MLLMModelKit()`), else the one kit class the source names."""
    if not kits:
        return None
    if len(kits) == 1:  # whatever the source names, the one kit class is the answer
        return kits[0]
    text = sources.get(event.file, "")
    receiver = event.call.split(".apply_model_compile")[0].split("=")[-1].strip()
    m = re.search(rf"{re.escape(receiver)}\s*(?::[^=\n]+)?=\s*([A-Za-z_]\w*)\s*\(", text) if receiver else None
    names = [m.group(1)] if m else []
    names += [k.class_name for k in kits if re.search(rf"\b{re.escape(k.class_name)}\b", text)]
    for name in names:
        for k in kits:
            if k.class_name == name:
                return k
    return kits[0]


def compiled_scope(
    ledgers: list[Ledger], kit: list[KitFacts], sources: Mapping[str, str] | None = None
) -> CompiledScope:
    """The scope of a recipe's reachable compile events (every engine's ledger).

    `sources` (file -> text of the recipe's modules) tells which kit class a kit call reaches.
    """
    parts: list[ScopePart] = []
    model_var = "model"
    patches: list[str] = []
    for ledger in ledgers:
        model_var = _model_var(ledger)
        breaks = [
            _strip_each(e.target)[0].removesuffix(".forward")
            for e in ledger.events
            if e.kind == "graph_break" and e.reachable and e.target and not e.kit
        ]
        patches += [
            e.call.split("(")[0].split("=")[-1].strip().rsplit(".", 1)[-1] for e in ledger.of("patch") if e.reachable
        ]
        for e in ledger.events:
            if e.kind != "compile" or not e.reachable:
                continue
            part = _part(e, model_var, kit_for(e, kit, sources or {}) if e.compile_style == "kit" else None, breaks)
            if part is not None and all(part.module != q.module or part.kind != q.kind for q in parts):
                parts.append(part)
    patches = list(dict.fromkeys(p for p in patches if p))
    return CompiledScope(
        model=model_var,
        parts=parts,
        eager=eager_regions(parts, model_var, patches, kit_regions(kit, model_var)),
        patterns=[p.pattern for p in parts],
        patches=patches,
    )


# -- comparing two scopes (diff) ---------------------------------------------
def _root(part: ScopePart, model_var: str) -> str:
    """The name a part's paths start from: a whole-model part's own module (the model under
    another name, e.g. the wrapped `parallelized_model`), else the recipe's model variable."""
    return part.module if part.kind == "whole-model" else model_var


def _rel(part: ScopePart, model_var: str) -> tuple[str, list[str]]:
    root = _root(part, model_var)
    module = "" if part.kind == "whole-model" else _relative(part.module, model_var)
    return module, [_relative(m, root) for m in part.minus]


def _inside(path: str, region: str) -> bool:
    """`path` is `region` or lies below it ('' is the model: everything lies below it)."""
    return region == "" or path == region or path.startswith(region + ".")


def _contains(outer: ScopePart, outer_var: str, inner: ScopePart, inner_var: str) -> bool:
    """Everything `inner` compiles, `outer` compiles too."""
    o_mod, o_minus = _rel(outer, outer_var)
    i_mod, i_minus = _rel(inner, inner_var)
    if inner.kind == "whole-model" and outer.kind != "whole-model":
        return False
    if outer.kind == "blocks":
        if not (i_mod.startswith(o_mod + ".") or (inner.kind == "blocks" and i_mod == o_mod)):
            return False
    elif not _inside(i_mod, o_mod):
        return False
    # A region `outer` keeps eager that `inner` compiles.
    for m in o_minus:
        if _inside(i_mod, m) or (_inside(m, i_mod) and not any(_inside(m, x) for x in i_minus)):
            return False
    return True


def _within(inner: ScopePart, inner_var: str, outer: ScopePart, outer_var: str) -> bool:
    """`inner` lies in `outer`'s region (ignoring what `outer` disables)."""
    i_mod, _ = _rel(inner, inner_var)
    o_mod, _ = _rel(outer, outer_var)
    return inner.kind != "whole-model" and _inside(i_mod, o_mod) and (outer.kind != "blocks" or i_mod != o_mod)


def _lost(
    old: CompiledScope,
    new: CompiledScope,
    patches: list[str],
    disabled: str,
    around: tuple[list[str], str] | None = None,
) -> list[str]:
    """What `old` compiles that `new` does not, in words; `disabled` says what became of a region
    `new` keeps in torch.compiler.disable (which side that is depends on the direction asked); `around`: the
    model's own modules outside `new`'s compiled parts, and where they were read (named where known)."""
    out: list[str] = []
    for o in old.parts:
        if any(_contains(n, new.model, o, old.model) for n in new.parts):
            continue
        o_minus = set(_rel(o, old.model)[1])
        # New parts inside `o`'s region, except those in a region `o` kept eager (they move into compile).
        inner = [
            n
            for n in new.parts
            if _within(n, new.model, o, old.model) and not any(_inside(_rel(n, new.model)[0], m) for m in o_minus)
        ]
        newly_disabled = [
            m
            for n in new.parts
            for m in n.minus
            if _relative(m, _root(n, new.model)) not in o_minus and _within_path(m, _root(n, new.model), o, old.model)
        ]
        if inner and not newly_disabled:
            where = o.describe() if o.kind != "whole-model" else f"`{o.module}`"
            text = f"what {where} runs outside " + " and ".join(n.short() for n in inner)
            moved = [
                m
                for m in (around[0] if around else [])
                if not any(_inside(_relative(m, new.model), x) for x in o_minus)
            ]
            if around is not None and moved and o.kind == "whole-model":  # less what `old` kept eager already
                text += f": the modules {', '.join(f'`{m}`' for m in moved)} (read from {around[1]})"
            if patches and o.kind == "whole-model":
                text += f"; code patched in by {', '.join(patches)}, unless it runs inside a compiled part"
            out.append(text)
        elif newly_disabled:
            out.extend(f"`{m}` ({disabled})" for m in newly_disabled)
        else:
            out.append(o.describe())
    return out


def _within_path(path: str, var: str, part: ScopePart, part_var: str) -> bool:
    p_mod, p_minus = _rel(part, part_var)
    rel = _relative(path, var)
    return _inside(rel, p_mod) and not any(_inside(rel, m) for m in p_minus)


def scope_changes(
    before: CompiledScope | None, after: CompiledScope | None, around: tuple[list[str], str] | None = None
) -> list[str]:
    """How the compiled scope changed, and what moved to eager or into compile; `around`: the model's own modules
    outside the head side's compiled parts, and where they were read (review/modules.py), named where known."""
    b = before or CompiledScope()
    a = after or CompiledScope()
    if [(p.kind, _rel(p, b.model)) for p in b.parts] == [(p.kind, _rel(p, a.model)) for p in a.parts]:
        return []  # the same regions, whatever the variable that names the model (placement lines say the rest)
    out = [f"compiled scope: {b.summary} -> {a.summary}"]
    if not a.parts:
        return out + [f"moved to eager: everything (`{b.model}` runs eager)"]
    if not b.parts:
        return out + [f"moved into compile: {a.summary}"]
    out += [f"moved to eager: {x}" for x in _lost(b, a, a.patches, "now wrapped in torch.compiler.disable", around)]
    out += [f"moved into compile: {x}" for x in _lost(a, b, a.patches, "no longer wrapped in torch.compiler.disable")]
    return out


def kit_regions(kits: list[KitFacts], model_var: str) -> list[str]:
    """What the repo's kits keep eager, written against `model_var`."""
    return list(dict.fromkeys(_rebase(d, k.model_param, model_var) for k in kits for d in k.disables))


def planned_scope(
    kind: str,
    target: str | list[str],
    model_var: str,
    patches: list[str] | None = None,
    kits: list[KitFacts] | None = None,
    around: tuple[list[str], str] | None = None,
) -> CompiledScope:
    """The scope a generated fallback of `kind` on `target` (one or several) will have (for the README it writes);
    `around` as for `eager_regions`."""
    parts: list[ScopePart] = []
    for one in [target] if isinstance(target, str) else target:
        rel = _relative(one, model_var)
        if kind in ("regional", "submodule") and "*" in one.split("."):
            part = ScopePart(kind="blocks", module=one, pattern=rel, via="inplace")
        elif kind == "regional":
            part = ScopePart(kind="blocks", module=one, pattern=f"{rel}.*" if rel else "*", via="inplace")
        elif kind == "submodule" and rel:
            part = ScopePart(kind="module", module=one, pattern=rel, via="inplace")
        elif kind == "graph-break":
            part = ScopePart(kind="whole-model", module=model_var, pattern="", minus=[one], via="inplace")
        else:  # post-wrap, or a submodule that is the model itself
            part = ScopePart(kind="whole-model", module=one, pattern="", via="inplace")
        parts.append(part)
    found = list(patches or [])
    return CompiledScope(
        model=model_var,
        parts=parts,
        eager=eager_regions(parts, model_var, found, kit_regions(kits or [], model_var), around),
        patterns=[p.pattern for p in parts],
        patches=found,
    )
