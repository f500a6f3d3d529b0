"""The hard-validation report: pydantic models behind the text/JSON/Markdown output."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from model_compile.hard.facts import (  # noqa: F401 - re-exported: the rehearsal's facts live in hard/facts.py
    Attribution,
    ChangedLines,
    CoverageEntry,
    EagerCause,
    Fix,
    GraphBreakSite,
    LayerStatus,
    RehearsalFacts,
    RehearsalStep,
)

LayerName = str  # "soft", "structure", "smoke", "impact:<file>"
Verdict = Literal["passed", "failed", "incomplete"]


class Environment(BaseModel):
    python: str
    executable: str = Field(description="absolute path of the interpreter the recipe tests run with")
    interpreter_reason: str = Field(default="", description="why that interpreter was chosen")
    pytest: str | None = None
    torch: str | None = None
    device_type: str = "unknown"
    device_count: int = 0
    accelerator: str | None = None
    cpu_only: bool = True
    label: str = Field(description="'cpu-only' or 'accelerator:<name>'; every runtime result carries it")
    problem: str | None = Field(default=None, description="why torch could not be inspected, if it could not")
    device_check: str = Field(
        default="", description="how the device was found: 'torch', or no accelerator device node (torch not imported)"
    )


class TestCounts(BaseModel):
    tests: int = 0
    passed: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    failed_tests: list[str] = Field(default_factory=list)
    messages: list[str] = Field(default_factory=list, description="first lines of failure/error messages")
    skip_reasons: list[str] = Field(default_factory=list)


class FrameCompile(BaseModel):
    """One frame compile read from TORCH_TRACE (a `compilation_metrics` record)."""

    compile_id: str
    function: str
    time_s: float | None = None
    backend_time_s: float | None = None
    recompile_reason: str | None = None
    fail: str | None = None


class RankTrace(BaseModel):
    """Compile facts of one process (rank) from its TORCH_TRACE log."""

    rank: str
    log: str
    compiles: int = 0
    compile_time_s: float = 0.0
    graph_breaks: list[str] = Field(default_factory=list, description="'file:line: reason', one per break seen")
    recompiles: list[str] = Field(default_factory=list, description="'<compile id>: <failed guard>'")
    recompile_limit_hits: list[str] = Field(default_factory=list)
    frames: list[FrameCompile] = Field(default_factory=list)


class TraceSummary(BaseModel):
    directory: str | None = None
    log: str | None = None
    index_html: str | None = None
    compiles: int | None = None
    graph_breaks: int | None = None
    recompile_reasons: list[str] = Field(default_factory=list)
    recompile_limit_hits: int = 0
    ranks: list[RankTrace] = Field(default_factory=list)
    reader: str = Field(default="json-lines", description="'json-lines' (own reader of the trace); tlparse adds HTML")
    note: str | None = None


class LayerResult(BaseModel):
    name: LayerName
    status: LayerStatus
    label: str = Field(description="cpu-only / accelerator:<name> / static")
    command: str | None = Field(default=None, description="exact command, shell-quoted")
    cwd: str | None = None
    exit_status: int | None = None
    duration_s: float = 0.0
    counts: TestCounts | None = None
    reason: str | None = None
    next_step: str | None = Field(default=None, description="command to run to fix or complete this layer")
    where: str | None = Field(default=None, description="where it ran (or would run): label and interpreter")
    options_note: list[str] = Field(default_factory=list, description="options not passed, and how to get their effect")
    started: bool = Field(default=False, description="the layer's process was started on this machine")
    accelerator_commands: list[str] = Field(
        default_factory=list,
        description="smoke: one command per stage for a machine with GPUs/NPUs (no path of this machine)",
    )
    prerequisites: list[str] = Field(
        default_factory=list, description="what the commands need that this machine lacks (model, data paths)"
    )
    log: str | None = None
    output_tail: str = ""
    findings: list[dict[str, Any]] = Field(default_factory=list, description="soft layer: error findings")
    existing: bool | None = Field(
        default=None, description="a failed layer run on the change's base too: true when it fails there as well"
    )
    stopped_by: str | None = Field(default=None, description="the failed layer whose result made this one meaningless")
    compile_path: str | None = Field(default=None, description="soft layer: the recipe's compile path")


class Wiring(BaseModel):
    """What soft validation read: the report's 'kit or fallback path, target, placement'."""

    compile_path: str | None = None
    compiled_target: list[str] = Field(default_factory=list)
    placement: str = ""
    documented: list[str] = Field(
        default_factory=list, description="fallback/intent notes: 'kind (source file:line): reason'"
    )


