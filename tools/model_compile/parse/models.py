"""What the parse stage reads out of a recipe's files: the schema's and each
stage YAML's `model.compile` section, and documentation notes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from model_compile.vocabulary import DocKind

ConfigForm = Literal["section", "flat"]
# The older flat form of the compile switch and choices, on the model config itself: `compile: bool` with
# `compile_backend` and `compile_mode` beside it (the section form nests them: `compile.enabled/backend/mode`).
FLAT_FIELDS = {"enabled": "compile", "backend": "compile_backend", "mode": "compile_mode"}


def config_key(form: ConfigForm | None, name: str) -> str:
    """The dotted config key of a compile field in a form: `model.compile.enabled`, or `model.compile` (flat)."""
    return f"model.{FLAT_FIELDS[name]}" if form == "flat" else f"model.compile.{name}"


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
    compile_type: str | None = Field(default=None, description="the annotation of the model config's `compile` field")
    form: ConfigForm | None = Field(
        default=None,
        description="section: `compile: <class>` with enabled/backend/mode; flat: the older `compile: bool` with "
        "`compile_backend`/`compile_mode` on the model config (their facts are in `fields` as enabled/backend/mode)",
    )
    fields: dict[str, FieldFact] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)
    defaults: SkipJsonSchema[dict[str, Any]] = Field(  # read by rules and generate, never written out
        default_factory=dict,
        exclude=True,
        description="the root config's literal field defaults as nested sections (what a stage that leaves a key out "
        "gets): `{model: {gradient_checkpointing: {enabled: False}}}`",
    )


class StageFacts(BaseModel):
    """The `model.compile` block of one stage YAML."""

    file: str
    name: str
    has_compile: bool = False
    form: ConfigForm | None = Field(
        default=None,
        description="section: `model.compile: {enabled, backend, mode}`; flat: the older `model.compile: <bool>` with "
        "`model.compile_backend`/`model.compile_mode` (read into `values` as enabled/backend/mode)",
    )
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
    packing: str | None = Field(
        default=None,
        description="`data.packing_selection_strategy` (e.g. best_fit: packs may close short of max_seq_len)",
    )
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

    @property
    def form(self) -> ConfigForm | None:
        """The schema's form of the compile config, else the stage YAMLs' (None: neither has one)."""
        if self.schema_.form is not None:
            return self.schema_.form
        forms = {s.form for s in self.stages if s.form is not None}
        return "flat" if "flat" in forms else "section" if forms else None


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
