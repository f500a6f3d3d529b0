"""Whose failure it is: every failure the rehearsal reports gets an owner and the evidence that decides it.

Owners: the recipe (its own code, with the tool's additions out of the way), the change (new against a base that
trains), the environment (what this machine or interpreter lacks, or has at a revision the engine does not fit),
the tool's stand-in (the model, config or data standing in for the real one) and the tool itself (its code, its
instruments, its hooks). The evidence, strongest first:

- what the child saw: a `NotHere` of its own kind (a config or package missing, a stand-in the recipe's call
  cannot build, a width the model refuses), the frames that raised (`runtime/rehearsal/blame.py`: model-compile's
  code, a library and its installed revision, the repository's code), the batches the model was fed;
- where frames do not decide, a control run: the same run without the instrument (`controls.py`), the base
  (`base.py`), compile off (the eager twin ran the same steps on the same model and batches).

Only a failure that reproduces on the recipe's own code is the recipe's (against a base that trains, the change's).
A stand-in's, the environment's or the tool's is `not-run` or `tool-error` (exit 3) with what supplies it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from model_compile.hard.models import Attribution, RehearsalFacts

WHOSE = {
    "recipe": "the recipe's",
    "change": "the change's",
    "environment": "the environment's, not the recipe's",
    "stand-in": "the rehearsal's stand-in's, not the recipe's",
    "tool": "model-compile's own, not the recipe's",
}
_OPTION = re.compile(r"(--model-config \S+|--config-override \S+|\S+ -m pip install [^;]+|uv sync[^;)]*)")
_RUN_STATUS = {"tool": "tool-error", "stand-in": "not-run", "environment": "not-run"}


def whose(att: Attribution) -> str:
    part = f" ({att.part})" if att.part else ""
    return f"whose: {WHOSE[att.owner]}{part}"


def _stop(recs: dict[str, list[dict[str, Any]]]) -> tuple[str, int, dict[str, Any]] | None:
    """(twin, rank, record) of the first child that stopped with a status of its own."""
    for twin in ("prepare", "reference", "eager", "compiled"):
        for rank, rec in enumerate(recs.get(twin) or []):
            if rec.get("status") in ("failed", "not-run", "tool-error"):
                return twin, rank, rec
    return None


def _git_head(folder: str | None) -> str | None:
    if not folder:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", folder, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _revision(lib: dict[str, Any]) -> str:
    """`mvp-dataset 0.2.1 at be5d864 (editable, /src/...)`: a library as this interpreter has it installed."""
    words = f"{lib.get('name') or lib.get('package')} {lib.get('version') or '(version unknown)'}"
    commit = lib.get("commit") or _git_head(lib.get("source"))
    if commit:
        words += f" at {str(commit)[:12]}"
    if lib.get("source"):
        words += f" ({'editable, ' if lib.get('editable') else ''}installed from {lib['source']})"
    return words


def _sibling(lib: dict[str, Any]) -> bool:
    """A library installed from a folder or a repository (not a registry release): a sibling of the engine."""
    return bool(lib.get("source") or lib.get("commit"))


def _supply(reason: str) -> str | None:
    found = _OPTION.findall(reason or "")
    return "; ".join(dict.fromkeys(f.strip() for f in found)) or None


def _frames_said(frames: dict[str, Any]) -> list[str]:
    out = []
    inner = frames.get("innermost") or {}
    if inner:
        out.append(f"{frames.get('exception')} raised at {inner.get('where')} ({inner.get('kind')} code)")
    if frames.get("repo") and frames.get("repo") != inner.get("where"):
        out.append(f"the repository's innermost frame: {frames['repo']}")
    return out


def _of_stop(
    facts: RehearsalFacts, twin: str, rec: dict[str, Any], recs: dict[str, list[dict[str, Any]]], repo: Path
) -> Attribution:
    fault = str(rec.get("fault") or "recipe")
    reason = str(rec.get("reason") or facts.reason or "")
    frames = dict(rec.get("raised_in") or {})
    said = _frames_said(frames)
    instruments = list(rec.get("instruments") or [])
    att = Attribution(failure=facts.reason or reason, owner="recipe", evidence=said)
    if fault == "tool":
        where = str(frames.get("tool") or "")
        part = "an instrument" if "/measure/" in where else "a hook" if "/models/" in where else "its code"
        att.owner, att.part = "tool", part
        att.evidence = [f"raised in model-compile's own code ({where or reason})", *said]
        att.supply = (
            "MODEL_COMPILE_COVERAGE=off runs without the coverage map"
            if part == "an instrument"
            else f"a fault of model-compile: report it with the record folder {facts.record}"
        )
        return att
    if fault == "stand-in":
        att.owner, att.part = "stand-in", str(frames.get("part") or "model")
        att.evidence = [f"the child stopped on the stand-in: {reason}", *said]
        att.supply = _supply(reason)
        return att
    if fault in ("environment", "input"):
        att.owner = "environment"
        att.part = (
            "a package"
            if "package missing" in reason or "No module named" in reason
            else "memory"
            if "memory" in reason or "SIGKILL" in reason
            else "a path of the stage config"
            if "not on this machine" in reason
            else "this machine"
        )
        att.evidence = [reason, *said]
        att.supply = _supply(reason)
        return att
    found = library_fault(frames, repo, att.failure)
    if found is not None:
        found.evidence += said
        return found
    phase = str(rec.get("stopped_at") or "")
    if phase in ("config", "engine"):
        return _harness(att, rec, phase, said)
    feed = rec.get("feed") or {}
    if twin == "prepare":
        att.owner, att.part = "stand-in", "model"
        att.evidence = [f"the tiny checkpoint could not be made from the config the rehearsal read: {reason}", *said]
        att.supply = "--model-config NAME=PATH with the model's real config.json"
        return att
    if twin == "compiled":
        att.evidence.insert(
            0, "the eager twin ran the same steps on the same model and batches (compile off is the control)"
        )
        if instruments:
            att.not_ruled_out = [f"the tool's instruments it ran under ({', '.join(instruments)})"]
        return att
    # compile off (the reference or eager twin): the recipe's code raised, on the rehearsal's model and batches
    inner = str((frames.get("innermost") or {}).get("where") or "")
    defaults = [ld for ld in facts.loads if ld.get("depth_unknown")]
    if defaults and ("/transformers/models/" in inner or "transformers_modules/" in inner):
        att.owner, att.part = "stand-in", "model (a config class's defaults)"
        att.evidence.insert(
            0,
            f"it raised inside the model's own code, built from {defaults[0].get('source')}: the real checkpoint's "
            "config sets what the class's defaults may lack",
        )
        att.not_ruled_out = [f"the recipe's own code ({frames.get('repo') or 'its code'})"]
        att.supply = f"--model-config {defaults[0].get('name')}=PATH with its real config.json"
        return att
    attribute_of = frames.get("attribute_of") or {}
    if attribute_of.get("kind") == "repo":
        att.evidence.insert(
            0,
            f"the repository's own {attribute_of.get('class')} lacks what its code asks of it: its code and its engine "
            "disagree, whatever the batches",
        )
        att.part = "its code against its engine"
        att.ruled_out = ["the rehearsal's stand-in model and batches (the object is the repository's own)"]
        return att
    if feed.get("mode") == "batches":
        att.owner, att.part = "stand-in", "data"
        att.evidence.insert(0, f"the model was fed the tool's synthetic batches ({feed.get('reason')})")
        att.not_ruled_out = [f"the recipe's own code ({frames.get('repo') or 'where it raised'}), on its own data"]
        att.supply = "the stage's data on this machine (its data paths), or --base REV to compare with a base"
        return att
    att.evidence.insert(
        0, f"the recipe's training raised with compile off ({twin} twin), nothing of model-compile in its frames"
    )
    att.ruled_out = ["model-compile's code (no frame of it)", "a missing package or file (none named)"]
    att.not_ruled_out = [
        "the stand-in model's shrunk widths and random weights (no control run: --base REV compares a base that "
        "trains, --model-config the real config)"
    ]
    if instruments:
        att.not_ruled_out.append(f"the tool's instruments it ran under ({', '.join(instruments)})")
    return att


def library_fault(frames: dict[str, Any], repo: Path, failure: str) -> Attribution | None:
    """A sibling library (installed from a folder or a repository, not a registry release) at a revision the
    engine does not fit: the repository imports a name it lacks, or it raised its own error inside its code. The
    environment's, with both revisions; None when the frames do not say so."""
    library = frames.get("import_from") or frames.get("library") or {}
    own_error = str(frames.get("exception_module") or "").split(".")[0] == library.get("package")
    if not (library and _sibling(library) and (frames.get("import_from") or own_error)):
        return None
    name = library.get("name") or library.get("package")
    engine = _git_head(str(repo))
    both = f"{_revision(library)}; the repository at {engine or '(not a git checkout)'}"
    what = (
        f"the repository imports {library.get('module')} of a revision that lacks what it asks for"
        if frames.get("import_from")
        else f"{library.get('package')} raised its own {frames.get('exception')} inside its code"
    )
    return Attribution(
        failure=failure,
        owner="environment",
        part=f"{name} at another revision",
        evidence=[f"{what}: {both}"],
        not_ruled_out=[f"the recipe's own use of {library.get('package')} ({frames.get('repo') or 'its code'})"],
        supply=f"install the {name} revision this engine is written against (installed: {_revision(library)})",
    )


