"""The ledger: what `prepare_model()` does to the model, in program order.

The ledger is the single model every other stage reads: rules judge it,
`generate` edits relative to it, `diff` compares two of them. It is plain
data (pydantic) so it serialises into the JSON contract unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

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


# Branch and Event are slotted dataclasses, not pydantic models: a ledger holds thousands of them,
# and building a dataclass costs a fifth of validating a model. Pydantic validates and serialises
# them inside `Ledger` (and the JSON Schema) as it does models: the contract is the same.


@dataclass(slots=True)
class Branch:
    """One arm of an `if` (or loop body) an event sits in."""

    node: Annotated[str, Field(description="stable id of the branching statement (file:line)")]
    arm: Literal["then", "else", "loop"]

    def __reduce__(self) -> tuple[type[Branch], tuple[str, str]]:
        return Branch, (self.node, self.arm)  # pickled as its fields: the dataclass's own state is slower


@dataclass(slots=True)
class Event:
    """One step `prepare_model()` reaches."""

    kind: EventKind
    file: Annotated[str, Field(description="path relative to the analysed PATH")]
    line: int
    call: Annotated[str, Field(description="source text of the call or statement, one line")]
    condition: Annotated[
        list[str], Field(description="conditions gating the event, outermost first, aliases resolved")
    ] = field(default_factory=list)
    target: Annotated[
        str | None, Field(description="object acted on, aliases resolved; 'each of X' inside a loop over X")
    ] = None
    via: Annotated[list[str], Field(description="helper calls followed to reach this event, outermost first")] = field(
        default_factory=list
    )
    anchor_line: Annotated[
        int | None, Field(description="line of the statement directly in prepare_model's body that reaches this event")
    ] = None
    reachable: bool = True
    kit: Annotated[bool, Field(description="reached through a model-kit method")] = False
    compile_style: CompileStyle | None = None
    arguments: Annotated[
        dict[str, str], Field(description="keyword arguments of the call as source text, aliases resolved")
    ] = field(default_factory=dict)
    branches: list[Branch] = field(default_factory=list)
    model_identity: Annotated[
        int | None, Field(description="which model object the target belongs to (same number: same object)")
    ] = None
    replaces_model: Annotated[
        bool, Field(description="wrapper compile whose result is kept as the model or stored into it")
    ] = False
    kept_as: Annotated[
        str | None, Field(description="compile: the name its result is assigned to (`self.teacher_model`), if any")
    ] = None

    def __reduce__(self) -> tuple[type[Event], tuple[object, ...]]:
        """Pickled as its fields in order (forked workers send thousands): the dataclass's own state is slower."""
        return Event, (
            self.kind,
            self.file,
            self.line,
            self.call,
            self.condition,
            self.target,
            self.via,
            self.anchor_line,
            self.reachable,
            self.kit,
            self.compile_style,
            self.arguments,
            self.branches,
            self.model_identity,
            self.replaces_model,
            self.kept_as,
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
