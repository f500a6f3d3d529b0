"""The rehearsal layer: run the planned child in the repository's interpreter and judge what it recorded.

The child (`model_compile.runtime.rehearsal`, from the probe on PYTHONPATH)
runs in its own process group with a timeout, one rank (`RANK=0`,
`WORLD_SIZE=1`, a free `MASTER_PORT`), a fresh Inductor cache and a
`TORCH_TRACE` folder. Graph-break sites with their `file:line` come from that
trace (user code named relative to the repository, library frames named as
such); parity, keys, recompiles and recompile-limit hits per step come from the
child's record.

Status: `passed` (every step within tolerance, keys unchanged, no
recompile-limit hit, the compiled targets compiled, something compiled);
`failed` (any of those, or compile-on raised where compile-off did not);
`not-run` (the plan or the eager twin could not be set up: the reason says
what and which flag helps); `timeout`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import time
from pathlib import Path
from typing import Any

from model_compile.hard.env import proc
from model_compile.hard.env.interpreter import Interpreter
from model_compile.hard.models import GraphBreakSite, LayerResult, RehearsalFacts, RehearsalStep
from model_compile.hard.rehearsal.plan import Plan
from model_compile.hard.rehearsal.render import readable_guard
from model_compile.hard.trace import LOG_GLOB, break_parts, records

LIMITS = (
    "a tiny model cannot show: kernel speed, real-size memory, flash-attention varlen kernels, "
    "multi-rank sharding (FSDP2/TP), the real data pipeline"
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
    parts += ["--backend", plan.backend, *(extra or [])]
    return shlex.join(parts)


def child_env(base: dict[str, str], out_dir: Path) -> dict[str, str]:
    env = dict(base)
    env.update(
        {
            "RANK": "0",
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "1",
            "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(free_port()),
            "TORCH_TRACE": str(out_dir / "trace"),
            "TORCHINDUCTOR_CACHE_DIR": str(out_dir / "inductor-cache"),
            "TOKENIZERS_PARALLELISM": "false",
            "WANDB_MODE": "disabled",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",  # nothing is written into the repository, not even __pycache__
        }
    )
    return env


def run(
    plan: Plan, interp: Interpreter, env: dict[str, str], out_dir: Path, timeout_s: float, label: str
) -> RehearsalFacts:
    """Run the child; read its record and its trace."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_path = out_dir / "spec.json"
    spec_path.write_text(json.dumps(plan.spec, indent=2), encoding="utf-8")
    result_path = Path(plan.spec["out"])
    if result_path.exists():
        result_path.unlink()
    cmd = [interp.path, "-m", "model_compile.runtime.rehearsal", str(spec_path)]
    started = time.monotonic()
    res = proc.run(cmd, Path(plan.spec["repo_root"]), child_env(env, out_dir), timeout_s, out_dir / "rehearsal.log")
    facts = RehearsalFacts(
        stage=plan.stage,
        stage_reason=plan.stage_reason,
        family=plan.family,
        family_source=plan.family_source,
        backend=plan.backend,
        backend_reason=plan.backend_reason,
        mode=plan.mode,
        overrides=list(plan.overrides),
        notes=list(plan.notes),
        label=label,
        wall_s=round(time.monotonic() - started, 2),
        log=str(out_dir / "rehearsal.log"),
        record=str(plan.spec["out"]),
        limits=LIMITS,
    )
    record: dict[str, Any] = {}
    try:
        record = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    interpret(facts, record, res, timeout_s)
    facts.graph_break_sites, facts.trace_compile_s = read_trace(out_dir / "trace", Path(plan.spec["repo_root"]))
    judge(facts)
    if record:  # the child's `status` says only that it finished: the judged verdict goes first in the same file
        verdict = {"status": facts.status, "reason": facts.reason, "judged_by": "model-compile (the parent process)"}
        try:
            result_path.write_text(json.dumps({"verdict": verdict, **record}, indent=2), encoding="utf-8")
        except OSError:
            pass
    return facts


