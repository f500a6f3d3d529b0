"""The rehearsal's facts: pydantic models of what it ran, measured and judged (the JSON contract of its record,
`RehearsalFacts`, with its steps, graph-break sites, coverage map, the change's lines and the fixes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

LayerStatus = Literal["passed", "failed", "timeout", "missing", "not-run", "unavailable", "skipped", "tool-error"]


class GraphBreakSite(BaseModel):
    """One graph-break site of a rehearsal, from its TORCH_TRACE."""

    site: str = Field(description="`path:line` in the repository, or `library <package path>:line`")
    reason: str
    count: int = 1


class EagerCause(BaseModel):
    """Why part of a module's forward work ran outside compiled graphs."""

    cause: str = Field(description="in words: a graph break, a skipped frame, the recompile limit, disable, ...")
    site: str = Field(description="`path:line` in the repository, or `library <package path>:line`")
    kind: str = Field(
        description="graph-break, skipped-frame, recompile-limit, disable, checkpoint, not-compiled or unknown"
    )
    share: float = Field(description="the part of the module's eager work this cause accounts for, 0..1")


class ChangedLines(BaseModel):
    """One hunk of the change in a file the run imports: did it run, and how."""

    file: str = Field(description="path from the repository root")
    lines: list[int] = Field(description="the hunk's changed lines (the head's numbers)")
    ran_compiled: int = Field(description="times a compiled graph holding an operator of these lines ran")
    ran_eager: int = Field(description="times these lines ran as Python in the compiled run (outside graphs)")
    ran_eager_twin: int = Field(default=0, description="times they ran in the eager twin (compile off)")
    not_reached: list[int] = Field(default_factory=list, description="lines of the hunk no run reached")


class Fix(BaseModel):
    """A fix the rehearsal read off a root cause: what to change, and whether a rerun with it proved it."""

    fix: str = Field(description="what to change, with the line to change")
    command: str | None = Field(default=None, description="the command that makes the change (generate), if any")
    cause: str = Field(default="", description="the root cause it answers, with its site")
    tried: Literal["proven", "disproven", "not tried"] = Field(
        description="proven: a rerun with it (same batches) removed what it aims at with parity held and keys "
        "unchanged; disproven: the rerun did not; not tried: it could not be tried here (the reason says why)"
    )
    reason: str | None = Field(default=None, description="what the rerun showed, or why it was not tried")
    status: str | None = Field(default=None, description="the rerun's own rehearsal status")
    figures: dict[str, Any] = Field(
        default_factory=dict,
        description="the rerun's figures beside the rehearsal's: limit hits, recompiles, compiled share, parity, keys",
    )
    shared_code: bool = Field(default=False, description="the edit is in code outside the recipe (shared code)")
    override: dict[str, Any] = Field(
        default_factory=dict, description="the run-time change the rerun applied (runtime/rehearsal/override.py)"
    )
    aims: list[str] = Field(default_factory=list, description="what it must improve: limit_hits, recompiles, coverage")


class CoverageEntry(BaseModel):
    """One module (repeated blocks collapsed, `layers.*`) of the coverage map."""

    module: str = Field(description="dotted path in the unwrapped model, `(model)` for the model itself")
    count: int = Field(default=1, description="how many modules the entry collapses (the blocks of `layers.*`)")
    class_name: str | None = None
    compiled: float = Field(description="share of its forward work that ran inside compiled graphs, 0..1")
    work: float = Field(description="its share of the model's forward work, 0..1")
    measure: str = Field(default="flops", description="what the shares weigh: flops, or ops where it has none")
    role: str = Field(default="target", description="target, kept eager (documented), or outside the targets")
    eager_causes: list[EagerCause] = Field(default_factory=list)
    base_compiled: float | None = Field(default=None, description="the base's share, on a change")


Owner = Literal["recipe", "change", "environment", "stand-in", "tool"]


