"""The hard-validation report: pydantic models behind the text/JSON/Markdown output."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

LayerName = str  # "soft", "structure", "smoke", "impact:<file>"
LayerStatus = Literal["passed", "failed", "timeout", "missing", "not-run", "unavailable", "skipped"]
Verdict = Literal["passed", "failed", "incomplete"]


class Environment(BaseModel):
    python: str
    executable: str
    torch: str | None = None
    device_type: str = "unknown"
    device_count: int = 0
    accelerator: str | None = None
    cpu_only: bool = True
    label: str = Field(description="'cpu-only' or 'accelerator:<name>'; every runtime result carries it")
    problem: str | None = Field(default=None, description="why torch could not be inspected, if it could not")


class TestCounts(BaseModel):
    tests: int = 0
    passed: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    failed_tests: list[str] = Field(default_factory=list)
    messages: list[str] = Field(default_factory=list, description="first lines of failure/error messages")
    skip_reasons: list[str] = Field(default_factory=list)


class TraceSummary(BaseModel):
    log: str | None = None
    index_html: str | None = None
    compiles: int | None = None
    graph_breaks: int | None = None
    recompile_reasons: list[str] = Field(default_factory=list)
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
    log: str | None = None
    output_tail: str = ""
    findings: list[dict[str, Any]] = Field(default_factory=list, description="soft layer: error findings")
    compile_path: str | None = Field(default=None, description="soft layer: the recipe's compile path")


class Wiring(BaseModel):
    """What soft validation read: the report's 'kit or fallback path, target, placement'."""

    compile_path: str | None = None
    compiled_target: list[str] = Field(default_factory=list)
    placement: str = ""
    documented: list[str] = Field(default_factory=list, description="fallback/intent notes: 'kind (source file:line): reason'")


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
    wiring: Wiring = Field(default_factory=Wiring)
    gaps: list[str] = Field(
        default_factory=list,
        description="what this run did not establish: layers not run, CPU-only, graph breaks, recompiles, latency",
    )
    verdict: Verdict = "incomplete"
    summary: str = ""
    interrupted: str | None = Field(
        default=None, description="the signal (SIGINT, SIGTERM, SIGHUP) that stopped the run; the report is partial"
    )

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == "failed" else 0
