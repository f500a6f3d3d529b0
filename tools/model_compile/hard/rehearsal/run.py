"""Run a planned rehearsal: the prepare child, then each twin on its ranks, in the repository's interpreter.

Each child is `python -m model_compile.runtime.rehearsal SPEC.json TWIN`, one process group per rank, the
ranks of a twin started together (`RANK`, `WORLD_SIZE`, a free `MASTER_PORT`, as a launcher sets them), the
whole rehearsal bounded by one timeout. A rank that exits non-zero gives the others a short grace, then
every group is ended (a rank waiting in a collective for a dead peer would wait forever); Ctrl-C and a
timeout end every group too. Only the compiled twin is traced (`TORCH_TRACE`), with a fresh Inductor cache.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from model_compile.hard.env import proc
from model_compile.hard.env.forkserver import ForkServer, ForkServerError
from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.env.memwatch import MemoryWatch
from model_compile.hard.models import Attribution, Environment, LayerResult, RehearsalFacts
from model_compile.hard.rehearsal.planning.plan import Plan
from model_compile.hard.rehearsal.reading import attribution, judge
from model_compile.hard.rehearsal.seen import faults as seen_faults
from model_compile.runtime.rehearsal.config import precision_plan

LIMITS = (
    "a tiny model cannot show: kernel speed, real-size memory, flash-attention varlen kernels, accelerator "
    "collectives (NCCL), the real data's own shapes"
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command(recipe_root: Path, plan: Plan, python: str | None, extra: list[str] | None = None) -> str:
    """The `model-compile rehearse` command that reruns exactly this rehearsal."""
    parts = ["model-compile", "rehearse", str(recipe_root), "--config-name", plan.stage]
    if python:
        parts += ["--python", python]
    parts += ["--backend", plan.backend, "--world-size", str(plan.world.world_size), *(extra or [])]
    return shlex.join(parts)


def child_env(base: dict[str, str], out_dir: Path, rank: int, world: int, port: int, trace: bool) -> dict[str, str]:
    env = dict(base)
    env.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "TORCHINDUCTOR_CACHE_DIR": str(out_dir / "inductor-cache"),
            "TOKENIZERS_PARALLELISM": "false",
            "WANDB_MODE": "disabled",
            "HF_HUB_OFFLINE": "1",
            "HF_MODULES_CACHE": str(out_dir / "hf-modules"),  # a stand-in's remote code: in the rehearsal's folder
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",  # nothing is written into the repository, not even __pycache__
        }
    )
    if world > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # N ranks share the machine's cores
    if trace:
        env["TORCH_TRACE"] = str(out_dir / "trace")
    else:
        env.pop("TORCH_TRACE", None)
    return env


def read_record(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


STALE = ("record-*.json", "tensors-*.pt", "init-*.pt", "trace/dedicated_log_torch_trace*.log")


def clear_stale(out_dir: Path) -> None:
    """A reused --out: an earlier run's records, tensors, trace and stand-ins go, so only this run's are read (a
    stand-in made by another run, or another version of the tool, is not this run's)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for pattern in STALE:
        for stale in out_dir.glob(pattern):
            stale.unlink()
    shutil.rmtree(out_dir / "models", ignore_errors=True)


def run(
    plan: Plan,
    interp: Interpreter,
    env: dict[str, str],
    out_dir: Path,
    timeout_s: float,
    label: str,
    done: dict[str, list[dict[str, Any]]] | None = None,
    only: list[str] | None = None,
) -> RehearsalFacts:
    """Run every child; read their records and the compiled twin's trace into the facts. `done`: the records of
    twins that already ran and `only` the twins to run (a fix's rerun runs the compiled twin alone, against the
    rehearsal's other twins)."""
    clear_stale(out_dir)
    spec = plan.spec
    spec_path = out_dir / "spec.json"
    repo = Path(spec["repo_root"])
    cmd = [interp.path, "-m", "model_compile.runtime.rehearsal", str(spec_path)]
    started = time.monotonic()
    deadline = started + timeout_s
    facts = judge.planned_facts(plan, label, out_dir, LIMITS)
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    world = plan.world.world_size
    records: dict[str, list[dict[str, Any]]] = dict(done or {})
    twins = list(only or ["reference", "eager", "compiled"])
    server = _fork_server(interp, repo, env, out_dir, world, facts)
    facts.server_start_s = server.ready_s if server is not None else None
    try:
        _twins(facts, plan, server, cmd, repo, env, out_dir, world, records, twins, deadline, timeout_s)
    finally:
        if server is not None:
            server.close()
    facts.wall_s = round(time.monotonic() - started, 2)
    read_started = time.monotonic()
    judge.read(facts, plan, records, out_dir / "trace", repo)
    attribution.attribute(facts, records, repo)
    facts.timings["read"] = round(time.monotonic() - read_started, 2)
    if facts.server_start_s is not None:
        facts.timings["server"] = facts.server_start_s
    write_summary(facts, out_dir)
    return facts


def _fork_server(
    interp: Interpreter, repo: Path, env: dict[str, str], out_dir: Path, world: int, facts: RehearsalFacts
) -> ForkServer | None:
    """The fork server every child comes from (torch imported once), or None: one process a rank then."""
    if os.environ.get("MODEL_COMPILE_FORK_SERVER", "on").lower() in ("0", "off", "no", "false"):
        return None
    common = child_env(env, out_dir, 0, world, 0, False)
    for key in ("RANK", "LOCAL_RANK", "MASTER_PORT"):
        common.pop(key, None)
    try:
        return ForkServer(interp.path, repo, common, out_dir / "logs" / "zygote.log")
    except (ForkServerError, OSError) as exc:
        facts.notes.append(f"the fork server did not start ({exc}): each rank is a process of its own")
        return None


def _twins(
    facts: RehearsalFacts,
    plan: Plan,
    server: ForkServer | None,
    cmd: list[str],
    repo: Path,
    env: dict[str, str],
    out_dir: Path,
    world: int,
    records: dict[str, list[dict[str, Any]]],
    twins: list[str],
    deadline: float,
    timeout_s: float,
) -> None:
    """The twins in order, each on its ranks; stops at the first that does not finish."""
    spec = plan.spec
    spec_path = out_dir / "spec.json"
    logs = out_dir / "logs"
    # the reference twin runs first; its rank 0 first writes the tiny checkpoint and rows and reads the
    # recipe's precision (record-prepare-rank0.json): one process start less than a child of its own
    for twin in twins:
        twin_started = time.monotonic()
        left = deadline - time.monotonic()
        port = free_port()
        envs = [child_env(env, out_dir, r, world, port, twin == "compiled") for r in range(world)]
        rank_logs = [logs / f"{twin}-rank{r}.log" for r in range(world)]
        watch = MemoryWatch()
        if server is not None:
            results, _, timed_out = server.run_ranks(
                [str(spec_path), twin], envs, max(left, 1.0), rank_logs, watch=watch
            )
        else:
            results, _, timed_out = proc.run_ranks(cmd + [twin], repo, envs, max(left, 1.0), rank_logs, watch=watch)
        seen_faults.rank_memory(facts, twin, results)
        facts.timings[twin] = round(time.monotonic() - twin_started, 2)
        records[twin] = [read_record(out_dir / f"record-{twin}-rank{r}.json") for r in range(world)]
        if twin == "reference":
            prepared = read_record(out_dir / "record-prepare-rank0.json")
            records["prepare"] = [prepared]
            if prepared.get("status") != "done":
                judge.stopped(facts, "prepare", [prepared], timed_out, timeout_s, "", results)
                return
            spec["precision"] = precision_plan((prepared.get("phases") or {}).get("precision") or {})
            if spec.get("checkpoint"):
                ready = ((prepared.get("phases") or {}).get("checkpoint") or {}).get("reference_dir")
                spec["checkpoint"]["reference_ready"] = bool(ready)
            spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
        failed = timed_out or any(rec.get("status") != "done" for rec in records[twin])
        fault = next((r.get("fault") for r in records[twin] if r.get("status") not in ("done", None)), "")
        killed = any(r.killed or (r.exit_status or 0) < 0 for r in results)
        if (
            failed
            and twin == "reference"
            and spec["precision"].get("reference_dtype") == "float64"
            and not timed_out
            and not killed
            and fault not in ("environment", "input", "stand-in")
        ):
            # the recipe's code does not run in float64: the eager twin is the reference, at a fixed tolerance
            why = next((r.get("reason") for r in records[twin] if r.get("status") != "done"), "") or "it stopped"
            facts.notes.append(f"a float64 reference could not run ({why}): the eager fp32 twin is the reference")
            spec["precision"]["reference_dtype"] = None
            spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
            records.pop("reference")
            for stale in out_dir.glob("*-reference-rank*.p*"):
                stale.unlink()
            continue
        if failed:
            judge.stopped(facts, twin, records[twin], timed_out, timeout_s, "", results)
            return


def write_summary(facts: RehearsalFacts, out_dir: Path) -> None:
    """rehearsal.json: the judged verdict first (the children's records only say whether they finished)."""
    verdict = {"status": facts.status, "reason": facts.reason, "judged_by": "model-compile (the parent process)"}
    try:
        (out_dir / "rehearsal.json").write_text(
            json.dumps({"verdict": verdict, **facts.model_dump()}, indent=2, default=str), encoding="utf-8"
        )
    except OSError:
        pass


def label_of(environment: Environment) -> str:
    """The label every rehearsal carries: where it ran, and that its model is tiny."""
    return f"{environment.label} (tiny model)"


def not_run(
    reason: str, label: str, owner: str | None = None, part: str = "", supply: str | None = None
) -> RehearsalFacts:
    """A rehearsal that did not start; `owner`: whose the reason is (a recipe not wired for compile, the
    environment's missing modules, a stand-in's unreadable config)."""
    facts = RehearsalFacts(status="not-run", reason=reason, label=label, limits=LIMITS)
    if owner:
        facts.fault = owner
        facts.attribution = [
            Attribution(failure=reason, owner=owner, part=part, evidence=[reason], supply=supply)  # type: ignore[arg-type]
        ]
    return facts


def to_layer(facts: RehearsalFacts, cmd: str, cwd: str, where: str) -> LayerResult:
    """The validation-table row of this rehearsal."""
    layer = LayerResult(
        name="rehearsal",
        status=facts.status,
        label=facts.label,
        command=cmd,
        cwd=cwd,
        duration_s=facts.wall_s,
        reason=facts.reason,
        where=where if facts.wall_s else "-",
        log=facts.log,
        started=bool(facts.wall_s),
        existing=facts.existing,
    )
    if facts.status in ("not-run", "failed", "timeout", "tool-error"):
        layer.next_step = cmd
    elif facts.status == "passed" and facts.near_limit:
        # a pass that a longer run can lose: the row says so, not only a line further down
        first = facts.near_limit[0].removesuffix(judge.NEAR_SIZED).removesuffix(judge.NEAR_CLOSE)
        more = f" (and {len(facts.near_limit) - 1} more frame(s))" if len(facts.near_limit) > 1 else ""
        layer.reason = f"near the recompile limit: {first}{more}; a longer run with new sizes may hit it"
    return layer