class Attribution(BaseModel):
    """Whose failure one failure is, and the evidence that decides it."""

    failure: str = Field(description="the failure, as the rehearsal says it")
    owner: Owner = Field(
        description="recipe (its own code, with the tool's additions out of the way), change (new against a base "
        "that trains), environment (what this machine or interpreter lacks or has at another revision), stand-in "
        "(the rehearsal's model, config or data standing in for the real one), tool (model-compile's own code or "
        "instruments)"
    )
    part: str = Field(default="", description="which of it: its code, an instrument, the model, the data, a module...")
    evidence: list[str] = Field(default_factory=list, description="the frames that raised, what decided it")
    control: str | None = Field(
        default=None,
        description="the control run where frames do not decide (without the instrument, the base, compile off), and its result",
    )
    ruled_out: list[str] = Field(default_factory=list, description="owners the evidence rules out, and how")
    not_ruled_out: list[str] = Field(default_factory=list, description="what the evidence cannot rule out")
    supply: str | None = Field(default=None, description="the option or command that supplies what is missing")


class RehearsalStep(BaseModel):
    """One optimizer step of the rehearsal (its micro-steps), on rank 0: the compiled twin against the reference."""

    step: int
    micro_steps: int = 1
    shape: str = Field(description="the batch of each micro-step, as the recipe's data path made it")
    eager_s: float | None = None
    compiled_s: float | None = None
    grad_err: float | None = Field(default=None, description="compiled twin's gradient error to the reference")
    grad_err_eager: float | None = Field(default=None, description="the eager twin's error to the reference")
    grad_bound: float | None = None
    worst_grad: str | None = None
    loss_err: float | None = Field(default=None, description="the worst micro-step's loss error to the reference")
    loss_err_eager: float | None = None
    loss_bound: float | None = None
    recompiles: list[str] = Field(
        default_factory=list, description="'<frame (file:line)>: <failed guard>', one per new variant"
    )
    new_graphs: int | None = None
    limit_hits: list[str] = Field(default_factory=list)
    measured: bool = Field(
        default=False, description="the coverage map was measured on it (its time is left out of the steady figures)"
    )
    error: str | None = None


