"""What the parse stage reads out of a recipe's files: the schema's and each
stage YAML's `model.compile` section, and documentation notes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from model_compile.vocabulary import DocKind


class FieldFact(BaseModel):
    """One `model.compile.<field>` as the schema declares it."""

    present: bool = False
    annotation: str | None = None
    default: Any = None
    default_text: str | None = None
    allowed: list[Any] | None = Field(default=None, description="Literal values, when the annotation is a Literal")
    line: int | None = None


class SchemaFacts(BaseModel):
    """What `configs/schema.py` says about `model.compile`."""

    file: str | None = None
    root_class: str | None = None
    model_class: str | None = None
    compile_class: str | None = None
    compile_field_line: int | None = None
    fields: dict[str, FieldFact] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


class StageFacts(BaseModel):
    """The `model.compile` block of one stage YAML."""

    file: str
    name: str
    has_compile: bool = False
    values: dict[str, Any] = Field(default_factory=dict)
    dynamic: dict[str, str] = Field(
        default_factory=dict,
        description="fields whose value is an OmegaConf interpolation, resolved at run time: {field: the interpolation}",
    )
    defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="the default of each dynamic field whose interpolation has one (`${oc.env:NAME,inductor}` -> inductor)",
    )
    lines: dict[str, int] = Field(default_factory=dict)
    mesh: dict[str, int] = Field(
        default_factory=dict, description="integer sizes under `parallel.mesh` (shard, replicate, tensor, ...)"
    )
    mesh_line: int | None = Field(default=None, description="line of `parallel.mesh.shard` (else of `mesh`)")
    problems: list[str] = Field(default_factory=list)

    def static_value(self, key: str) -> tuple[bool, Any]:
        """(known, value) of a compile field as far as it is known without running: a literal, or a dynamic field's default."""
        if key in self.dynamic:
            return (True, self.defaults[key]) if key in self.defaults else (False, None)
        return (key in self.values, self.values.get(key))

    @property
    def wrapping(self) -> Literal["ddp", "fsdp2"] | None:
        """How a mesh-driven wrapper treats this stage: `shard: 1` DDP, `shard` > 1 or -1 FSDP2 per block; None: unknown."""
        shard = self.mesh.get("shard")
        if shard is None:
            return None
        return "ddp" if shard == 1 else "fsdp2" if shard > 1 or shard == -1 else None


class ConfigFacts(BaseModel):
    """Schema defaults plus every stage YAML."""

    schema_: SchemaFacts = Field(default_factory=SchemaFacts, alias="schema")
    stages: list[StageFacts] = Field(default_factory=list)

    model_config = {"populate_by_name": True}


class Documentation(BaseModel):
    """A `# model-compile: <kind> - <reason>` comment or README section."""

    kind: DocKind
    reason: str
    file: str
    line: int
    source: Literal["comment", "readme"]


class Suppression(BaseModel):
    """A `# model-compile: ignore[MC205, MC203] - <reason>` comment.

    It silences the named rules on its own line and the line below; without
    a reason it silences nothing and is itself reported (MC001).
    """

    rules: list[str]
    reason: str
    file: str
    line: int
