"""One rehearsal process: `python -m model_compile.runtime.rehearsal SPEC.json TWIN`.

Run by the parent (`hard/rehearsal/`) in the repository's own interpreter, one process per rank of each twin,
with `RANK`/`WORLD_SIZE`/`MASTER_ADDR`/`MASTER_PORT` set as a launcher sets them. TWIN is one of

- `prepare`: write the tiny checkpoint (with its tokenizer or processor) and the synthetic rows, once;
- `reference`: the recipe's training run, eager, in full precision (only when the recipe trains in lower
  precision): the noise floor's reference;
- `eager`: the recipe's training run, eager, in its own precision;
- `compiled`: the same run with compile on; it then compares itself with the other twins of its rank.

Each writes `record-<twin>-rank<r>.json` after every phase (a crash or a timeout still leaves what was done)
and `tensors-<twin>-rank<r>.pt` (losses and the gradients each optimizer step applied, one flat tensor a
step). A process group is started over gloo when the world has more than one rank and the engine has not
started one (the reference engine skips it without an accelerator); its own mesh and wrap then run as on
accelerators.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from model_compile.runtime.rehearsal.config import (
    LOW,
    full_precision_wrap,
    precision_plan,
    read_precision,
    twin_overrides,
)
from model_compile.runtime.rehearsal.measure import packages
from model_compile.runtime.rehearsal.record import (
    Record,
    Stop,
    guarded,
    not_here,
    not_on_machine,
    process_age_s,
    set_repo_root,
    short_error,
    tool_frame,
)

# -- set-up ----------------------------------------------------------------


def _process_group(world: int, one_rank: bool = False) -> None:
    """A gloo process group for a multi-rank CPU world, started before the engine (which skips it on CPU);
    `one_rank`: for an engine that needs one even in a world of one (as a launcher always starts it)."""
    import torch.distributed as dist

    if (world > 1 or one_rank) and dist.is_available() and not dist.is_initialized():
        import datetime

        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))


def _engine(spec: dict[str, Any], twin: str, record: Record) -> Any:
    from model_compile.runtime.rehearsal.config import load_config

    t0 = time.perf_counter()
    with guarded("config", "not-run", "the recipe's engine module did not import"):
        cls = getattr(importlib.import_module(spec["engine_module"]), spec["engine_class"])
    overrides = twin_overrides(spec, twin)
    with guarded("config", "not-run", "the stage config did not load with the rehearsal's overrides"):
        config = load_config(spec, overrides, engine_class=cls)
    record.phase("config", file=spec["config_file"], overrides=overrides)
    with guarded("engine", "not-run", "the recipe's engine could not be built outside its tests"):
        try:
            engine = cls(config)
        except ValueError as exc:  # torch.distributed's: the engine calls it even in a world of one rank
            if "process group has not been initialized" not in str(exc):
                raise
            _process_group(1, one_rank=True)
            engine = cls(config)
            record.data.setdefault("notes", []).append(
                "the engine needs a process group even on one rank: a one-rank gloo group was started, as a "
                "launcher starts it"
            )
    record.phase(
        "engine", seconds=round(time.perf_counter() - t0, 2), engine=f"{spec['engine_module']}.{spec['engine_class']}"
    )
    return engine


def _meter(spec: dict[str, Any], twin: str) -> Any:
    """The coverage meter's factory for the eager twin (everything it runs) and the compiled twin (what ran
    outside compiled graphs); None for the reference twin, or when the spec turns coverage off."""
    if twin not in ("eager", "compiled") or not spec.get("coverage", True):
        return None
    from model_compile.runtime.rehearsal.measure.coverage import Meter

    return lambda model: Meter(model, compiled=twin == "compiled")


def _changed_lines(spec: dict[str, Any]) -> dict[str, list[int]]:
    """The change's lines to count, by the absolute path the interpreter will name their file with (the spec's
    repository-relative paths under the repository root as given, and as resolved)."""
    root = spec["repo_root"]
    out: dict[str, list[int]] = {}
    for rel, lines in (spec.get("changed_lines") or {}).items():
        for path in {os.path.join(root, rel), os.path.realpath(os.path.join(root, rel))}:
            out[path] = list(lines)
    return out


def _twins_dir(spec: dict[str, Any]) -> Path:
    """Where the other twins' records and tensors are: the rehearsal's folder, also for a fix's compiled rerun
    that writes its own records elsewhere."""
    return Path(spec.get("twins_dir") or spec["out_dir"])


def _has_reference(spec: dict[str, Any]) -> bool:
    precision = spec.get("precision") or {}
    return bool(precision.get("reference_overrides") or precision.get("reference_dtype"))


def _initial(spec: dict[str, Any], twin: str, rank: int) -> Any:
    import torch

    if twin == "reference" or (twin == "eager" and not _has_reference(spec)):
        return None  # the first twin to run starts from the recipe's own init
    first = "reference" if _has_reference(spec) else "eager"
    path = _twins_dir(spec) / f"init-{first}-rank{rank}.pt"
    return torch.load(path) if path.exists() else None


def _data(spec: dict[str, Any], record: Record) -> dict[str, Any] | None:
    data = spec.get("data") or {}
    if data.get("mode") != "rows":
        return None
    from model_compile.runtime.rehearsal.inputs import rows

    with guarded("data", "not-run", "the recipe's row source could not be replaced"):
        try:
            seen = rows.install(data["rows_path"])
        except rows.RowSourceUnavailable as exc:
            raise Stop("data", "not-run", f"the stage's data is not here and {exc}") from exc
    return seen


# -- the twins -------------------------------------------------------------


def prepare(spec: dict[str, Any], record: Record) -> None:
    """The tiny checkpoint (and its higher-precision twin for the reference), the synthetic rows, the precision."""
    from model_compile.runtime.rehearsal.inputs import assets

    with guarded("config", "not-run", "the stage config did not load through the recipe's schema"):
        precision = read_precision(spec)
    record.phase("precision", **precision)
    if spec.get("checkpoint"):
        # the reference computes in fp32 for a recipe that trains in bf16/fp16, in float64 for an fp32 one
        reference = "float32" if str(precision.get("value") or "").lower() in LOW else "float64"
        t0 = time.perf_counter()
        with guarded("checkpoint", "not-run", "the tiny checkpoint could not be built"):
            try:
                facts = assets.write_checkpoint(spec["checkpoint"], reference)
            except Exception as exc:
                from model_compile.runtime.rehearsal.models.state import unfit_checkpoint

                raise unfit_checkpoint(exc, spec.get("repo_root")) from exc
        record.phase("checkpoint", seconds=round(time.perf_counter() - t0, 2), **facts)
    data = spec.get("data") or {}
    if data.get("mode") == "rows":
        with guarded("rows", "not-run", "the synthetic rows could not be written"):
            facts = assets.write_rows(data["rows"])
        record.phase("rows", **facts)


def train(spec: dict[str, Any], twin: str, rank: int, record: Record) -> None:
    import torch

    from model_compile.runtime.rehearsal.loop import Driver
    from model_compile.runtime.rehearsal.measure.model_facts import key_facts, model_facts

    world = int(os.environ.get("WORLD_SIZE", "1"))
    from model_compile.runtime.rehearsal.models import intercept

    # before the recipe's modules import: every model it builds is seen (widened for the reference twin)
    widened = "float64" if (spec.get("precision") or {}).get("reference_dtype") == "float64" else "float32"
    intercept.install(spec, widened if twin == "reference" else None)
    seen = _data(spec, record)
    if twin == "reference":
        full_precision_wrap()
    with guarded("engine", "not-run", "the process group could not be started"):
        _process_group(world)
    wanted = _changed_lines(spec) if twin in ("eager", "compiled") else {}
    if twin == "compiled" and (spec.get("coverage", True) or wanted):
        from model_compile.runtime.rehearsal.measure.coverage import install_graph_hook

        install_graph_hook(wanted)  # before anything compiles: every graph's runs are then known
    counter = None
    if wanted:
        from model_compile.runtime.rehearsal.measure.lines import LineCounter

        counter = LineCounter(wanted)
        counter.start()  # before the recipe's modules import: a changed line at module level counts too
    engine = _engine(spec, twin, record)
    if not callable(getattr(engine, "train_exec_step", None)) and callable(getattr(engine, "train_one_step", None)):
        note = "the engine's micro-step is train_one_step (forward) then train_after_step: step times are forwards"
        record.data.setdefault("notes", []).append(note)
    initial = _initial(spec, twin, rank)
    facts: dict[str, Any] = {}

    def on_model(model: Any) -> None:
        facts.update(model_facts(model, spec.get("targets", []), spec.get("disabled", [])))
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in model.parameters() if p.requires_grad})
        facts["trainable_dtypes"] = dtypes
        facts["keys"] = key_facts(model)
        if fix:
            facts["fix"] = {"asked": fix, "applied": list(driver.fix_applied)}
        if initial is None:
            facts["initial_weights"] = "the recipe's own init (this twin runs first)"
        elif driver.copied:
            facts["initial_weights"] = f"{driver.copied} parameter(s) differed from the first twin's and were copied in"
        else:
            facts["initial_weights"] = "equal to the first twin's (checked)"
        record.phase("model", **facts)
        from model_compile.runtime.rehearsal.models.built import record_models

        record_models(model, engine, world, record)

    from model_compile.runtime.rehearsal.inputs.feed import Feed

    feed = Feed(spec)
    wide = torch.float64 if twin == "reference" and spec["precision"].get("reference_dtype") == "float64" else None
    fix = spec.get("fix") if twin == "compiled" else None
    upcast = twin == "reference" and bool(spec["precision"].get("reference_overrides"))
    driver = Driver(
        engine, int(spec["steps"]), initial, on_model, feed, wide=wide, meter=_meter(spec, twin), fix=fix, upcast=upcast
    )
    t0 = time.perf_counter()
    phase = "train"
    try:
        driver.run()
    except BaseException as exc:  # noqa: BLE001 - recorded with the steps done so far
        record.data["micro_steps"] = driver.micro
        record.data["sync_checks"] = driver.sync_checks
        record.data["feed"] = feed.facts
        record.data["instruments"] = [  # the tool's instruments this failure ran under
            *(["the coverage meter (counting this micro-step)"] if driver.measuring else []),
            *(["the compiled-graph hook"] if twin == "compiled" and (spec.get("coverage", True) or wanted) else []),
            *(["the changed-line counter"] if counter is not None else []),
        ]
        missing = not_here(exc)
        if isinstance(exc, Stop):
            raise
        if missing is not None:
            raise Stop(phase, "not-run", str(missing), traceback.format_exc(), fault=missing.fault).because(
                exc
            ) from exc
        frame = tool_frame(exc.__traceback__)
        status = "failed" if twin == "compiled" and driver.model is not None else "not-run"
        if frame:
            raise Stop(
                phase,
                "tool-error",
                f"model-compile's own code failed at {frame}: {short_error(exc)}",
                traceback.format_exc(),
                fault="tool",
            ).because(exc) from exc
        where = "training" if driver.model is not None else "set-up (before_train)"
        step = f" at micro-step {len(driver.micro)}" if driver.model is not None else ""
        if driver.model is not None and feed.mode == "batches":  # the batch it failed on was the tool's
            step += " on the tool's synthetic batches (the recipe's data path made none it could use: see the notes)"
        absent = not_on_machine(exc, spec)
        if absent:
            raise Stop(
                phase,
                "not-run",
                f"environment: the recipe's {where} raised{step}: {absent}",
                traceback.format_exc(),
                fault="environment",
            ).because(exc) from exc
        raise Stop(
            phase,
            status,
            f"the recipe's {where} raised{step} with compile {'on' if twin == 'compiled' else 'off'}: "
            f"{short_error(exc)}",
            traceback.format_exc(),
        ).because(exc) from exc
    record.data["micro_steps"] = driver.micro
    record.data["sync_checks"] = driver.sync_checks
    record.data["feed"] = feed.facts
    if driver.upcast_note and rank == 0:
        record.data.setdefault("notes", []).append(driver.upcast_note)
    if driver.meter is not None:
        with guarded("coverage", "tool-error", "the coverage map could not be written"):
            record.phase("coverage", **driver.meter.record())
    if counter is not None:
        counter.stop()
        from model_compile.runtime.rehearsal.measure.coverage import graphs_with_lines

        record.phase("lines", **counter.record(), graphs=graphs_with_lines() if twin == "compiled" else [])
    if seen is not None:
        from model_compile.runtime.rehearsal.inputs.rows import STATE

        record.data["rows"] = {**seen, "read": STATE["read"], "images": STATE["images"]}
    if twin in ("eager", "compiled") and rank == 0:
        from model_compile.runtime.rehearsal.measure.model_facts import optimizer_keys

        record.phase("keys", **optimizer_keys(driver.model, driver.optimizer))
    record.phase(
        "train",
        seconds=round(time.perf_counter() - t0, 2),
        optimizer_steps=driver.optimizer_steps,
        micro_steps=len(driver.micro),
    )
    out = Path(spec["out_dir"])
    from model_compile.runtime.rehearsal.measure.parity import pack

    tensors = {"grads": pack(driver.grads), "losses": driver.losses}
    torch.save(tensors, out / f"tensors-{twin}-rank{rank}.pt")
    if initial is None:
        torch.save(driver.init_params, out / f"init-{twin}-rank{rank}.pt")
    if twin == "compiled":
        judge(spec, rank, record, tensors)


def _load(path: Path) -> Any:
    """A twin's saved tensors, memory-mapped where this torch can (no copy of tens of MB just to compare them)."""
    import torch

    try:
        return torch.load(path, mmap=True)
    except TypeError:  # a torch without mmap loading
        return torch.load(path)


