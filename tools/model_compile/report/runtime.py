"""The runtime layers of a review: where a change's layers run and against what (the change as it will merge),
and `run_hard` for the recipes in scope.

- A branch whose target moved on and merges cleanly: the merge result (`git merge-tree --write-tree`),
  materialized in a temporary tree, against the target's tip.
- One whose merge conflicts: the branch itself against its merge base, saying so, with the conflicts (file and
  kind) and what the target has since that the run lacks.
- `--head REV` with nothing to merge: REV, materialized, against the base.
- The working tree (dirty, or HEAD when clean with nothing to merge): the files on disk, against the base.

Nothing is written to the repository (hard.env.worktree). A file the run reads that this clone lacks refuses
the runtime layers in one line with the fetch; files it does not read are left out and listed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_compile.analyze import analyze_path
from model_compile.errors import InputError
from model_compile.review.models import DiffReport


@dataclass
class RuntimeTree:
    """What the runtime layers run on: `disk` (the checkout), `commit` (one commit) or `merge` (head into
    target), and the revision the rehearsal compares with."""

    kind: str
    base: str | None
    commit: str | None = None
    target: str | None = None
    notes: list[str] = field(default_factory=list)
    merge_base: str | None = None  # a merge: where the branch left the target, and the target as named
    target_name: str | None = None

    @property
    def materialized(self) -> bool:
        return self.kind != "disk"


def _listed(paths: list[str], limit: int = 5) -> str:
    """Python files first (what a run may import), then the rest, `limit` of them."""
    ranked = sorted(paths, key=lambda p: (not p.endswith(".py"), p))
    return ", ".join(ranked[:limit]) + (f" and {len(ranked) - limit} more" if len(ranked) > limit else "")


def plan(diff: DiffReport, head: str | None) -> RuntimeTree:
    """Where the runtime layers of this change run (see the module's docstring)."""
    merge = diff.merge
    head_rev = diff.head.rev
    if merge is not None and merge.clean and diff.head.commit:
        return RuntimeTree(
            "merge",
            base=merge.target_commit,
            commit=diff.head.commit,
            target=merge.target_commit,
            merge_base=merge.merge_base,
            target_name=merge.target,
            notes=[
                f"the runtime layers ran on the merge result of {_short(head_rev, merge.target)} into {merge.target} "
                f"(git merge-tree, in a temporary tree), and the base's on {merge.target}'s tip "
                f"{merge.target_commit[:12]}",
                f"to run a layer's command, check the merge out first (`git checkout --detach "
                f"{merge.target_commit[:12]} && git merge --no-edit {diff.head.commit[:12]}`): the commands name the "
                "files as the merge has them",
            ],
        )
    if merge is not None and diff.head.commit:
        kinds = ", ".join(f"{p} ({merge.kinds.get(p, 'content')})" for p in merge.conflicts[:6])
        more = f" and {len(merge.conflicts) - 6} more" if len(merge.conflicts) > 6 else ""
        notes = [
            f"the merge into {merge.target} conflicts in {len(merge.conflicts)} file(s): {kinds}{more}; so the "
            f"review, static and runtime, is of the branch ({branch_name(diff)}, {diff.head.commit[:12]}) against "
            f"its merge base {merge.merge_base[:12]} instead (its commands name the files as the branch has them: "
            f"`git checkout {diff.head.commit[:12]}` to run one)"
        ]
        if merge.target_changed:
            notes.append(
                f"{merge.target} has {merge.ahead} commit(s) since the merge base, which this review lacks "
                f"({len(merge.target_changed)} file(s): {_listed(merge.target_changed)})"
            )
        return RuntimeTree("commit", base=merge.merge_base, commit=diff.head.commit, notes=notes)
    if head is not None and diff.head.commit:
        return RuntimeTree(
            "commit",
            base=diff.base.commit,
            commit=diff.head.commit,
            notes=[
                f"the runtime layers ran on {head_rev} ({diff.head.commit[:12]}, in a temporary tree) against "
                f"{diff.base.rev}; their commands name the files as {head_rev} has them (`git checkout {head_rev}` "
                "to run one)"
            ],
        )
    notes = []
    moved = next((n for n in diff.notes if "has moved on since the merge base" in n), None)
    if moved:
        notes.append(
            "the runtime layers ran on the files on disk against the merge base: the target's commits since are "
            "not in this run"
        )
    elif diff.head.commit is None:
        notes.append(
            f"the runtime layers ran on the working tree (the head, uncommitted files included) against {diff.base.rev}"
        )
    return RuntimeTree("disk", base=diff.base.commit or None, notes=notes)


def _short(head_rev: str, target: str) -> str:
    """The branch's name as given (the merge view names the head `X merged into T`)."""
    return head_rev.removesuffix(f" merged into {target}")


def branch_name(diff: DiffReport) -> str:
    """The head as named, without the merge view's ` merged into T`."""
    return _short(diff.head.rev, diff.merge.target) if diff.merge is not None else diff.head.rev


@contextlib.contextmanager
def materialize(where: RuntimeTree, root: Path, recipe_paths: list[str]) -> Iterator[tuple[Path, list[str]]]:
    """(the folder the runtime layers run in, notes about it): `root` itself for the files on disk, else a
    temporary tree of the commit or the merge, removed after. ValueError (one line) when it cannot be made."""
    if not where.materialized:
        yield root, []
        return
    from model_compile.hard.env.worktree import Worktree, relative, toplevel

    top = toplevel(root)
    below = relative(root, top)
    reads = [f"{below}/{p}".strip("/") if below else p for p in recipe_paths]
    if where.kind == "merge":
        assert where.target is not None and where.commit is not None
        tree = Worktree(top, merge=(where.target, where.commit), reads=reads)
    else:
        tree = Worktree(top, where.commit, reads=reads)
    with tree as folder:
        notes = []
        if tree.left_out:
            shown = ", ".join(tree.left_out[:3]) + (
                f" and {len(tree.left_out) - 3} more" if len(tree.left_out) > 3 else ""
            )
            notes.append(
                f"{len(tree.left_out)} file(s) of the reviewed tree are not in this clone ({shown}): left out of the "
                "temporary tree, as no recipe's run reads them"
            )
        if tree.fetched:
            notes.append(f"fetched for the run (this clone lacked them): {', '.join(tree.fetched[:5])}")
        yield (folder / below if below else folder), notes


def relabel(reports: dict[str, Any], folder: Path, root: Path) -> dict[str, Any]:
    """The hard reports as if they had run in `root`: the temporary folder is gone after the run; its paths in
    commands and reasons name the repository's files (as the merge result has them)."""
    if folder == root:
        return reports
    out: dict[str, Any] = {}
    for name, report in reports.items():
        text = report.model_dump_json()
        for old in {str(folder), str(folder.resolve())}:
            text = text.replace(old, str(root))
        out[name] = type(report).model_validate_json(text)
    return out


def run_hard(
    recipe_dirs: dict[str, Path],
    python: str | None,
    trace: bool,
    out: Path | None,
    stages: dict[str, list[str]] | None = None,
    base_rev: str | None = None,
    config_name: str | None = None,
    questions: dict[str, str | None] | None = None,
    runtime: Any = None,
    home: Path | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """validate_hard for each recipe: (reports by name, notes by name for recipes it refused).
    `stages`: per recipe, the stage configs the change touches (each gets its own smoke command);
    `config_name`: the stage the runtime layers run (`--config-name`), as `validate --hard --config-name` takes it;
    `questions`: per recipe, what its rehearsal asks of the change (hard.rehearsal.questions.question): a recipe
    whose question an earlier one asked takes that rehearsal's answer instead of running it again. The runtime
    options (`runtime`: --config-override, --model-config) are checked against every recipe before any runs.
    `home`: the repository whose environment runs the recipes when they lie in a temporary tree of it."""
    from model_compile.hard.layers.runner import validate_hard

    overrides = list(getattr(runtime, "config_overrides", None) or [])
    notes = _missing_stage(recipe_dirs, config_name)
    if overrides:
        _check_overrides({n: d for n, d in recipe_dirs.items() if n not in notes}, stages, runtime, config_name)
    todo: list[str] = []
    for name, recipe_dir in recipe_dirs.items():
        if name in notes:
            continue
        if not recipe_dir.is_dir():
            # the scope came from a git tree (a merge result, --head REV) that has the recipe; this tree lacks it
            notes[name] = f"runtime layers not run: {recipe_dir} is not in the tree they run on"
            continue
        todo.append(name)

    def one(name: str, answered_by: tuple[str, Any] | None = None) -> Any:
        return validate_hard(
            recipe_dirs[name],
            config_name=config_name,
            overrides=overrides,
            trace=trace,
            out=(out / "hard" / name) if out else None,
            python=python,
            stages=(stages or {}).get(name),
            base_rev=base_rev,
            answered_by=answered_by,
            model_config=getattr(runtime, "model_config", None),
            model_configs=dict(getattr(runtime, "model_configs", None) or {}),
            home=home,
        )

    # the first recipe of each question rehearses it; those asking the same question take its answer after it
    asks = {name: q for name in todo if (q := (questions or {}).get(name))}
    leaders: dict[str, str] = {}  # question -> the recipe that asks it first
    for name, question in asks.items():
        leaders.setdefault(question, name)
    first = [n for n in todo if n not in asks or leaders[asks[n]] == n]
    done = _at_once(first, one, notes)
    rest = {}
    for name in todo:
        if name in first:
            continue
        leader = leaders[asks[name]]
        facts = done[leader].rehearsal if leader in done else None
        rest[name] = (f"recipes/{leader}", facts) if facts is not None and facts.steps else None
    done.update(_at_once(list(rest), lambda n: one(n, rest[n]), notes))
    return {name: done[name] for name in todo if name in done}, notes


RECIPES_AT_ONCE_ENV = "MODEL_COMPILE_RECIPES_AT_ONCE"


def _at_once(names: list[str], run: Any, notes: dict[str, str]) -> dict[str, Any]:
    """`run(name)` for each name, two at a time where the machine has two processors or more
    (`MODEL_COMPILE_RECIPES_AT_ONCE=N` sets it; 1: one after another); a refusal (InputError) is a note. An
    interruption ends every recipe's processes (their threads' cancel events) before it propagates."""
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from model_compile.hard.env.proc import cancel_with

    try:
        jobs = int(os.environ.get(RECIPES_AT_ONCE_ENV, "0")) or min(2, len(os.sched_getaffinity(0)))
    except ValueError:
        jobs = 1
    out: dict[str, Any] = {}
    if jobs <= 1 or len(names) <= 1:
        for name in names:
            try:
                out[name] = run(name)
            except InputError as exc:
                notes[name] = f"hard validation refused: {exc}"
        return out
    stops = {name: threading.Event() for name in names}

    def work(name: str) -> Any:
        cancel_with(stops[name])
        try:
            return run(name)
        finally:
            cancel_with(None)

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="recipe")
    try:
        futures = {name: pool.submit(work, name) for name in names}
        for name in names:
            try:
                out[name] = futures[name].result()
            except InputError as exc:
                notes[name] = f"hard validation refused: {exc}"
    except BaseException:
        for stop in stops.values():
            stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return out


def _check_overrides(
    recipe_dirs: dict[str, Path], stages: dict[str, list[str]] | None, runtime: Any, config_name: str | None
) -> None:
    """Bad input before anything runs: an override for a key the stage a recipe would rehearse lacks."""
    from dataclasses import replace

    from model_compile.hard.env.recipe import resolve_recipe
    from model_compile.hard.rehearsal.command import check_overrides

    for name, recipe_dir in recipe_dirs.items():
        recipe_root, repo_root = resolve_recipe(recipe_dir, None)
        found = analyze_path(recipe_root, recipe=None).recipes
        touched = (stages or {}).get(name)
        options = replace(runtime, config_name=config_name or (touched[0] if touched else None))
        check_overrides(found[0] if found else None, recipe_root, repo_root, options)


def _missing_stage(recipe_dirs: dict[str, Path], config_name: str | None) -> dict[str, str]:
    """Recipes in scope without `configs/<config_name>.yaml` (their runtime layers do not run: said so);
    bad input when no recipe in scope has it."""
    from model_compile.hard.stages import stage_files

    if not config_name or not recipe_dirs:
        return {}
    others = {name: sorted(stage_files(d)) for name, d in recipe_dirs.items()}
    others = {name: stages for name, stages in others.items() if config_name not in stages}
    if len(others) == len(recipe_dirs):
        listed = "; ".join(f"{name}: {', '.join(stages) or 'none'}" for name, stages in sorted(others.items()))
        raise InputError(f"--config-name {config_name}: no recipe in scope has configs/{config_name}.yaml ({listed})")
    return {
        name: f"hard validation not run: --config-name {config_name}: the recipe has no configs/{config_name}.yaml "
        f"(its stages: {', '.join(stages) or 'none'})"
        for name, stages in others.items()
    }


def _question(recipe: Any, recipe_dir: Path, config_name: str | None, changed: list[str]) -> str | None:
    """What the recipe's rehearsal asks of the change (None: it is rehearsed on its own)."""
    from model_compile.hard.env.recipe import resolve_recipe
    from model_compile.hard.rehearsal import command as rehearse

    try:
        recipe_root, repo_root = resolve_recipe(recipe_dir, None)
    except InputError:
        return None
    from model_compile.hard.rehearsal.questions import question

    return question(recipe, recipe_root, repo_root, rehearse.Options(config_name=config_name), changed)


def hard_on_change(
    where: Any,
    root: Path,
    recipes: list[Any],
    python: str | None,
    trace: bool,
    out: Path | None,
    stages: dict[str, list[str]] | None,
    changed: dict[str, list[str]],
    config_name: str | None,
    runtime: Any,
    compare: bool = True,
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """The runtime layers of the recipes in scope where `where` (report.merged.plan) says: (reports, notes by
    recipe, notes on where they ran). `compare`: the rehearsal runs the base too."""
    if not recipes:
        return {}, {}, []
    with contextlib.ExitStack() as stack:
        try:
            folder, tree_notes = stack.enter_context(materialize(where, root, [r.path for r in recipes]))
        except ValueError as exc:  # the tree cannot be made here (a file the run reads is not in this clone)
            why = f"runtime layers not run: the tree they would run on could not be made: {exc}"
            return {}, {r.name: why for r in recipes}, where.notes
        dirs = {r.name: folder / r.path for r in recipes}
        questions = {r.name: _question(r, folder / r.path, config_name, changed.get(r.name, [])) for r in recipes}
        reports, notes = run_hard(
            dirs,
            python,
            trace,
            out,
            stages,
            base_rev=where.base if compare else None,
            config_name=config_name,
            questions=questions,
            runtime=runtime,
            home=root,
        )
        reports = relabel(reports, folder, root)
    said: list[str] = []
    if where.kind == "merge" and where.merge_base and where.target:
        from model_compile.report.merge_drift import gone_since

        texts = {name: r.model_dump_json() for name, r in reports.items()}
        heads = {r.name: (where.commit, r.path) for r in recipes if where.commit}
        said = gone_since(root, where.merge_base, where.target, where.target_name or where.target, texts, heads)
    return reports, notes, where.notes + tree_notes + said