class RehearsalFacts(BaseModel):
    """The rehearsal layer: the recipe's own training run on a tiny model of its architecture (real depth, tiny
    width), in its precision, wrap and data path, eager twin(s) against the compiled run."""

    status: LayerStatus = "not-run"
    reason: str | None = None
    fault: str = Field(
        default="", description="the owner of the failure that stopped the run (see attribution): '' when none did"
    )
    attribution: list[Attribution] = Field(
        default_factory=list,
        description="whose each failure is (the run's stop and each judged problem), with evidence",
    )
    detail: str = Field(default="", description="the child's traceback tail when it stopped")
    label: str = Field(description="'cpu-only (tiny model)' or 'accelerator:<name> (tiny model)'")
    stage: str | None = None
    stage_reason: str | None = None
    model_source: str | None = Field(default=None, description="where the architecture and its depth come from")
    depth: dict[str, Any] = Field(default_factory=dict, description="layers per stack of the rehearsed model")
    depth_known: bool | None = None
    shrunk: list[str] = Field(default_factory=list, description="the widths shrunk (never depth)")
    checkpoint: str | None = None
    model_class: str | None = None
    parameters: int | None = None
    returned: str | None = Field(default=None, description="class of what prepare_model() returned")
    world_size: int = 1
    world_size_reason: str = ""
    wrap: str | None = Field(default=None, description="the wrap measured on the model prepare_model() returned")
    backend: str | None = None
    backend_reason: str | None = None
    mode: str | None = None
    precision: str | None = Field(default=None, description="the recipe's training precision, as its config says")
    twins: list[str] = Field(default_factory=list, description="the runs compared: reference, eager, compiled")
    parity_rule: str | None = None
    parity_inconclusive: str | None = Field(
        default=None, description="why the parity bound cannot tell here (the eager twin itself far off), or null"
    )
    batches: str | None = Field(default=None, description="where the batches came from, in words")
    batches_mode: str | None = Field(default=None, description="own, rows or batches")
    data_failure: str | None = Field(
        default=None,
        description="where and how the recipe's data path raised on the rehearsal's rows (file:line: error)",
    )
    token_counts: list[int] = Field(
        default_factory=list, description="the distinct token counts (sequence lengths) the compiled twin was fed"
    )
    accumulation: str | None = None
    steps_planned: int | None = None
    overrides: list[str] = Field(default_factory=list)
    compiled_modules: list[str] = Field(default_factory=list)
    compiled_module_count: int | None = None
    target_checks: list[str] = Field(default_factory=list)
    target_failures: list[str] = Field(default_factory=list)
    keys: dict[str, str] = Field(
        default_factory=dict, description="state_dict / parameters / dcp: unchanged or what changed"
    )
    key_failures: list[str] = Field(default_factory=list)
    key_lists: dict[str, list[str]] = Field(
        default_factory=dict,
        exclude=True,
        description="the keys of each checkpoint form (parameters, state_dict, dcp, optimizer, optimizer_by_name) "
        "on rank 0, compared with the base's (kept in the base's cache, not in the report)",
    )
    keys_across: list[str] = Field(
        default_factory=list,
        description="how the keys differ from the base's, form by form, and the save/resume path that breaks",
    )
    keys_documented: str | None = Field(
        default=None, description="the change's `# model-compile: keys - <reason>` comment (file:line: reason)"
    )
    steps: list[RehearsalStep] = Field(default_factory=list)
    recompile_frames: list[str] = Field(
        default_factory=list, description="'<n> recompile(s) in <frame> (last guard: ...)', most first"
    )
    recompile_count: int = Field(default=0, description="new compiled variants after the first compile, rank 0")
    near_limit: list[str] = Field(
        default_factory=list,
        description="frames at or one variant short of the recompile limit (a note, not the verdict)",
    )
    coverage: list[CoverageEntry] = Field(
        default_factory=list, description="what ran compiled: each module's compiled share of its forward work"
    )
    compiled_share: float | None = Field(
        default=None, description="share of the model's forward work (FLOPs) that ran inside compiled graphs"
    )
    backward_compiled_share: float | None = Field(default=None, description="the same of its backward work")
    coverage_note: str | None = Field(default=None, description="what the coverage map measured, where and its cost")
    coverage_failures: list[str] = Field(
        default_factory=list, description="compiled targets whose hot path ran eager (`compile has no effect on X`)"
    )
    coverage_unmeasured: list[str] = Field(
        default_factory=list,
        description="'coverage not measured for X (why)': regions the coverage map could not count (a higher-order "
        "operator's body run outside a compiled graph, the meter's own failure); the run went on",
    )
    block_parts: dict[str, list[str]] = Field(
        default_factory=dict, exclude=True, description="each repeated-block group: its parts carrying its work"
    )
    data_failure_raised: dict[str, Any] = Field(
        default_factory=dict, exclude=True, description="what raised in the recipe's data path, as the child read it"
    )
    batch_keys: list[str] = Field(
        default_factory=list, exclude=True, description="the keys of the batches the compiled twin was fed"
    )
    specialized_at: list[dict[str, str]] = Field(
        default_factory=list, exclude=True, description="the trace's size specializations, as read"
    )
    changed_lines: list[ChangedLines] = Field(
        default_factory=list, description="the change's hunks in files the run imports, and whether they ran"
    )
    changed_note: str | None = Field(default=None, description="how the changed lines were counted, what is unknown")
    changed_imported: dict[str, bool] = Field(
        default_factory=dict,
        description="each changed Python file (from the repository root): whether the rehearsal's run imported it",
    )
    specialized: list[str] = Field(
        default_factory=list, description="lines of code that fixed a size to a constant (each new size recompiles)"
    )
    graph_break_sites: list[GraphBreakSite] = Field(default_factory=list)
    code_ids: dict[str, str] = Field(
        default_factory=dict,
        description="each repository file:line the sites mention -> the statement there (file, scope, its text, "
        "which of the equal ones): head and base sites are compared by it, so a statement that moved is the same",
    )
    graph_break_count: int = Field(default=0, description="graph breaks in the compiled twin's trace, rank 0")
    graph_break_site_count: int = Field(default=0, description="distinct file:line sites of those breaks")
    ranks: list[str] = Field(default_factory=list, description="per rank: graphs, recompiles, limit hits")
    sync: str | None = Field(default=None, description="gradient sync on micro-steps that should not sync")
    fixes: list[Fix] = Field(
        default_factory=list, description="fixes read off the root causes, each tried by a rerun or said not tried"
    )
    first_step_s: float | None = None
    steady_step_s: float | None = None
    steady_steps: int | None = Field(
        default=None, description="how many optimizer steps the steady figure is the median of"
    )
    eager_step_s: float | None = None
    trace_compile_s: float | None = None
    wall_s: float = 0.0
    server_start_s: float | None = Field(
        default=None,
        description="of the wall, the fork server's start: the interpreter and one import of torch and "
        "transformers that every twin shares (None: each rank started a process of its own)",
    )
    timings: dict[str, float] = Field(
        default_factory=dict,
        description="where the wall went, in seconds: server (the fork server's start), each twin (reference, "
        "eager, compiled: its ranks from fork to exit), read (the parent reading records and the trace), trials "
        "(the fixes' reruns), base (the base's rehearsal, 0 when cached)",
    )
    peak_rss_mb: float | None = None
    cpu_s: float | None = Field(
        default=None, description="CPU seconds of every child (steadier than wall on a shared machine)"
    )
    torch: str | None = None
    device: str | None = None
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    limits: str = ""
    log: str | None = None
    record: str | None = Field(default=None, description="the folder of the children's records, logs and traces")
    models: list[dict[str, Any]] = Field(
        default_factory=list,
        description="every model the recipe built, measured in the child: class, role, source (where its config "
        "came from), parameters, trainable, stacks ({path: 'N Block'}, the repeated blocks counted on the built "
        "module tree), shrunk (widths, never depth)",
    )
    loads: list[dict[str, Any]] = Field(
        default_factory=list,
        description="each from_pretrained of the run: class, kind, name, to (the folder read: the rehearsal's "
        "checkpoint, or a stand-in of name), source (where the stand-in's config came from)",
    )
    user_overrides: list[str] = Field(
        default_factory=list, description="--config-override K=V, applied before the rehearsal's own overrides"
    )
    memory: dict[str, Any] = Field(
        default_factory=dict,
        description="the check before stepping (rank 0): rss_mb, more_mb expected per twin, available_mb, source",
    )
    rank_rss: list[str] = Field(
        default_factory=list, description="each twin's ranks' resident memory as the parent sampled it (peak)"
    )
    batches_seen: dict[str, Any] = Field(
        default_factory=dict,
        description="what the train loader handed the model (rank 0 of the compiled twin, else the eager one): "
        "keys ({key: dtype}), described (the first batches, {key: 'dtype shape'}), batches by source "
        "(recipe or tool), samples, rows, most_in_a_row, counted_by",
    )
    packing: str | None = Field(default=None, description="the packing the batches showed (measured, not configured)")
    rows_dropped: str | None = Field(
        default=None,
        description="rows the recipe's data path read and did not hand the model, and the reasons its log gives",
    )
    environment_drift: list[str] = Field(
        default_factory=list,
        description="each package the run imported whose version differs from the repository's pin (uv.lock, "
        "requirements, pyproject)",
    )
    base: RehearsalFacts | None = Field(default=None, description="the same rehearsal of the change's base")
    base_rev: str | None = None
    versus_base: list[str] = Field(
        default_factory=list, description="each measure marked new with the change or already there"
    )
    regressions: list[str] = Field(
        default_factory=list, description="what the change made worse than its base (each fails the rehearsal)"
    )
    existing: bool | None = Field(
        default=None,
        description="failed on the base too with nothing made worse (true), or failed because of the change",
    )
    answered_by: str | None = Field(
        default=None, description="the recipe whose rehearsal of the same question these facts are (not run again)"
    )
    fix_applied: list[str] = Field(
        default_factory=list, description="a fix's rerun: what its override changed in the run, as the child saw it"
    )

    @property
    def recompiles(self) -> list[str]:
        return [f"step {s.step} ({s.shape}): {r}" for s in self.steps for r in s.recompiles]

    @property
    def limit_hits(self) -> list[str]:
        return [f"step {s.step} ({s.shape}): {h}" for s in self.steps for h in s.limit_hits]


RehearsalFacts.model_rebuild()
