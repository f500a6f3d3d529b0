"""The ledger: what `prepare_model()` does to the model, in program order.

The ledger is the single model every other stage reads: rules judge it,
`generate` edits relative to it, `diff` compares two of them. It is plain
data (pydantic) so it serialises into the JSON contract unchanged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

EventKind = Literal[
    "build",
    "patch",
    "freeze",
    "upcast",
    "checkpointing",
    "graph_break",
    "compile",
    "wrap",
    "return",
]

# How a compile event compiles. `kit`: `<any>.apply_model_compile(...)`;
# `inplace`: `<module>.compile(...)`; `wrapper`: `torch.compile(<module>)`
# whose result is kept; `function`: `torch.compile(<fn or .forward>)`.
CompileStyle = Literal["kit", "inplace", "wrapper", "function"]


class Branch(BaseModel):
    """One arm of an `if` (or loop body) an event sits in."""

    node: str = Field(description="stable id of the branching statement (file:line)")
    arm: Literal["then", "else", "loop"]


class Event(BaseModel):
    """One step `prepare_model()` reaches."""

    kind: EventKind
    file: str = Field(description="path relative to the analysed PATH")
    line: int
    call: str = Field(description="source text of the call or statement, one line")
    condition: list[str] = Field(
        default_factory=list,
        description="conditions gating the event, outermost first, aliases resolved",
    )
    target: str | None = Field(
        default=None,
        description="object acted on, aliases resolved; 'each of X' inside a loop over X",
    )
    via: list[str] = Field(
        default_factory=list,
        description="helper calls followed to reach this event, outermost first",
    )
    anchor_line: int | None = Field(
        default=None,
        description="line of the statement directly in prepare_model's body that reaches this event",
    )
    reachable: bool = True
    kit: bool = Field(default=False, description="reached through a model-kit method")
    compile_style: CompileStyle | None = None
    arguments: dict[str, str] = Field(
        default_factory=dict,
        description="keyword arguments of the call as source text, aliases resolved",
    )
    branches: list[Branch] = Field(default_factory=list)
    model_identity: int | None = Field(
        default=None,
        description="which model object the target belongs to (same number: same object)",
    )
    replaces_model: bool = Field(
        default=False,
        description="wrapper compile whose result is kept as the model or stored into it",
    )


class Ledger(BaseModel):
    """Events of one engine class's `prepare_model()`."""

    engine_class: str
    file: str
    line: int
    events: list[Event] = Field(default_factory=list)
    returned_identity: int | None = Field(default=None, description="model identity of what prepare_model returns")
    notes: list[str] = Field(
        default_factory=list,
        description="what the analysis could not follow (unresolved helpers, depth limit)",
    )

    def of(self, *kinds: str) -> list[Event]:
        """Events of the given kinds, in order."""
        return [e for e in self.events if e.kind in kinds]