def judge(spec: dict[str, Any], rank: int, record: Record, mine: dict[str, Any]) -> None:
    """The compiled twin against the eager twin (keys) and the reference (parity, with its noise floor)."""
    from model_compile.runtime.rehearsal.measure.model_facts import compare_keys
    from model_compile.runtime.rehearsal.measure.parity import compare

    out = _twins_dir(spec)
    with guarded("parity", "tool-error", "the twins' records could not be compared"):
        eager_record = json.loads((out / f"record-eager-rank{rank}.json").read_text(encoding="utf-8"))
        keys = compare_keys(eager_record["phases"]["model"]["keys"], record.data["phases"]["model"]["keys"])
        eager = _load(out / f"tensors-eager-rank{rank}.pt")
        ref_path = out / f"tensors-reference-rank{rank}.pt"
        reference = _load(ref_path) if ref_path.exists() else None
        ref_dtype = spec["precision"].get("reference_dtype") or "float32"
        if reference is not None and ref_dtype == "float64":
            ref_record = json.loads((out / f"record-reference-rank{rank}.json").read_text(encoding="utf-8"))
            dtypes = ((ref_record.get("phases") or {}).get("model") or {}).get("trainable_dtypes") or []
            if dtypes != ["float64"]:
                # the recipe's code cast the reference's parameters back (an upcast loop, say): it is no reference
                reference = None
                record.data.setdefault("notes", []).append(
                    f"the float64 reference trained in {', '.join(dtypes)} (the recipe casts its parameters): "
                    "the eager twin is the reference, at a fixed fp32 tolerance"
                )
        parity = compare(mine, eager, reference, spec["backend"], ref_dtype)
    record.phase("parity", keys=keys, parity=parity)


