"""Read the rehearsal's records into its facts, and judge them.

Status: `passed` (every optimizer step's gradients and every loss within the measured bound, keys unchanged,
no recompile-limit hit, the compiled targets compiled, something compiled, no gradient sync the eager run does
not do); `failed` (any of those, or the compiled twin raised where the eager twins did not); `not-run` (the
plan, the prepare child or an eager twin could not run: the recipe's run fails without compile, or its set-up
needs what is not here); `tool-error` (model-compile's own code failed: never the recipe's failure);
`timeout`.

Counts are one definition everywhere: a recompile is one new compiled variant of a frame; graph breaks and
their sites come from the compiled twin's trace on rank 0; the steady step is the median of the optimizer
steps that compiled nothing new.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from model_compile.hard.models import RehearsalFacts, RehearsalStep
from model_compile.hard.rehearsal.planning.plan import Plan
from model_compile.hard.rehearsal.reading import changes, coverage, identity, keys, ranks
from model_compile.hard.rehearsal.reading.fixes import fixes, readable_guard
from model_compile.hard.rehearsal.reading.sites import scan
from model_compile.hard.rehearsal.seen import batches, faults, read_all

# the tails of a near-limit note after its figures (`frame: N compiled variants of L after S optimizer steps`)
NEAR_SIZED = (
    ", one per new input size: a longer run, with more sizes than these steps had, hits the limit "
    "and runs this frame eager from then on"
)
NEAR_CLOSE = ": close to the limit"

_SIZE = "size mismatch at index"


def planned_facts(plan: Plan, label: str, out_dir: Path, limits: str) -> RehearsalFacts:
    data = plan.data
    return RehearsalFacts(
        status="passed",
        label=label,
        stage=plan.stage,
        stage_reason=plan.stage_reason,
        model_source=plan.model.source,
        depth=dict(plan.model.depth),
        depth_known=plan.model.depth_known,
        shrunk=list(plan.model.shrunk),
        world_size=plan.world.world_size,
        world_size_reason=plan.world.reason,
        wrap=plan.world.wrap,
        backend=plan.backend,
        backend_reason=plan.backend_reason,
        mode=plan.mode,
        batches_mode=data.mode,
        batches=_batches_text(data.mode, data.reason, data.regime, data.regime_reason, data.max_seq_len),
        accumulation=data.accumulation,
        steps_planned=plan.steps,
        overrides=list(plan.overrides),
        notes=list(plan.notes),
        limits=limits,
        log=str(out_dir / "logs"),
        record=str(out_dir),
    )


def _batches_text(mode: str, reason: str, regime: str, regime_reason: str, seq: int | None) -> str:
    shape = f"{'full packs of' if regime == 'full' else 'rows of up to'} {seq} tokens" if seq else "its own shapes"
    if mode == "own":
        return f"the recipe's data path, as it is ({reason})"
    if mode == "rows":
        return f"the recipe's data path on synthetic rows ({reason}); expected: {shape} ({regime_reason})"
    return f"synthetic batches, {shape} ({regime_reason}), because {reason}"


def _first_failure(recs: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    for rank, rec in enumerate(recs):
        if rec.get("status") not in ("done",):
            if rec.get("status") in ("failed", "not-run", "tool-error"):
                return rank, rec
    return None


def note_feed(facts: RehearsalFacts, feed: dict[str, Any]) -> None:
    """Synthetic batches that stood in for the recipe's at run time: the figures' source, and why."""
    if feed.get("mode") != "batches" or facts.batches_mode == "batches":
        return
    facts.batches_mode = "batches"
    facts.batches = (
        f"synthetic batches ({feed.get('batches')}), which every figure here comes from, because {feed.get('reason')}"
    )
    hint = batches.shortened(facts) if feed.get("starved") else ""  # the rows dropped: a length it shortened?
    facts.notes.append(f"the recipe's data path did not feed the model here: {feed.get('reason')}{hint}")
    facts.data_failure = feed.get("failure")
    facts.data_failure_raised = dict(feed.get("raised_in") or {})


def stopped(
    facts: RehearsalFacts,
    twin: str,
    recs: list[dict[str, Any]],
    timed_out: bool,
    timeout_s: float,
    tail: str,
    ranks: list[Any] | None = None,
) -> None:
    """A child did not finish: who, why, and whose fault."""
    if faults.machine_fault(facts, twin, recs, ranks, timed_out):
        return
    done = ", ".join(p for rec in recs[:1] for p, v in (rec.get("phases") or {}).items() if v.get("ok")) or "nothing"
    if timed_out and twin == "compiled":
        facts.status = "timeout"
        facts.reason = f"no result after {timeout_s:g} s ({twin}: done {done}); every process group was ended"
        return
    if timed_out:  # compile was off: too slow here, or a hang of the recipe's own, never compile's
        facts.status, facts.fault = "not-run", "environment"
        facts.reason = (
            f"the {twin} run (compile off) gave no result after {timeout_s:g} s (done: {done}), so compile cannot "
            "be judged; every process group was ended (a longer --timeout or fewer --steps give it room)"
        )
        return
    found = _first_failure(recs)
    if found is None:
        crashed = [r for r in ranks or [] if r.exit_status not in (0, None) or r.killed]
        first = next((r for r in crashed if not r.killed), crashed[0] if crashed else None)
        facts.status = "tool-error" if twin == "prepare" else "failed" if twin == "compiled" else "not-run"
        who = f"rank {first.rank} of the {twin} run" if first else f"the {twin} child"
        code = f"exited {first.exit_status}" if first and first.exit_status is not None else "was ended"
        code += f" without a record{faults.note(first)}"
        facts.reason = f"{who} {code} (last phase done: {done})" + (f": {tail}" if tail else "")
        if first is not None:
            facts.notes.append(f"{who}'s log: {first.log}")
        return
    rank, rec = found
    note_feed(facts, rec.get("feed") or {})  # a twin that stopped on the tool's batches: why they stood in
    status = rec.get("status")
    phase = rec.get("stopped_at") or ""
    detail = ((rec.get("phases") or {}).get(phase) or {}).get("detail") or ""
    facts.detail = detail[-2000:]
    where = f" (rank {rank})" if len(recs) > 1 else ""
    if status == "tool-error":
        facts.status, facts.fault = "tool-error", "tool"
        facts.reason = f"{rec.get('reason')}{where}: a fault of model-compile, not of the recipe"
    elif twin == "compiled" and status == "failed":
        facts.status = "failed"
        facts.reason = f"{rec.get('reason')}{where}; the eager twin ran the same steps"
    else:
        facts.status = "not-run"
        what = {
            "prepare": "setting up",
            "reference": "the fp32 reference (compile off)",
            "eager": "the eager twin (compile off)",
        }
        facts.reason = f"{what.get(twin, twin)} failed{where}, so compile cannot be judged: {rec.get('reason')}"


def _micro(recs: dict[str, list[dict[str, Any]]], twin: str, rank: int = 0) -> list[dict[str, Any]]:
    rows = recs.get(twin) or []
    return list((rows[rank] if rank < len(rows) else {}).get("micro_steps") or [])


def _by_step(micro: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for row in micro:
        out.setdefault(int(row.get("step", 0)), []).append(row)
    return out


def _rel(text: str, repo_root: str) -> str:
    if repo_root:
        text = text.replace(repo_root.rstrip("/") + "/", "")
    return re.sub(r"(?<![\w<])[^\s'(]*?(?:site|dist)-packages/", "<site-packages>/", text)


def read(facts: RehearsalFacts, plan: Plan, recs: dict[str, list[dict[str, Any]]], trace_dir: Path, repo: Path) -> None:
    """Everything the records say, then the verdict (when every child finished)."""
    repo_s = str(repo)
    facts.twins = [t for t in ("reference", "eager", "compiled") if recs.get(t)]
    prepared = (recs.get("prepare") or [{}])[0]
    phases = prepared.get("phases") or {}
    ckpt = phases.get("checkpoint") or {}
    if ckpt.get("ok"):
        facts.checkpoint = f"{ckpt.get('class')} ({ckpt.get('parameters'):,} parameters, seed {ckpt.get('seed')})"
        facts.model_class = ckpt.get("class")
    precision = phases.get("precision") or {}
    if precision.get("ok"):
        facts.precision = (
            f"{precision.get('value')} ({precision.get('path')})"
            if precision.get("path")
            else "fp32 (no precision setting: autocast off)"
        )
    facts.torch = prepared.get("torch")
    device = prepared.get("device") or {}
    facts.device = device.get("name") if device.get("type") != "cpu" else "cpu"
    everyone = [rec for rows in recs.values() for rec in rows]
    facts.cpu_s = round(sum(float(r.get("cpu_s") or 0) for r in everyone), 1) or None
    facts.peak_rss_mb = max((float(r.get("peak_rss_mb") or 0) for r in everyone), default=None) or None
    compiled = (recs.get("compiled") or [{}])[0]
    model = (
        (compiled.get("phases") or {}).get("model")
        or ((recs.get("eager") or [{}])[0].get("phases") or {}).get("model")
        or {}
    )
    if model.get("ok"):
        facts.returned = model.get("returned")
        facts.model_class = model.get("model") or facts.model_class
        facts.parameters = model.get("parameters")
        wrap = model.get("wrap")
        if wrap and wrap.startswith("no distributed wrap"):
            facts.wrap = f"{wrap} (measured)"
        elif wrap:
            shards = f", {model.get('sharded_modules')} sharded modules" if model.get("sharded_modules") else ""
            facts.wrap = f"{wrap} over {facts.world_size} rank(s){shards} (measured)"
    cmodel = (compiled.get("phases") or {}).get("model") or {}
    facts.fix_applied = list((cmodel.get("fix") or {}).get("applied") or [])
    if cmodel.get("ok"):
        facts.compiled_modules = list(cmodel.get("compiled_modules") or [])
        facts.compiled_module_count = cmodel.get("compiled_module_count")
        targets = cmodel.get("targets") or {}
        facts.target_checks = [c.get("text", "") for c in targets.get("target_checks", [])]
        facts.target_failures = list(targets.get("target_failures") or [])
        for region in cmodel.get("disabled") or []:
            if region.get("present") and not region.get("eager"):
                facts.target_failures.append(f"`{region['region']}` is not kept eager (its forward is not disabled)")
            elif region.get("present"):
                facts.target_checks.append(f"`{region['region']}` kept eager (torch.compiler.disable)")
            else:
                facts.target_checks.append(f"`{region['region']}`: not present in this model (nothing to keep eager)")
    note_feed(facts, compiled.get("feed") or (recs.get("eager") or [{}])[0].get("feed") or {})
    reference = (recs.get("reference") or [{}])[0]
    facts.notes += [n for rec in (reference, compiled) for n in rec.get("notes") or [] if n not in facts.notes]
    parity_phase = (compiled.get("phases") or {}).get("parity") or {}
    _keys(facts, parity_phase.get("keys") or {})
    facts.key_lists = keys.lists(recs)
    parity = parity_phase.get("parity") or {}
    facts.parity_rule = parity.get("rule")
    _steps(facts, recs, parity, repo_s)
    _seen(facts, recs)
    ranks.ranks(facts, recs)
    ranks.sync(facts, recs)
    _timing(facts, recs)
    trace = scan(trace_dir, repo)
    facts.graph_break_sites, facts.trace_compile_s = trace.sites, trace.compile_s
    facts.specialized_at = list(trace.specialized)
    facts.specialized = [
        f"{s['site']} fixes {s['source'] or 'a size'} to a constant ({s['expr']}): {s['loc']}"
        for s in trace.specialized
    ]
    facts.graph_break_count = sum(g.count for g in facts.graph_break_sites)
    facts.graph_break_site_count = len({g.site for g in facts.graph_break_sites})
    fsdp = [g for g in facts.graph_break_sites if "distributed/fsdp" in g.site]
    if fsdp:
        facts.notes.append(
            f"{sum(g.count for g in fsdp)} graph break(s) at FSDP2 hooks ({fsdp[0].site}): a compiled region ends at "
            "each sharded module's hook, so the blocks between hooks compile as graphs of their own"
        )
    coverage.build(facts, recs, trace, repo, plan.spec)
    changes.read(facts, recs, plan.spec)
    facts.fixes = fixes(facts, plan)
    ranks.other_ranks(facts, recs)
    if facts.status == "passed":
        verdict(facts, parity)
    read_all(facts, plan, recs, trace_dir.parent, repo)
    coverage.widths_note(facts)
    facts.code_ids = identity.identities(site_texts(facts), repo)


def site_texts(facts: RehearsalFacts) -> list[str]:
    """Every text of the facts that names a site (a file:line of the repository, a frame)."""
    texts = [g.site for g in facts.graph_break_sites] + list(facts.recompile_frames) + list(facts.near_limit)
    for step in facts.steps:
        texts += list(step.limit_hits) + list(step.recompiles)
    for entry in facts.coverage:
        texts += [c.site + " " + c.cause for c in entry.eager_causes]
    return texts


_TOKENS = re.compile(r"tokens \d+x(\d+)")


def _seen(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]]) -> None:
    """The token counts the compiled twin was fed, on every rank, said beside where its batches came from."""
    rows = [m for rank in range(len(recs.get("compiled") or [])) for m in _micro(recs, "compiled", rank)]
    counts = sorted({int(n) for m in rows for n in _TOKENS.findall(str(m.get("shape") or ""))})
    facts.token_counts = counts
    facts.batch_keys = sorted({str(k) for m in rows for k in (m.get("shapes") or {})})
    if not counts or not facts.batches:
        return
    ranks = len(recs.get("compiled") or [])
    where = f"{len(rows)} micro-step(s) on {ranks} rank(s)"
    if len(counts) == 1:
        seen = f"one token count, {counts[0]}, in all {where} (other lengths were not exercised)"
    else:
        seen = f"{len(counts)} token counts ({counts[0]}..{counts[-1]}) in {where}"
    facts.batches += f"; seen: {seen}"


def _keys(facts: RehearsalFacts, keys: dict[str, Any]) -> None:
    for name, cmp in keys.items():
        if not cmp.get("checked"):
            facts.keys[name] = f"not checked ({cmp.get('reason')})"
        elif cmp.get("same"):
            facts.keys[name] = f"{cmp.get('count')} unchanged"
        else:
            added = cmp.get("only_compiled") or []
            if cmp.get("orig_mod") and all("_orig_mod." in k for k in added):
                text = f"{cmp['orig_mod']} of {cmp.get('count')} gain the '_orig_mod.' prefix (e.g. {added[0]!r})"
            else:
                text = f"changed (only eager: {cmp.get('only_eager')}; only compiled: {added})"
            facts.keys[name] = text
            facts.key_failures.append(f"{name} keys changed: {text}")


def _steps(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], parity: dict[str, Any], repo: str) -> None:
    compiled = _by_step(_micro(recs, "compiled"))
    eager = _by_step(_micro(recs, "eager"))
    c_grads = (parity.get("compiled") or {}).get("grads") or []
    e_grads = (parity.get("eager") or {}).get("grads") or []
    c_loss = (parity.get("compiled") or {}).get("loss") or []
    e_loss = (parity.get("eager") or {}).get("loss") or []
    bounds = parity.get("bounds") or {}
    loss_bounds = list(bounds.get("loss") or [])
    grad_bounds = list(bounds.get("grads") or [])
    frames: dict[str, list[str]] = {}
    micro_index = 0
    for step, rows in sorted(compiled.items()):
        n = len(rows)
        losses = list(range(micro_index, micro_index + n))
        micro_index += n
        recompiles = []
        for row in rows:
            for r in row.get("recompiles") or []:
                frame = _rel(str(r.get("frame")), repo)
                guard = _rel(str(r.get("guard")), repo)
                for _ in range(int(r.get("count", 1))):
                    recompiles.append(f"{frame}: {guard}")
                    frames.setdefault(frame, []).append(guard)
        g = c_grads[step] if step < len(c_grads) else {}
        facts.steps.append(
            RehearsalStep(
                step=step,
                micro_steps=n,
                shape="; ".join(dict.fromkeys(str(r.get("shape")) for r in rows)),
                compiled_s=round(sum(float(r.get("seconds") or 0) for r in rows), 4),
                eager_s=round(sum(float(r.get("seconds") or 0) for r in eager.get(step, [])), 4)
                if step in eager
                else None,
                grad_err=g.get("err"),
                worst_grad=g.get("worst") or None,
                grad_err_eager=e_grads[step]["err"] if step < len(e_grads) else None,
                grad_bound=grad_bounds[step] if step < len(grad_bounds) else None,
                loss_err=max((c_loss[i] for i in losses if i < len(c_loss)), default=None),
                loss_err_eager=max((e_loss[i] for i in losses if i < len(e_loss)), default=None),
                loss_bound=min((loss_bounds[i] for i in losses if i < len(loss_bounds)), default=None),
                recompiles=recompiles,
                new_graphs=sum(int(r.get("new_graphs") or 0) for r in rows),
                limit_hits=list(dict.fromkeys(_rel(h, repo) for r in rows for h in r.get("limit_hits") or [])),
                measured=any(r.get("coverage") for r in rows),
            )
        )
    ranked = sorted(frames.items(), key=lambda kv: -len(kv[1]))
    facts.recompile_count = sum(len(v) for v in frames.values())
    limit = int(((recs.get("compiled") or [{}])[0].get("recompile_limit")) or 8)
    hit_frames = {h.split(" last reason", 1)[0] for s in facts.steps for h in s.limit_hits}
    for frame, guards in ranked:
        name = frame.split(" (", 1)[0]
        if len(guards) + 1 >= limit - 1 and not any(f"'{name}'" in h for h in hit_frames):
            sized = any(_SIZE in g for g in guards)
            facts.near_limit.append(
                f"{frame}: {len(guards) + 1} compiled variants of {limit} after {len(facts.steps)} optimizer steps"
                + (NEAR_SIZED if sized else NEAR_CLOSE)
            )
    facts.recompile_frames = [
        f"{len(g)} recompile(s) in {f} (last guard: {readable_guard(g[-1], 300)})" for f, g in ranked
    ]


def _timing(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]]) -> None:
    if not facts.steps:
        return
    facts.first_step_s = facts.steps[0].compiled_s
    quiet = [
        (s.compiled_s, s.measured)
        for s in facts.steps[1:]
        if s.compiled_s is not None and not s.recompiles and not s.new_graphs
    ]
    steady = [t for t, measured in quiet if not measured]
    if not steady and quiet:
        steady = [t for t, _ in quiet]
        facts.notes.append(
            "the steady step includes the step the coverage map was counted on (no other step compiled nothing "
            "new), so it is slower than the run's own steady step; more --steps leave it out"
        )
    facts.steady_step_s = round(statistics.median(steady), 4) if steady else None
    facts.steady_steps = len(steady)
    timed = [(s.eager_s, s.measured) for s in facts.steps[1:] if s.eager_s is not None]
    eager = [t for t, measured in timed if not measured] or [t for t, _ in timed]
    facts.eager_step_s = round(statistics.median(eager), 4) if eager else None


def verdict(facts: RehearsalFacts, parity: dict[str, Any]) -> None:
    from model_compile.runtime.rehearsal.measure.parity import blind, failures

    facts.parity_inconclusive = blind(parity) if parity else None

    problems = list(facts.coverage_failures)  # the hot path running eager first: every other figure is smaller
    problems += list(failures(parity)) if parity else ["no parity was measured (the compiled twin recorded none)"]
    problems += facts.key_failures
    problems += [f"compiled target: {t}" for t in facts.target_failures]
    seen: set[str] = set()
    for step in facts.steps:
        for hit in step.limit_hits:
            frame = hit.split(" last reason", 1)[0]
            if frame not in seen:
                seen.add(frame)
                problems.append(
                    f"recompile limit hit at optimizer step {step.step} ({step.shape}): {readable_guard(hit, 300)}"
                )
    if not any((s.new_graphs or 0) > 0 for s in facts.steps):
        problems.append(
            "nothing was compiled: no compiled module and no graph"
            if not facts.compiled_module_count
            else "no graph was compiled during the steps (the model ran eager)"
        )
    problems += facts.problems
    facts.problems = problems
    if problems:
        facts.status = "failed"
        facts.reason = problems[0] + (
            f" (+{len(problems) - 1} more problem(s), listed with it)" if len(problems) > 1 else ""
        )
    elif facts.parity_inconclusive:
        facts.reason = facts.parity_inconclusive