Number = int | float  # kept as written in the JSON (an int prints as an int)


class _Part(BaseModel):
    """Part of the runtime JSON: every field optional, unknown keys ignored."""

    model_config = ConfigDict(extra="ignore")


class RuntimeEnvironment(_Part):
    torch: str | None = None


class CompiledModule(_Part):
    name: str | None = None


class GraphBreaks(_Part):
    total: int | None = None
    by_reason: dict[str, int] = Field(default_factory=dict)


class RecompileReason(_Part):
    reason: str = ""


class Recompiles(_Part):
    count: int | None = None
    reasons: list[RecompileReason] | None = None


class RecompileLimit(_Part):
    limit: int | None = None
    hit: bool | None = None


class Executed(_Part):
    step: int | None = None
    compiled_region_events: int | None = None


class Timing(_Part):
    first_step_s: Number | None = None
    steady_state_s: Number | None = None
    first_over_steady: Number | None = None


class RuntimeRecord(_Part):
    """The fields of a smoke run's runtime JSON (`runtime-rank<r>.json`) that hard validation reads.

    The JSON itself is written by `model_compile.runtime.dynamo_adapter` inside the
    recipe's tests; the report keeps it whole (`HardReport.runtime`). A missing key
    reads as None (or empty), as the old `dict.get(...)` chains did.
    """

    rank: int | None = None
    environment: RuntimeEnvironment = Field(default_factory=RuntimeEnvironment)
    compiled_module_count: int | None = None
    compiled_modules: list[CompiledModule] = Field(default_factory=list)
    graph_breaks: GraphBreaks = Field(default_factory=GraphBreaks)
    unique_graphs: int | None = None
    recompiles: Recompiles = Field(default_factory=Recompiles)
    recompile_limit: RecompileLimit = Field(default_factory=RecompileLimit)
    executed: Executed = Field(default_factory=Executed)
    timing: Timing = Field(default_factory=Timing)
    orig_mod_key_count: int | None = None
    violations: list[str] = Field(default_factory=list)


class HardReport(BaseModel):
    tool: str = "model-compile"
    version: str
    kind: str = Field(description="what this run is: 'cpu-only runtime checks' or 'runtime compile validation'")
    recipe: str
    repo_root: str
    out_dir: str
    environment: Environment
    layers: list[LayerResult] = Field(default_factory=list)
    runtime: dict[str, Any] | None = Field(default=None, description="rank-0 runtime JSON written by the smoke run")
    runtime_files: list[str] = Field(default_factory=list)
    trace: TraceSummary | None = None
    traces: dict[str, TraceSummary] = Field(default_factory=dict, description="per pytest layer: TORCH_TRACE facts")
    probe: str | None = Field(default=None, description="folder put first on the child's PYTHONPATH, if one was")
    preflight: list[str] = Field(default_factory=list, description="what the interpreter lacks, with the fix")
    require_complete: bool = Field(default=False, description="--require-complete: 'incomplete' exits 1")
    wiring: Wiring = Field(default_factory=Wiring)
    gaps: list[str] = Field(
        default_factory=list,
        description="what this run did not establish: layers not run, CPU-only, graph breaks, recompiles, latency",
    )
    torch_note: str | None = Field(
        default=None,
        description="when a runtime layer ran on another torch release than the repository's pyproject.toml pins",
    )
    verdict: Verdict = "incomplete"
    summary: str = ""
    rehearsal: RehearsalFacts | None = Field(default=None, description="the rehearsal layer's figures, when it ran")
    interrupted: str | None = Field(
        default=None, description="the signal (SIGINT, SIGTERM, SIGHUP) that stopped the run; the report is partial"
    )

    @property
    def runtime_record(self) -> RuntimeRecord | None:
        """`runtime` read through its typed model (None when no runtime JSON came back)."""
        return RuntimeRecord.model_validate(self.runtime) if self.runtime is not None else None

    @property
    def exit_code(self) -> int:
        """0 passed; 1 failed; `incomplete` is 0 unless --require-complete asked for 1."""
        if self.verdict == "failed" or (self.verdict == "incomplete" and self.require_complete):
            return 1
        return 0
