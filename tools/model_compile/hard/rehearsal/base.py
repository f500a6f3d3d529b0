"""The change's base beside its head: the same rehearsal of the base revision, and what differs.

`rehearse --base REV` (and `review --hard` on a change) checks REV out into a temporary git worktree, reads
the recipe there statically and rehearses it with the same interpreter and options as the head. Its result is
kept under the user cache, keyed by REV's tree, the recipe, the options and the tool version, so a second
review of the same base does not pay for it again. Every measure of the head is then marked new with the
change, already there, or gone with it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

import model_compile
from model_compile.hard.env.probe import cache_root
from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.reading.identity import canon

# 2: the coverage map; 3: the models built, overrides, memory, batches seen, drift; 4: keyed by the files the run
# reads, code identities of sites, key lists
CACHE_VERSION = "rehearsal-base/4"
NO_COMPILE = "the recipe does not compile there"


def cache_key(reads: str, recipe_rel: str, options: Any, interpreter: str) -> str:
    """`reads`: the digest of the files the base's run reads (hard.env.worktree.Worktree.digest)."""
    payload = {
        "v": CACHE_VERSION,
        "tool": model_compile.__version__,
        "reads": reads,
        "recipe": recipe_rel,
        "options": {k: str(v) for k, v in asdict(options).items() if k != "base"},
        "python": interpreter,
    }
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def cache_path(key: str) -> Path:
    return cache_root() / "rehearsals" / key / "facts.json"