def interpret(facts: RehearsalFacts, record: dict[str, Any], res: proc.ProcResult, timeout_s: float) -> None:
    phases = record.get("phases") or {}
    facts.peak_rss_mb = record.get("peak_rss_mb")
    facts.cpu_s = record.get("cpu_s")
    facts.torch = record.get("torch")
    device = record.get("device") or {}
    facts.device = device.get("name") if device.get("type") != "cpu" else "cpu"
    checkpoint = phases.get("checkpoint") or {}
    if checkpoint.get("ok"):
        facts.model_class = checkpoint.get("class")
        facts.checkpoint = (
            f"{checkpoint.get('class')} ({checkpoint.get('parameters')} parameters, seed {checkpoint.get('seed')})"
        )
        facts.notes += list(checkpoint.get("notes") or [])
    eager = phases.get("eager") or {}
    if eager.get("ok"):
        facts.model_class = eager.get("model")
        facts.parameters = eager.get("parameters")
        facts.returned = eager.get("returned")
    compiled = phases.get("compiled") or {}
    if compiled.get("ok"):
        facts.compiled_modules = list(compiled.get("compiled_modules") or [])
        facts.compiled_module_count = compiled.get("compiled_module_count")
        targets = compiled.get("targets") or {}
        facts.target_checks = [c.get("text", "") for c in targets.get("target_checks", [])]
        facts.target_failures = list(targets.get("target_failures") or [])
        for region in compiled.get("disabled") or []:
            if region.get("present") and not region.get("eager"):
                facts.target_failures.append(f"`{region['region']}` is not kept eager (its forward is not disabled)")
            elif region.get("present"):
                facts.target_checks.append(f"`{region['region']}` kept eager (torch.compiler.disable)")
            else:
                facts.target_checks.append(f"`{region['region']}`: not present in this model (nothing to keep eager)")
    keys = (phases.get("keys") or {}).get("compare") or {}
    for name, cmp in keys.items():
        if not cmp.get("checked"):
            facts.keys[name] = f"not checked ({cmp.get('reason')})"
        elif cmp.get("same"):
            facts.keys[name] = f"{cmp.get('count')} unchanged"
        else:
            facts.keys[name] = _key_change(cmp)
            facts.key_failures.append(f"{name} keys changed: {facts.keys[name]}")
    repo = str(record.get("repo_root") or "")
    batches = record.get("batches") or {}
    facts.path = batches.get("path")
    facts.packed = batches.get("packed")
    facts.notes += list(record.get("notes") or [])
    for row in record.get("steps") or []:
        facts.steps.append(
            RehearsalStep(
                step=int(row.get("step", 0)),
                shape=str(row.get("shape", "")),
                eager_s=row.get("eager_s"),
                compiled_s=row.get("compiled_s"),
                loss_rel_err=(row.get("loss") or {}).get("rel_err"),
                logits_rel_err=row.get("logits_rel_err"),
                grad_rel_err=(row.get("grads") or {}).get("rel_err"),
                worst_grad=(row.get("grads") or {}).get("worst") or None,
                tolerance=row.get("tolerance"),
                tolerance_class=row.get("tolerance_class"),
                recompiles=[_rel(f"{r['frame']}: {r['guard']}", repo) for r in row.get("recompiles") or []],
                graph_breaks=sum((row.get("graph_breaks") or {}).values()),
                new_graphs=row.get("new_graphs"),
                limit_hits=list(dict.fromkeys(_rel(h, repo) for h in row.get("limit_hits") or [])),
                error=row.get("error"),
            )
        )
    timing = record.get("timing") or {}
    facts.first_step_s = timing.get("first_step_s")
    facts.steady_step_s = timing.get("steady_step_s")
    facts.steady_steps = timing.get("steady_steps")
    facts.eager_step_s = timing.get("eager_step_s")
    if res.timed_out:
        facts.status = "timeout"
        done = ", ".join(p for p, v in phases.items() if v.get("ok")) or "nothing"
        facts.reason = f"no result after {timeout_s:g} s (done: {done}); the process group was killed"
        return
    status = record.get("status")
    if status in ("not-run", "failed"):
        facts.status = status
        facts.reason = record.get("reason")
        facts.detail = ((phases.get(record.get("stopped_at") or "") or {}).get("detail") or "")[-2000:]
        return
    if status != "done":
        facts.status = "failed"
        facts.reason = (
            f"the rehearsal child exited {res.exit_status} without a result"
            + (f" (last phase done: {list(phases)[-1]})" if phases else "")
            + f": {proc.tail(res.output, 3, 400)}"
        )
        return
    facts.status = "passed"


def _key_change(cmp: dict[str, Any]) -> str:
    """What changed between the eager twin's keys and the compiled model's, in one line."""
    added = cmp.get("only_compiled") or []
    if cmp.get("orig_mod") and all("_orig_mod." in k for k in added):
        return f"{cmp['orig_mod']} of {cmp.get('count')} gain the '_orig_mod.' prefix (e.g. {added[0]!r})"
    return f"changed (only eager: {cmp.get('only_eager')}; only compiled: {added})"


