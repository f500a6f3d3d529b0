"""The change's base rehearsed beside its head: started before the head's run, joined after it.

`start` resolves the base, and unless the base's run would be the head's own run (only documentation, comments
or a stage's compile switch differ: hard.rehearsal.base.only_the_switch) starts a thread that materializes the
base's tree (hard.env.worktree: nothing written to the repository; blobs the run does not read left out),
looks its rehearsal up in the cache (keyed by the blobs of the files its run reads, the recipe, the options and
the interpreter) and otherwise rehearses it, in its own processes, while the head's rehearsal runs: the two use
the machine's cores together (`MODEL_COMPILE_BASE_BESIDE=off` runs the base after the head). `finish` joins it
and marks every measure of the head new with the change, already there, or gone with it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model_compile.hard.console import say
from model_compile.hard.env import interpreter
from model_compile.hard.models import Environment, RehearsalFacts
from model_compile.hard.rehearsal import base
from model_compile.hard.rehearsal import run as rehearsal
from model_compile.hard.rehearsal.stage_keys import base_overrides

BESIDE_ENV = "MODEL_COMPILE_BASE_BESIDE"


@dataclass
class Job:
    """One base rehearsal under way (or decided without running)."""

    rev: str
    commit: str = ""
    same: list[str] | None = None  # the base's run would be the head's own: these files differ, nothing else
    error: str | None = None  # why the base was not rehearsed
    facts: RehearsalFacts | None = None
    cached: bool = False
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    thread: threading.Thread | None = None
    body: Callable[[], None] | None = None  # the work, when it waits for the head (run by `finish`)
    stop: threading.Event = field(default_factory=threading.Event)  # set: its ranks are ended (`cancel`)


def start(
    recipe_root: Path,
    repo_root: Path,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    out_dir: Path,
    options: Any,
    flag: str | None,
    execute: Callable[..., tuple[RehearsalFacts, str]],
    wait: bool = False,
) -> Job:
    """Decide the base's rehearsal and start it (in a thread, unless `wait` or BESIDE_ENV=off: then `finish`
    runs it). `execute` is the rehearsal itself (hard.rehearsal.command.execute)."""
    from model_compile.hard.env.worktree import relative, resolve, toplevel

    job = Job(rev=str(options.base))
    try:
        job.commit, _tree = resolve(repo_root, job.rev)
        top = toplevel(repo_root)
        rel = relative(recipe_root, top)
        rel_repo = relative(repo_root, top)
    except ValueError as exc:
        job.error = str(exc)
        return job
    job.same = base.only_the_switch(top, job.commit)
    if job.same is not None:
        return job

    from model_compile.hard.env.proc import cancel_events, cancel_with

    inherited = cancel_events()  # a recipe's own thread: what ends it ends its base too

    def body() -> None:
        started = time.monotonic()
        cancel_with(job.stop, *inherited)
        try:
            _materialize_and_rehearse(
                job, top, rel, rel_repo, interp, env, environment, out_dir, options, flag, execute
            )
        except ValueError as exc:  # a file the base's run reads is missing from this clone: one line, the fetch
            job.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - the head's review goes on; the base says why it is missing
            job.error = f"model-compile's own code failed: {type(exc).__name__}: {exc}"
        job.seconds = round(time.monotonic() - started, 2)

    if wait or os.environ.get(BESIDE_ENV, "on").lower() in ("0", "off", "false", "no"):
        job.body = body
    else:
        job.thread = threading.Thread(target=body, name=f"base {job.rev}", daemon=True)
        job.thread.start()
    return job


def _materialize_and_rehearse(
    job: Job,
    top: Path,
    rel: str,
    rel_repo: str,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    out_dir: Path,
    options: Any,
    flag: str | None,
    execute: Callable[..., tuple[RehearsalFacts, str]],
) -> None:
    from model_compile.hard.env.worktree import Worktree

    worktree = Worktree(top, job.commit, reads=[rel], prefix="model-compile-base-")
    with worktree as tree_dir:
        if not (tree_dir / rel).is_dir():  # decided at once, never cached: its words name this revision
            job.facts = rehearsal.not_run(f"the recipe does not exist at {job.rev}", rehearsal.label_of(environment))
            return
        key = base.cache_key(worktree.digest(), rel, options, interp.path)
        job.facts = base.load(key)
        job.cached = job.facts is not None
        if job.facts is not None:
            job.notes.append(
                f"the base's rehearsal is the cached one of the {worktree.read_count} file(s) its run reads at "
                f"{job.commit[:12]} ({base.cache_path(key)})"
            )
        else:
            job.facts = _rehearse_base(
                tree_dir / rel, tree_dir / rel_repo, job, interp, env, environment, out_dir, options, flag, execute
            )
            base.save(key, job.facts)
        if worktree.left_out:
            job.notes.append(base.left_out_note(job.rev, worktree.left_out))


def _rehearse_base(
    recipe_b: Path,
    repo_b: Path,
    job: Job,
    interp: interpreter.Interpreter,
    env: dict[str, str],
    environment: Environment,
    out_dir: Path,
    options: Any,
    flag: str | None,
    execute: Callable[..., tuple[RehearsalFacts, str]],
) -> RehearsalFacts:
    """The base's own rehearsal, in its materialized tree (its fixes are not rerun: only the head's count)."""
    from model_compile.analyze import analyze_path

    found = next(iter(analyze_path(recipe_b, recipe=None).recipes), None)  # the recipe exists here (checked)
    if found is not None and found.compile_path == "none":
        return rehearsal.not_run(base.NO_COMPILE, rehearsal.label_of(environment))
    say(
        f"model-compile: rehearsing the base {job.rev} ({job.commit[:12]}) too, the same run in a temporary tree, "
        "for the comparison (cached after by the files it reads, so a rerun skips it)"
    )
    _share_compile_cache(out_dir, out_dir / "base")
    kept, dropped = base_overrides(found, recipe_b, repo_b, list(options.config_overrides), options.config_name)
    facts, _ = execute(
        found,
        recipe_b,
        repo_b,
        interp,
        env,
        environment,
        out_dir / "base",
        replace(options, base=None, config_overrides=kept),
        flag,
        trial_fixes=False,
    )
    if dropped:
        facts.notes.insert(
            0,
            f"--config-override {', '.join(dropped)}: not a key of the base's stage config, so the base runs "
            "without it (as it runs by default)",
        )
    return facts


def cancel(job: Job | None) -> None:
    """The head was interrupted: end the base's ranks (signals reach the main thread only) and wait for its
    thread to clean up (its temporary tree, its fork server)."""
    if job is None or job.thread is None:
        return
    job.stop.set()
    job.thread.join(timeout=60)


def finish(facts: RehearsalFacts, job: Job, repo_root: Path, recipe_root: Path) -> None:
    """Join the base's rehearsal and mark the head's measures against it."""
    from model_compile.hard.env.worktree import since

    rev = job.rev
    if job.error is not None and job.thread is None and job.body is None:
        facts.notes.append(f"the base {rev} was not rehearsed: {job.error}")
        return
    if job.same is not None:
        what = f"only in {', '.join(job.same[:4])}{' ...' if len(job.same) > 4 else ''}" if job.same else "in no file"
        facts.base_rev = rev
        facts.versus_base = [
            f"the base ({rev}) differs from what was rehearsed {what}: documentation, comments or docstrings, or a "
            "stage's compile switch, which the rehearsal sets itself, so the base's rehearsal would be this same run "
            "(not run again): nothing is new with the change, everything measured here is already there at the base"
        ]
        if facts.status == "failed":
            facts.existing = True  # the same run fails at the base: not the change's failure
        return
    waited = time.monotonic()
    if job.body is not None:
        job.body()
    elif job.thread is not None:
        job.thread.join()
    facts.timings["base"] = job.seconds
    facts.timings["base_wait"] = round(time.monotonic() - waited, 2)  # how long the head waited for it
    facts.notes += job.notes
    if job.error is not None or job.facts is None:
        facts.notes.append(f"the base {rev} was not rehearsed: {job.error or 'no result'}")
        return
    base_facts = job.facts
    facts.base, facts.base_rev = base_facts, rev
    changed = sorted(since(repo_root, rev))
    base.read_keys(facts, base_facts, repo_root, recipe_root, changed)
    how = "cached" if job.cached else "beside" if job.thread is not None else "after"
    facts.versus_base = base.versus(facts, base_facts, rev, how=how)
    base.apply(facts, base_facts, rev)


def fixes_at_the_base(facts: RehearsalFacts, recipe_root: Path) -> dict[int, str]:
    """The head's fixes that answer a root cause its base has too (the same cause, its lines read by code
    identity): not the change's, so not rerun in its review. {index in facts.fixes: why not tried}."""
    from model_compile.hard.rehearsal.reading.identity import canon

    at_base = facts.base
    if at_base is None or not at_base.fixes:
        return {}
    theirs = {canon(f.cause or f.fix, at_base.code_ids) for f in at_base.fixes}
    return {
        i: (
            "not tried in this review: its base has the same cause, so it is not the change's (`model-compile "
            f"rehearse {recipe_root}` tries it)"
        )
        for i, f in enumerate(facts.fixes)
        if f.override and canon(f.cause or f.fix, facts.code_ids) in theirs
    }


def _share_compile_cache(head: Path, base_dir: Path) -> None:
    """The base's rehearsal reuses the head's Inductor cache (what compiles the same on both sides is not compiled
    again); its first-step time is then no cold-start figure, and the comparison says so."""
    cache = head / "inductor-cache"
    link = base_dir / "inductor-cache"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        base_dir.mkdir(parents=True, exist_ok=True)
        if not link.exists() and not link.is_symlink():
            link.symlink_to(cache, target_is_directory=True)
    except OSError:
        pass