def _prepared_first(spec: dict[str, Any], rank: int) -> None:
    """The reference twin runs first: its rank 0 prepares the checkpoint and rows (`record-prepare-rank0.json`),
    the other ranks wait for it; every rank then knows the recipe's precision and how the reference runs."""
    out = Path(spec["out_dir"])
    path = out / "record-prepare-rank0.json"
    if rank == 0:
        prep = Record(path, "prepare", 0)
        import torch

        from model_compile.runtime.dynamo_adapter import device_info

        prep.data.update(torch=torch.__version__, device=device_info())
        try:
            prepare(spec, prep)
        except Stop as stop:
            prep.stop(stop.phase, stop.status, stop.reason, stop.detail, stop.fault, stop.frames)
            again = Stop("prepare", stop.status, f"setting up failed: {stop.reason}", stop.detail, stop.fault)
            again.frames = stop.frames
            raise again from stop
        prep.data["status"] = "done"
        prep.flush()
    deadline = time.monotonic() + 600
    data: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if data.get("status") in ("done", "not-run", "failed", "tool-error"):
            break
        time.sleep(0.2)
    if data.get("status") != "done":
        raise Stop("prepare", "not-run", f"setting up failed on rank 0: {data.get('reason') or 'no record'}")
    phases = data.get("phases") or {}
    spec["precision"] = precision_plan(phases.get("precision") or {})
    if spec.get("checkpoint"):
        spec["checkpoint"]["reference_ready"] = bool((phases.get("checkpoint") or {}).get("reference_dir"))


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    twin = argv[1]
    rank = int(os.environ.get("RANK", "0"))
    record = Record(Path(spec["out_dir"]) / f"record-{twin}-rank{rank}.json", twin, rank)
    record.flush()
    for path in reversed(spec.get("sys_path", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    os.chdir(spec["repo_root"])
    set_repo_root(str(Path(spec["repo_root"]).resolve()))
    try:
        with contextlib.redirect_stdout(sys.stderr):
            import torch

            from model_compile.runtime.dynamo_adapter import device_info, recompile_limit

            record.data.update(
                torch=torch.__version__,
                device=device_info(),
                recompile_limit=recompile_limit(),
                started_s=process_age_s(),  # the interpreter's start and the torch import, before any phase
            )
            if twin == "prepare":
                prepare(spec, record)
            else:
                if twin == "reference":
                    _prepared_first(spec, rank)
                train(spec, twin, rank, record)
    except Stop as stop:
        packages.record_imported(record, rank)
        record.stop(stop.phase, stop.status, stop.reason, stop.detail, stop.fault, stop.frames)
        return 3 if stop.status == "tool-error" else 1
    except BaseException as exc:  # noqa: BLE001 - the parent reads the record, whatever happened
        record.stop(
            "child", "tool-error", f"the rehearsal child stopped: {short_error(exc)}", traceback.format_exc(), "tool"
        )
        return 3
    packages.record_imported(record, rank)
    record.data["status"] = "done"
    record.flush()
    return 0