def _harness(att: Attribution, rec: dict[str, Any], phase: str, said: list[str]) -> Attribution:
    """The stage config or the engine, as the rehearsal builds them outside the recipe's tests: an override it
    ran with that the error names is the tool's (its own, or the user's it passed on); else the recipe's config
    or engine, the harness not ruled out."""
    phases = rec.get("phases") or {}
    detail = str((phases.get(phase) or {}).get("detail") or "")
    overrides = [str(o) for o in (phases.get("config") or {}).get("overrides") or []]
    named = [o for o in overrides if o.split("=", 1)[0] and o.split("=", 1)[0] in detail]
    if named:
        att.owner, att.part = "tool", "the overrides it ran the stage with"
        att.evidence = [f"the error names what the rehearsal set: {', '.join(named[:3])}", *said]
        att.supply = "drop or change the --config-override it names (or report the rehearsal's own override)"
        return att
    att.part = "its stage config or engine, built outside its tests"
    att.evidence.insert(
        0, f"the recipe's {'config' if phase == 'config' else 'engine'} raised while the rehearsal built it"
    )
    att.not_ruled_out = ["the rehearsal's harness (one process per rank over gloo, its overrides)"]
    return att


def _judged(facts: RehearsalFacts) -> list[Attribution]:
    out = []
    for problem in facts.problems or ([facts.reason] if facts.reason else []):
        new = problem.startswith("new with the change")
        att = Attribution(
            failure=problem,
            owner="change" if new else "recipe",
            part="compile",
            evidence=[
                "measured on the compiled twin against the eager twin and the reference: the same model, batches and "
                "steps, only compile differs",
                *(["the change's base trains without it"] if new else []),
            ],
            control="compile off (the eager twin)",
        )
        if problem.startswith("compile has no effect") and facts.coverage_unmeasured:
            att.not_ruled_out = [f"regions the coverage map could not count ({len(facts.coverage_unmeasured)})"]
        out.append(att)
    return out


