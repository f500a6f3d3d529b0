"""What the planned compile targets hold, checked statically before generate writes them.

Two structures make a compiled region compile nothing, or less than it names (measured with torch 2.13 on CPU,
a tiny Qwen3-VL of the qwen3_vl recipe's class, backend aot_eager; see references/patterns.md):

* a gradient checkpoint inside the compiled frame. transformers >= 5.23 runs a `GradientCheckpointingLayer`'s
  checkpoint inside its `forward`: a compiled decoder layer (or a compiled module holding such layers) asks dynamo
  to trace `torch.utils.checkpoint` as a higher-order op, which failed ("HOP: Unsafe side effect") and left the
  layers eager: 0 graphs. Compiling what the checkpoint calls - each block's attention and MLP - compiled under
  5.25 and 5.3.0 alike. transformers 5.3.0 checkpoints around the layer's call, so a compiled layer ran inside the
  checkpoint and compiled; the inner form works there too. A recipe-local block whose own `forward` calls a
  checkpoint function puts the same higher-order op in its frame.
* FSDP2 units inside the compiled module. A per-block wrapper (`fully_shard` on each class of the model's
  `_no_split_modules`) hooks every unit; a compiled module that holds units breaks at each hook, runs its own code
  eager, and compiles each unit's forward as a frame of its own (2 CPU ranks: the language model compiled whole
  gave 2 graph breaks and the layers compiled one by one). Compiling each unit, or what is inside it, is the form
  that compiles what it names.

For an inferred target generate picks that form and says so; for a --target the user gave it warns and prints the
command with the form that compiles.

The rule for checkpointed blocks is one, whatever the transformers installed: where gradient checkpointing wraps the
blocks in a stage acted on (its switch on there, or not decided statically), the target is each block's attention
and MLP (the composite children every block has), never the whole block - the form that compiled on every version
measured (RULE_MEASURED), where the whole block compiled only while the checkpoint sat around the layer's call.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from model_compile.generate.planning.locate import ModelLayout
from model_compile.ledger.models import Ledger
from model_compile.ledger.repo import KitFacts
from model_compile.ledger.stage_gates import load_stages, stages_with
from model_compile.parse.model_tree import Node
from model_compile.parse.models import StageFacts

# Where the rule for checkpointed blocks was measured (references/patterns.md), and the release that moved
# the checkpoint of a GradientCheckpointingLayer inside its forward.
RULE_MEASURED = "measured with transformers 5.3.0 and 5.25, torch 2.13, 1 and 2 CPU ranks"
FORWARD_CHECKPOINT = "5.23"


@dataclass
class Structure:
    """The targets to write, and what the user is told about them."""

    targets: list[str]
    notes: list[str] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)  # the targets that compile, when they differ from `targets`


def _rel(target: str, model_var: str) -> str:
    return target[len(model_var) + 1 :] if target.startswith(model_var + ".") else ""


def _short(cls: str) -> str:
    return cls.rsplit(".", 1)[-1]


def _blocks_in(layout: ModelLayout, rel: str, kind: str) -> list[Node]:
    """The block elements (`C.*`) a target compiles whole: the target's own blocks (regional container, or a
    `C.*` target), and every block element inside a module target."""
    tree = layout.tree
    if kind == "regional" and "*" not in rel.split("."):
        rel = f"{rel}.*" if rel else "*"
    if rel.endswith("*"):
        return [n for n in [tree.nodes.get(rel)] if n is not None]
    prefix = f"{rel}." if rel else ""
    return [
        n
        for p, n in tree.nodes.items()
        if p.startswith(prefix) and p.endswith(".*") and p.count("*") == rel.count("*") + 1
    ]


def _checkpoint_cause(layout: ModelLayout, node: Node) -> tuple[bool | None, str]:
    """(the checkpoint runs inside this block's frame: True / no: False / unknown: None, why)."""
    tree, cls = layout.tree, _short(node.cls)
    if cls in tree.checkpoint_callers:
        return None, f"{cls}.forward calls a checkpoint function"
    if cls not in tree.checkpoint_layers:
        return False, ""
    where = tree.checkpoint_where or layout.source
    if tree.checkpoint_in_forward is False:
        return False, f"{cls} is a GradientCheckpointingLayer; {where} checkpoints around its call"
    if tree.checkpoint_in_forward is True:
        return True, f"{cls} is a GradientCheckpointingLayer and {where} runs the checkpoint inside its forward"
    return None, f"{cls} is a GradientCheckpointingLayer (where this transformers checkpoints it is unknown)"


def _inner(layout: ModelLayout, element: str) -> tuple[list[str], list[str]]:
    """(the composite children of a block every block has, the optional ones) - what a checkpoint calls."""
    children = [c for c in layout.tree.children(element) if c.composite]
    return [c.path for c in children if not c.optional], [c.path for c in children if c.optional]


def _checkpointing(
    ledgers: list[Ledger], stages: dict[str, StageFacts], texts: dict[str, str], defaults: dict[str, Any] | None
) -> str | None:
    """Where prepare_model() enables gradient checkpointing and in which stages acted on it is on; None when it does
    not, or when its switch is off in every stage acted on (`ledger/stage_gates.py` reads the switch; a stage that
    leaves it out has the schema's default)."""
    found = [e for lg in ledgers for e in lg.of("checkpointing") if e.reachable]
    if not found:
        return None
    e = found[0]
    where = f"`{e.call.split('(')[0]}` (line {e.line})"
    state = stages_with(found, load_stages(texts), defaults) if texts else {}
    on = sorted(n for n, v in state.items() if v is True)
    unknown = sorted(n for n, v in state.items() if v is None)
    if state and not on and not unknown:
        return None  # off in every stage acted on: the blocks are not checkpointed there
    gate = f", when `{' and '.join(e.condition)}`" if e.condition else ""
    if on:
        return f"{where}{gate}: on in {', '.join(on)}"
    if unknown and e.condition:
        return f"{where}{gate} (not decided by {', '.join(unknown)})"
    return where + gate


def check_structure(
    kind: str,
    targets: list[str],
    model_var: str,
    layout: ModelLayout | None,
    *,
    explicit: bool,
    ledgers: list[Ledger],
    stages: dict[str, StageFacts],
    stage_texts: dict[str, str],
    command: str,
    defaults: dict[str, Any] | None = None,
) -> Structure:
    """Check what each target compiles into; pick (inferred targets) or offer (given ones) the form that compiles.
    `command`: the generate command without its --target options (for the offered one)."""
    out = Structure(list(targets))
    if layout is None or kind not in ("regional", "submodule"):
        return out
    tree = layout.tree
    checkpointing = _checkpointing(ledgers, stages, stage_texts, defaults)
    sharded = sorted(name for name, facts in stages.items() if facts.wrapping == "fsdp2")
    better: list[str] = []
    for target in targets:
        rel = _rel(target, model_var)
        replaced: list[str] = []
        own = f"{rel}.*" if kind == "regional" and "*" not in rel.split(".") else rel
        for block in _blocks_in(layout, rel, kind) if checkpointing else []:
            inside, why = _checkpoint_cause(layout, block)
            if not why:
                continue  # not a checkpointed block
            if inside is False and block.path != own and sharded and _short(block.cls) in tree.no_split:
                # a compiled module holding checkpointed FSDP2 units: none of them compiled (2 CPU ranks,
                # transformers 5.3.0 and 5.25 alike), whether the checkpoint wraps their call or their forward
                many = len(sharded) > 1
                wrapping = f"stage{'s' if many else ''} {', '.join(sharded)} wrap{'' if many else 's'}"
                inside, why = True, f"{why}, and {wrapping} each of them with FSDP2"
            members, optional = _inner(layout, block.path)
            if inside is False:  # compiles on this transformers, not on 5.23 and later: one rule, the inner form
                verb = (
                    f"compiles on this transformers, but nothing from transformers {FORWARD_CHECKPOINT} on (the "
                    "checkpoint moves inside forward)"
                )
            else:
                verb = "compiles nothing" if inside else "may compile nothing"
            text = (
                f"gradient checkpointing ({checkpointing}) wraps each block of `{model_var}.{block.path[:-2]}`: "
                f"{why}, so compiling `{target}` {verb} (dynamo traces a checkpoint inside the compiled frame as a "
                "higher-order op; measured: 0 graphs of those blocks); each block's attention and MLP compile "
                f"inside the checkpoint on every version ({RULE_MEASURED})"
            )
            if optional:
                text += f"; {', '.join(f'`{o}`' for o in optional)} exist only in some blocks: left eager"
            out.notes.append(text)
            replaced += [f"{model_var}.{m}" for m in members]
        units = tree.units_inside(rel if "*" in rel or kind != "regional" else f"{rel}.*") if sharded else []
        units = [u for u in units if u.path != rel and not (kind == "regional" and u.path == f"{rel}.*")]
        if units and not replaced:  # they compile, frame by frame: said, and the per-unit form offered
            containers = sorted({u.path[:-2] if u.path.endswith(".*") else u.path for u in units})
            per_unit = [f"{model_var}.{c}" for c in containers]
            out.notes.append(
                f"{', '.join(sharded)} shard{'s' if len(sharded) == 1 else ''} per block with FSDP2 (fully_shard on "
                f"each {', '.join(sorted({_short(u.cls) for u in units}))}, from `_no_split_modules` of "
                f"{tree.root}), and `{target}` holds those units: compile breaks at each unit's hooks, the code "
                "around them runs eager and each unit compiles as a frame of its own (measured on 2 CPU ranks)"
                + (
                    "; to compile each unit instead: "
                    + command.replace(f"--path {kind}", "--path regional")
                    + " "
                    + " ".join(f"--target {shlex.quote(t)}" for t in per_unit)
                    if command
                    else ""
                )
            )
        better += replaced or [target]
    better = list(dict.fromkeys(better))
    if better == targets:
        return out
    per_block = [t for t in better if "*" in t.split(".")]
    if explicit:
        out.offered = better
        flags = " ".join(f"--target {shlex.quote(t)}" for t in better)
        out.notes.append(f"the form that compiles: {command} {flags}")
    else:
        out.targets = better
        out.notes.append(f"target: {', '.join(better)} (picked: the form that compiles, see above)")
        if per_block and kind == "regional":
            out.notes.append("written as a loop over the blocks that compiles each of those submodules in place")
    return out


def suggest_regional(
    layout: ModelLayout | None,
    model_var: str,
    exclude: list[str],
    ledgers: list[Ledger],
    stages: dict[str, StageFacts],
    stage_texts: dict[str, str],
    defaults: dict[str, Any] | None = None,
) -> tuple[list[str], str] | None:
    """The regional targets that compile for this model (its block containers, less what the kit keeps eager,
    inside the checkpoint where checkpointing wraps the blocks), and where the model was read; None unknown."""
    if layout is None:
        return None
    containers = [f"{model_var}.{c}" for c in layout.block_containers(exclude)]
    if not containers:
        return None
    checked = check_structure(
        "regional",
        containers,
        model_var,
        layout,
        explicit=False,
        ledgers=ledgers,
        stages=stages,
        stage_texts=stage_texts,
        command="",
        defaults=defaults,
    )
    return checked.targets, layout.why


def kept_eager(kits: list[KitFacts], ledgers: list[Ledger], model_var: str) -> list[str]:
    """The regions kept eager on purpose, relative to the model: those the repository's kits disable, and those the
    recipe's prepare_model() wraps in torch.compiler.disable itself (never proposed as blocks to compile)."""
    out = [d[len(k.model_param) + 1 :] for k in kits for d in k.disables if d.startswith(k.model_param + ".")]
    for e in (e for lg in ledgers for e in lg.of("graph_break") if e.reachable and e.target and not e.kit):
        target = e.target.removeprefix("each of ").removesuffix(".forward")  # type: ignore[union-attr]
        if target.startswith(model_var + "."):
            out.append(target[len(model_var) + 1 :])
    return list(dict.fromkeys(out))