def load(key: str) -> RehearsalFacts | None:
    try:
        return RehearsalFacts.model_validate_json(cache_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def save(key: str, facts: RehearsalFacts) -> None:
    path = cache_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        data = facts.model_dump(mode="json")
        data["key_lists"] = facts.key_lists  # left out of reports, needed to compare a later head's keys
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def left_out_note(rev: str, left_out: list[str]) -> str:
    """The files of the base's tree this clone lacks, which its run does not read (left out of its folder)."""
    shown = ", ".join(left_out[:3]) + (f" and {len(left_out) - 3} more" if len(left_out) > 3 else "")
    return (
        f"{len(left_out)} file(s) of the base {rev} are not in this clone ({shown}): left out of its temporary tree, "
        "as its run does not read them"
    )


_DOCS = (".md", ".rst", ".txt")


def _without_switch(text: str | None) -> object:
    """A stage YAML's content less its compile switch (`model.compile.enabled`, or the flat `model.compile`)."""
    data = yaml.safe_load(text or "")
    model = data.get("model") if isinstance(data, dict) else None
    if isinstance(model, dict):
        if isinstance(model.get("compile"), dict):
            model["compile"].pop("enabled", None)
        elif isinstance(model.get("compile"), bool):
            model.pop("compile")
    return data


def only_the_switch(top: Path, commit: str) -> list[str] | None:
    """The files where the work tree differs from COMMIT when every difference is documentation, comments or
    docstrings in Python (the same code: its AST, docstrings removed, is equal), or a stage YAML's compile switch
    (the rehearsal turns compile on itself): the base's run would be this same run. Else None."""
    from model_compile.hard.env.worktree import changed_paths, show
    from model_compile.parse.python import code_changed

    try:
        paths = changed_paths(top, commit)
    except ValueError:
        return None
    for path in paths:
        if path.endswith(_DOCS):
            continue
        if not (top / path).is_file():
            return None
        try:
            before, after = show(top, commit, path), (top / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if before is None:
            return None
        if path.endswith(".py"):
            if code_changed(before.encode(), after.encode()):
                return None
            continue
        if not path.endswith((".yaml", ".yml")):
            return None
        try:
            if _without_switch(before) != _without_switch(after):
                return None
        except yaml.YAMLError:
            return None
    return paths


def _frames(facts: RehearsalFacts) -> dict[str, str]:
    """{frame hitting the recompile limit, by code identity: (as named, where)}."""
    out: dict[str, tuple[str, str]] = {}
    for step in facts.steps:
        for hit in step.limit_hits:
            frame = hit.split(" last reason", 1)[0].split("function: ", 1)[-1]
            out.setdefault(canon(frame, facts.code_ids), (frame, f"optimizer step {step.step}"))
    return {key: f"{frame}\0{where}" for key, (frame, where) in out.items()}


def _named(value: str) -> tuple[str, str]:
    frame, _, where = value.partition("\0")
    return frame, where


def _sites(facts: RehearsalFacts) -> dict[str, str]:
    """{graph-break site by code identity: the site as named}."""
    return {canon(g.site, facts.code_ids): g.site for g in facts.graph_break_sites}


def _mark(head: bool, base: bool) -> str:
    if head and base:
        return "already there"
    if head:
        return "new with the change"
    return "gone with the change"


def _ran(facts: RehearsalFacts) -> bool:
    return facts.status in ("passed", "failed") and bool(facts.steps)


def _parity_failed(facts: RehearsalFacts) -> bool:
    return bool(facts.parity_rule) and any(p.startswith(("gradients differ", "loss differs")) for p in facts.problems)


def _recompiles(facts: RehearsalFacts) -> dict[str, tuple[str, int]]:
    """{recompiled frame by code identity: (as named, new variants)}."""
    out: dict[str, tuple[str, int]] = {}
    for step in facts.steps:
        for r in step.recompiles:
            frame = r.split(": ", 1)[0]
            key = canon(frame, facts.code_ids)
            out[key] = (frame, out.get(key, (frame, 0))[1] + 1)
    return out


def uncertain(base: RehearsalFacts) -> str | None:
    """Why the base's compiled shares may not hold over a longer run: it ended near its recompile limit in a frame
    that recompiles per new input size (a longer window, with more sizes, runs that frame eager). A module that
    lost compile against such a base is said to be uncertain, not failed."""
    from model_compile.hard.rehearsal.reading.judge import NEAR_SIZED

    sized = [n.removesuffix(NEAR_SIZED) for n in base.near_limit if n.endswith(NEAR_SIZED)]
    if not sized:
        return None
    steps = len(base.steps) or base.steps_planned or 0
    return (
        f"the base was near its recompile limit after {steps} optimizer step(s) ({sized[0]}): a longer run may run "
        f"that frame eager at the base too, so what lost compile here is uncertain on this window (rerun with "
        f"--steps {max(2 * steps, 16)} to judge it)"
    )


def regressions(head: RehearsalFacts, base: RehearsalFacts) -> list[str]:
    """What the change made worse, each a problem of its own: a module that lost compiled share, a new
    graph-break site, a new recompile-limit hit, new recompiles, parity out of bound, changed keys. Empty when
    the base was not rehearsed (nothing can be called new) or nothing got worse."""
    if not _ran(head) or not _ran(base):
        return []
    from model_compile.hard.rehearsal.reading import coverage

    out = [] if uncertain(base) else [f"lost compile: {line}" for line in coverage.versus(head, base)]
    # a change that compiles more of the model brings new compiled code, and with it new break sites and
    # recompiles of its own: those are said beside the base (versus), not failures, unless nothing lost compile
    grew = (
        head.compiled_share is not None
        and base.compiled_share is not None
        and head.compiled_share > base.compiled_share + coverage.LOST
    )
    base_sites = set(_sites(base))
    if not grew:
        for g in head.graph_break_sites:
            key = canon(g.site, head.code_ids)
            if key not in base_sites:
                out.append(f"new graph-break site {g.site} ({g.count}x): {g.reason.splitlines()[0][:160]}")
                base_sites.add(key)
    hf, bf = _frames(head), _frames(base)
    out += [
        f"new recompile-limit hit in {_named(hf[key])[0]} ({_named(hf[key])[1]})" for key in sorted(set(hf) - set(bf))
    ]
    hr, br = _recompiles(head), _recompiles(base)
    if head.recompile_count > base.recompile_count:
        for key, (frame, n) in sorted(hr.items()):
            before = br.get(key, (frame, 0))[1]
            if n > before:
                out.append(f"{n - before} new recompile(s) in {frame} ({before} at the base)")
    if _parity_failed(head) and not _parity_failed(base):
        out.append("parity out of the bound (within it at the base)")
    if head.keys_across and not head.keys_documented:
        # the headline of each form (its counts and first rename); the pairs and the broken path in `keys_across`
        heads = [line.split(" (first: ", 1)[0].split("; a checkpoint saved", 1)[0] for line in head.keys_across]
        out.append("keys differ from the base's: " + "; ".join(heads) + " (the renames and what they break: below)")
    for name, text in head.keys.items():
        if "unchanged" not in text and "unchanged" in base.keys.get(name, "unchanged"):
            out.append(f"{name} keys changed: {text}")
    return out


def read_keys(
    head: RehearsalFacts, base: RehearsalFacts, repo_root: Path, recipe_root: Path, changed: list[str]
) -> None:
    """The head's keys against the base's (hard.rehearsal.reading.keys), read in the head's tree: each form that
    differs, with the repository's save/resume path it breaks, and the change's documentation of it."""
    from model_compile.hard.rehearsal.reading import keys

    differ = keys.across(head.key_lists, base.key_lists)
    if not differ:
        return
    calls = keys.checkpoint_calls(repo_root, recipe_root)
    said: set[str] = set()
    lines = []
    for form, text in differ.items():
        broken = keys.breaks(form, calls)
        lines.append(text + (f"; {broken}" if broken and broken not in said else ""))
        said.add(broken)
    head.keys_across = lines
    head.keys_documented = keys.documented(repo_root, changed)


def _breaks_eager(head: RehearsalFacts, base: RehearsalFacts) -> bool:
    """The head's training fails with compile off where the base's trains: its own code (or the rehearsal's model
    and batches, which the base ran too) raised, nothing the environment or the tool is to blame for."""
    stop = head.attribution[0] if head.attribution else None
    eager = bool(head.reason) and "(compile off)" in str(head.reason)
    return (
        head.status == "not-run"
        and eager
        and stop is not None
        and stop.owner in ("recipe", "stand-in")
        and stop.part in ("", "data")
        and _ran(base)
    )


def apply(head: RehearsalFacts, base: RehearsalFacts, rev: str) -> None:
    """The head judged against its base: what the change made worse fails it (new with the change); a head that
    fails only with what the base has too is an existing failure; a head whose training fails with compile off
    where the base's trains fails, new with the change (the base is the control: the same tool, model and
    batches)."""
    if _breaks_eager(head, base):
        stop = head.attribution[0]
        stop.owner, stop.part = "change", "its training with compile off"
        stop.control = f"the base ({rev}) trains the same run: {base.status}"
        stop.ruled_out.append(
            "the rehearsal's stand-in model and batches, its instruments and this environment: the base ran the same "
            "and trains"
        )
        stop.not_ruled_out = []
        head.status, head.fault, head.existing = "failed", "change", False
        reason = str(head.reason).split(" [whose:", 1)[0]
        head.problems = [f"new with the change: the training fails with compile off, the base's trains: {reason}"]
        head.reason = head.problems[0] + " [whose: the change's]"
        return
    head.regressions = regressions(head, base)
    doubt = uncertain(base) if _ran(head) and _ran(base) else None
    if doubt:
        from model_compile.hard.rehearsal.reading import coverage

        lost = coverage.versus(head, base)
        if lost:
            head.notes.append(f"{len(lost)} module(s) lost compile against the base, not failed: {doubt}")
    if head.regressions and head.status in ("passed", "failed"):
        head.status = "failed"
        own = list(head.problems)
        head.problems = [f"new with the change: {p}" for p in head.regressions] + own
        more = f" (+{len(head.regressions) - 1} more new with the change)" if len(head.regressions) > 1 else ""
        if own:
            at_base = " (the base fails too)" if _ran(base) and base.status == "failed" else ""
            more += f"; {len(own)} other problem(s) of the head{at_base}, listed with it, first: {own[0]}"
        head.reason = head.problems[0] + more
        head.existing = False
    elif head.status == "failed" and _ran(base) and base.status == "failed":
        head.existing = True
        head.reason = (
            f"existing: it fails on the base {rev[:12]} too, and the change makes nothing worse{_unrun(head)}. "
            + (str(head.reason or ""))
        )
    elif head.status == "failed" and _ran(base):
        head.existing = False


def _unrun(head: RehearsalFacts) -> str:
    """What "nothing worse" covers when none of the change's lines ran: nothing of them."""
    hunks = head.changed_lines
    if hunks and not any(h.ran_compiled or h.ran_eager or h.ran_eager_twin for h in hunks):
        return f" that this run reached (none of its {len(hunks)} changed hunk(s) ran here: it says nothing of them)"
    return ""


def versus(head: RehearsalFacts, base: RehearsalFacts, rev: str, how: str = "after") -> list[str]:
    """Each measure of the head beside the base's, marked. `how` the base's rehearsal ran: `after` the head,
    `beside` it (at the same time), or `cached` (in an earlier review)."""
    if base.status == "not-run" and base.reason == NO_COMPILE:
        return [
            f"the base ({rev}) does not compile this recipe: everything the compiled run measured is new with the change"
        ]
    if base.status in ("not-run", "tool-error", "timeout"):
        return [f"the base ({rev}) was not rehearsed ({base.status}: {base.reason}); nothing of the head can be marked"]
    out = [f"verdict of each on its own (before the comparison): head {head.status}, base ({rev}) {base.status}"]
    if head.status not in ("passed", "failed"):  # the head did not train: no measure of it is new, none gone
        return [out[0] + ": the head did not train, so none of its measures can be marked against the base's"]
    for name in sorted(set(head.keys) | set(base.keys)):
        h, b = head.keys.get(name, "-"), base.keys.get(name, "-")
        changed_h, changed_b = "unchanged" not in h, "unchanged" not in b
        if changed_h or changed_b:
            out.append(f"{name} keys: {h if changed_h else b} - {_mark(changed_h, changed_b)}")
    h_fail = bool(head.parity_rule) and any(p.startswith(("gradients differ", "loss differs")) for p in head.problems)
    b_fail = bool(base.parity_rule) and any(p.startswith(("gradients differ", "loss differs")) for p in base.problems)
    if head.keys_across:
        said = (
            f"documented by the change ({head.keys_documented}): reported, not failed"
            if head.keys_documented
            else "new with the change (a rename is needs changes unless the change documents it: a "
            "`# model-compile: keys - <reason>` comment)"
        )
        out += [f"keys across the change: {line} - {said}" for line in head.keys_across]
    out.append(
        "parity: "
        + ("outside the bound - " + _mark(h_fail, b_fail) if h_fail or b_fail else "within the bound on both")
    )
    from model_compile.hard.rehearsal.reading import coverage

    lost = coverage.versus(head, base)
    doubt = uncertain(base)
    if doubt and lost:
        out += [f"{line} (uncertain: {doubt})" for line in lost]
        lost = []
    out += [f"{line} - new with the change" for line in lost]
    out += [f"{line} - gone with the change" for line in coverage.moved_out(head, base)]
    hf, bf = _frames(head), _frames(base)
    for key in sorted(set(hf) | set(bf)):
        frame = _named(hf.get(key) or bf[key])[0]
        gone = key in bf and key not in hf and lost
        note = " (not an improvement: part of the model stopped compiling, see the compiled share)" if gone else ""
        out.append(f"recompile-limit hit in {frame}{note} - {_mark(key in hf, key in bf)}")
    hs, bs = _sites(head), _sites(base)
    for label, sites in (
        ("new with the change", sorted(hs[k] for k in set(hs) - set(bs))),
        ("gone with the change", sorted(bs[k] for k in set(bs) - set(hs))),
    ):
        if sites:
            shown = ", ".join(site.replace("library ", "") for site in sites[:3]) + (
                f", +{len(sites) - 3} more" if len(sites) > 3 else ""
            )
            out.append(f"{len(sites)} graph-break site(s) ({shown}) - {label}")
    moved = sorted(f"{bs[k]} -> {hs[k]}" for k in set(hs) & set(bs) if hs[k] != bs[k])
    if moved:
        shown = ", ".join(moved[:3]) + (f", +{len(moved) - 3} more" if len(moved) > 3 else "")
        out.append(f"{len(moved)} graph-break site(s) only moved with the change (the same statement): {shown}")
    out.append(
        f"graph breaks: head {head.graph_break_count} at {head.graph_break_site_count} site(s), base "
        f"{base.graph_break_count} at {base.graph_break_site_count}"
    )
    fewer = (
        " (fewer because less compiles, not an improvement)"
        if lost and head.recompile_count < base.recompile_count
        else ""
    )
    out.append(f"recompiles: head {head.recompile_count}, base {base.recompile_count}{fewer}")
    if head.compiled_share is not None and base.compiled_share is not None:
        out.append(
            f"compiled share of the forward work: head {head.compiled_share:.0%}, base {base.compiled_share:.0%}"
        )
    if head.first_step_s is not None and base.first_step_s is not None:
        shared = ""
        if head.backend == "inductor" and how == "after":
            shared = "; the base's run reused the head's Inductor cache, so its first step is no cold start"
        elif head.backend == "inductor" and how == "beside":
            shared = "; the two ran at once sharing one Inductor cache, so neither first step is surely a cold start"
        out.append(
            f"first optimizer step: head {head.first_step_s} s, base {base.first_step_s} s (CPU, tiny model{shared})"
        )
    return out