def attribute(facts: RehearsalFacts, recs: dict[str, list[dict[str, Any]]], repo: Path) -> None:
    """Fill `facts.attribution` (and `fault`), and give a failure that is not the recipe's the status it is."""
    if facts.status == "passed":
        return
    found = _stop(recs)
    if found is None:
        if facts.status == "failed":
            facts.attribution = _judged(facts) + _data_path(facts, repo)
        elif facts.fault:  # a rank the machine ended, a twin that gave no result in time
            owner = "environment" if facts.fault in ("environment", "input") else facts.fault
            facts.attribution = [Attribution(failure=str(facts.reason), owner=owner, evidence=[str(facts.reason)])]  # type: ignore[arg-type]
        elif facts.status == "tool-error":
            facts.attribution = [Attribution(failure=str(facts.reason), owner="tool", part="its code")]
        if facts.attribution:
            facts.fault = facts.attribution[0].owner
        return
    twin, _, rec = found
    att = _of_stop(facts, twin, rec, recs, repo)
    facts.attribution = [att, *_data_path(facts, repo)]
    facts.fault = att.owner
    facts.status = _RUN_STATUS.get(att.owner, facts.status)  # type: ignore[assignment]
    _drift(facts, att, rec)
    if facts.reason and "[whose:" not in facts.reason:
        facts.reason = f"{facts.reason} [{whose(att)}]"


def _data_path(facts: RehearsalFacts, repo: Path) -> list[Attribution]:
    """The recipe's data path failed on the rehearsal's rows (synthetic batches stood in): whose that is."""
    if not facts.data_failure:
        return []
    failure = f"the recipe's data path failed on the rehearsal's rows: {facts.data_failure}"
    found = library_fault(facts.data_failure_raised, repo, failure)
    if found is not None:
        return [found]
    return [
        Attribution(
            failure=failure,
            owner="stand-in",
            part="data (the rehearsal's synthetic rows)",
            evidence=[
                "the rows were the rehearsal's, written for the stage's data path (the real data is not here)",
                *(_frames_said(facts.data_failure_raised) or [str(facts.data_failure)]),
            ],
            not_ruled_out=["the recipe's own data path, on its real rows"],
            supply="the stage's data on this machine",
        )
    ]


def _drift(facts: RehearsalFacts, att: Attribution, rec: dict[str, Any]) -> None:
    """A package the run imported at another release than the repository pins, whose code the failing frame is
    in: not ruled out (the run cannot be repeated with the pinned release here)."""
    inner = ((rec.get("raised_in") or {}).get("innermost") or {}).get("package")
    for line in facts.environment_drift:
        package = line.split(" ", 1)[0].lower().replace("-", "_")
        if inner and package == str(inner).lower():
            att.not_ruled_out.append(f"{line} (the failing frame is in {inner})")