def _rel(text: str, repo_root: str) -> str:
    """Paths of the repository's own files shown relative to it; installed packages as `<site-packages>/...`."""
    if repo_root:
        text = text.replace(repo_root.rstrip("/") + "/", "")
    return re.sub(r"(?<![\w<])[^\s'(]*?(?:site|dist)-packages/", "<site-packages>/", text)


def judge(facts: RehearsalFacts) -> None:
    """Fail on parity, keys, limit hits, target checks, or nothing compiled (only after a complete run)."""
    if facts.status != "passed":
        return
    problems: list[str] = []
    for step in facts.steps:
        tol = step.tolerance or 0.0
        for what, err in (
            ("loss", step.loss_rel_err),
            ("logits", step.logits_rel_err),
            ("gradients", step.grad_rel_err),
        ):
            if err is not None and err > tol:
                worst = f" (worst: {step.worst_grad})" if what == "gradients" and step.worst_grad else ""
                problems.append(f"{what} differ at step {step.step} ({step.shape}): {err:.2e} > {tol:.2g}{worst}")
    problems += facts.key_failures  # correctness first, then scope, then what recompiles
    problems += [f"compiled target: {t}" for t in facts.target_failures]
    seen_hits: set[str] = set()
    for step in facts.steps:
        for hit in step.limit_hits:
            frame = hit.split(" last reason", 1)[0]
            if frame not in seen_hits:  # one line per frame: the first step that hit it
                seen_hits.add(frame)
                problems.append(f"recompile limit hit at step {step.step} ({step.shape}): {readable_guard(hit)[:300]}")
    if not any((s.new_graphs or 0) > 0 for s in facts.steps) and facts.compiled_module_count == 0:
        problems.append("nothing was compiled: no compiled module and no graph")
    elif not any((s.new_graphs or 0) > 0 for s in facts.steps):
        problems.append("no graph was compiled during the steps (the model ran eager)")
    if problems:
        facts.status = "failed"
        facts.reason = problems[0] + (
            f" (+{len(problems) - 1} more problem(s), listed with it)" if len(problems) > 1 else ""
        )
        facts.problems = problems


def read_trace(trace_dir: Path, repo_root: Path) -> tuple[list[GraphBreakSite], float | None]:
    """From the child's TORCH_TRACE, in one pass: graph-break sites (user code relative to the repo, library
    frames named) and the seconds dynamo spent compiling frames (None when no frame was compiled)."""
    counts: dict[tuple[str, str], int] = {}
    seconds, seen = 0.0, False
    logs = sorted(trace_dir.glob(LOG_GLOB)) if trace_dir.is_dir() else []
    for log in logs:
        for _pid, rec, payload in records(log):
            metrics = rec.get("compilation_metrics")
            if isinstance(metrics, dict) and isinstance(metrics.get("entire_frame_compile_time_s"), (int, float)):
                seconds += float(metrics["entire_frame_compile_time_s"])
                seen = True
            if (rec.get("artifact") or {}).get("name") != "dynamo_graph_break_reason":
                continue
            lines, where, headline, _ = break_parts(payload)
            if not where:  # e.g. "WON'T CONVERT <frame> <file> line <n>": a frame dynamo skipped
                m = re.search(r"(\S+\.py)\s+line\s+(\d+)", payload)
                where = f"{m.group(1)}:{m.group(2)}" if m else "(no user frame)"
            key = (site_name(where, repo_root), (headline or (lines[0] if lines else "?"))[:200])
            counts[key] = counts.get(key, 0) + 1
    sites = [GraphBreakSite(site=s, reason=r, count=n) for (s, r), n in counts.items()]
    sites.sort(key=lambda g: (g.site.startswith("library"), -g.count, g.site))
    return sites, (round(seconds, 2) if seen else None)


def site_name(where: str, repo_root: Path) -> str:
    """`recipes/x/model.py:12` for the repository's code; `library transformers/...:34` for installed packages."""
    path, _, line = where.rpartition(":")
    if not path:
        return where
    try:
        rel = os.path.relpath(path, repo_root)
    except ValueError:
        rel = path
    if not rel.startswith("..") and "site-packages" not in rel and ".venv" not in Path(rel).parts:
        return f"{rel}:{line}"
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return f"library {path.split(marker, 1)[1]}:{line}"
    return f"library {path}:{line}"


def not_run(reason: str, label: str) -> RehearsalFacts:
    return RehearsalFacts(status="not-run", reason=reason, label=label, limits=LIMITS)


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
    )
    if facts.status in ("not-run", "failed", "timeout"):
        layer.next_step = cmd
    return layer
