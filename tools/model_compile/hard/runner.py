"""`model-compile validate --hard`: soft review, then the recipe's own tests with compile on.

Layers run in order and stop at the first failure:
  1. soft       static review (`model_compile.analyze.analyze_path`); error findings stop here
  2. structure  tests/test_structure.py
  3. smoke      tests/test_smoke.py --config-override model.compile.enabled=true (+ user overrides)
  4. impact     each tests/skills/model-compile/test_*.py
Each pytest layer runs in its own process group with a timeout and JUnit XML.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import model_compile
from model_compile.discover.recipes import repo_root_of
from model_compile.errors import InputError
from model_compile.hard import environment as env_mod
from model_compile.hard import interrupt, layers, proc, render
from model_compile.hard.junit import parse_junit
from model_compile.hard.models import HardReport, LayerResult, Wiring
from model_compile.hard.trace import summarise
from model_compile.runtime import RUNTIME_DIR_ENV

PYTHON_ENV = "MODEL_COMPILE_PYTHON"  # interpreter for the recipe tests (default: this one)


def resolve_recipe(path: Path, recipe: str | None) -> tuple[Path, Path]:
    """(recipe root, repository root) from PATH (+ --recipe)."""
    path = path.resolve()
    if not path.is_dir():
        raise InputError(f"{path} is not a directory")
    if recipe:
        candidate = path / "recipes" / recipe
        if not candidate.is_dir():
            raise InputError(f"no recipe {recipe!r} under {path / 'recipes'}")
        path = candidate
    elif (path / "recipes").is_dir():
        names = sorted(p.name for p in (path / "recipes").iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        raise InputError(f"--hard validates one recipe: pass a recipe folder or --recipe NAME (one of {', '.join(names)})")
    if not ((path / "tests").is_dir() or (path / "configs").is_dir() or (path / "engine").is_dir()):
        raise InputError(f"{path} does not look like a recipe (no tests/, configs/ or engine/)")
    return path, repo_root_of(path) or path.parent


def _child_env(out_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    tools_dir = str(Path(model_compile.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tools_dir, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env[RUNTIME_DIR_ENV] = str(out_dir / "runtime")
    return env


def _wiring(recipe) -> Wiring:
    if recipe is None:
        return Wiring()
    return Wiring(
        compile_path=recipe.compile_path,
        compiled_target=list(recipe.compiled_target),
        placement=recipe.placement,
        documented=[
            f"{d.kind} ({d.source} {d.file}:{d.line}): {d.reason}"
            for d in recipe.documentation
            if d.source == "comment" or recipe.compile_path == f"fallback:{d.kind}"
        ],
    )


def run_soft(recipe_root: Path) -> tuple[LayerResult, Wiring]:
    """Layer 1: static review; also what it read about the wiring, for the report."""
    from model_compile.analyze import analyze_path

    start = time.monotonic()
    report = analyze_path(recipe_root, recipe=None)
    recipe = report.recipes[0] if report.recipes else None
    compile_path = recipe.compile_path if recipe else None
    errors = [f for f in report.all_findings() if f.severity == "error"]
    duration = time.monotonic() - start
    command = shlex.join(["model-compile", "validate", "--soft", str(recipe_root)])
    layer = LayerResult(
        name="soft",
        status="passed",
        label="static",
        command=command,
        exit_status=0,
        duration_s=round(duration, 3),
        compile_path=compile_path,
    )
    if report.exit_code == 1:
        layer.status, layer.exit_status, layer.next_step = "failed", 1, command
        layer.reason = "\n".join(f"{f.rule} {f.file}:{f.line}: {f.message}" for f in errors[:20])
        layer.findings = [f.model_dump() for f in errors[:50]]
    return layer, _wiring(recipe)


def run_pytest_layer(spec, recipe_root, repo_root, python, env, timeout_s, out_dir, label) -> LayerResult:
    test_path = recipe_root / spec.test_file
    rel_test = os.path.relpath(test_path, repo_root)
    junit = out_dir / f"junit-{spec.name.replace(':', '-')}.xml"
    cmd_public = ["python", "-m", "pytest", rel_test, "-q", *spec.options]
    if not test_path.is_file():
        return LayerResult(
            name=spec.name,
            status="missing",
            label=label,
            cwd=str(repo_root),
            reason=f"{rel_test} does not exist",
            next_step=spec.generate_hint or None,
        )
    cmd = [python, "-m", "pytest", rel_test, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *spec.options]
    result = proc.run(cmd, repo_root, env, timeout_s, out_dir / f"{spec.name.replace(':', '-')}.log")
    counts = parse_junit(junit)
    layer = LayerResult(
        name=spec.name,
        status="passed",
        label=label,
        command=shlex.join(cmd_public),
        cwd=str(repo_root),
        exit_status=result.exit_status,
        duration_s=round(result.duration_s, 2),
        counts=counts,
        log=str(out_dir / f"{spec.name.replace(':', '-')}.log"),
        output_tail=proc.tail(result.output),
    )
    if result.timed_out:
        layer.status = "timeout"
        layer.reason = f"no result after {timeout_s:g} s: the process group was killed"
        return layer
    refusal = layers.refused_for_accelerator(
        result.output if result.exit_status else "",
        counts.skip_reasons if counts else [],
        counts.messages if counts else [],
    )
    all_skipped = counts is not None and counts.tests > 0 and counts.skipped == counts.tests
    if refusal and (result.exit_status != 0 or all_skipped):
        layer.status = "not-run"
        layer.reason = f"needs an accelerator: {refusal}"
        layer.next_step = f"on a machine with GPUs/NPUs: cd {repo_root} && {layer.command}"
        return layer
    if result.exit_status == 5 or (counts is not None and counts.tests == 0 and result.exit_status == 0):
        layer.status = "failed"
        layer.reason = "no tests were collected"
        return layer
    if result.exit_status != 0:
        layer.status = "failed"
        layer.reason = "\n\n".join(counts.messages[:3]) if counts and counts.messages else proc.tail(result.output, 15)
        return layer
    if all_skipped:
        layer.status = "skipped"
        layer.reason = "every test was skipped: " + "; ".join(counts.skip_reasons[:3])
    return layer


def _read_runtime(directory: Path) -> tuple[dict | None, list[str]]:
    files = sorted(directory.glob("runtime-rank*.json")) if directory.is_dir() else []
    primary = None
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if primary is None or data.get("rank") == 0:
            primary = data
    return primary, [str(p) for p in files]


def _verdict(report: HardReport) -> None:
    failed = [l for l in report.layers if l.status in ("failed", "timeout")]
    required_missing = [l for l in report.layers if l.status == "missing" and not l.name.startswith("impact")]
    gaps = [l for l in report.layers if l.status in ("not-run", "unavailable", "skipped", "missing")]
    if failed:
        first = failed[0]
        report.verdict = "failed"
        reason = (first.reason or "").strip().splitlines()
        report.summary = f"layer '{first.name}' {first.status}" + (f": {reason[0][:300]}" if reason else "")
    elif required_missing:
        report.verdict = "failed"
        report.summary = "missing layer(s): " + ", ".join(l.name for l in required_missing)
    elif gaps:
        report.verdict = "incomplete"
        report.summary = "; ".join(f"{l.name}: {l.status}" + (f" ({l.next_step})" if l.next_step else "") for l in gaps)
    else:
        report.verdict = "passed"
        report.summary = "every layer passed"
    if report.environment.cpu_only and report.verdict != "failed":
        report.summary += " (cpu-only: rerun the commands on a GPU/NPU machine to check compiled behaviour there)"
    report.gaps = _gaps(report)


def _gaps(report: HardReport) -> list[str]:
    """What this run did not establish, and the runtime costs it measured."""
    gaps: list[str] = []
    if report.environment.cpu_only:
        gaps.append("no accelerator: runtime results are CPU-only; compiled speed and GPU/NPU numerics not validated")
    for layer in report.layers:
        if layer.status in ("not-run", "missing", "skipped", "unavailable"):
            gaps.append(f"{layer.name}: {layer.status}" + (f" - run: {layer.next_step}" if layer.next_step else ""))
    ran = {layer.name for layer in report.layers}
    for name in ("structure", "smoke"):
        if name not in ran and report.verdict == "failed":
            gaps.append(f"{name}: not reached (stopped at the first failure)")
    rt = report.runtime or {}
    breaks = rt.get("graph_breaks", {})
    if breaks.get("total"):
        top = sorted(breaks.get("by_reason", {}).items(), key=lambda kv: -kv[1])[:3]
        gaps.append(f"{breaks['total']} graph breaks ({'; '.join(f'{n}x {r}' for r, n in top)})")
    rec = rt.get("recompiles", {})
    if rec.get("count"):
        first = (rec.get("reasons") or [{}])[0].get("reason", "").splitlines()
        gaps.append(f"{rec['count']} recompiles" + (f" (first: {first[0].strip()[:120]})" if first else ""))
    if rt.get("recompile_limit", {}).get("hit"):
        gaps.append("recompile_limit hit: frames fell back to eager")
    timing = rt.get("timing", {})
    if timing.get("first_step_s") is not None:
        gaps.append(
            f"compile latency: first step {timing['first_step_s']} s vs steady state {timing.get('steady_state_s')} s"
            + (" (CPU timings; no speedup claimed)" if report.environment.cpu_only else "")
        )
    return gaps


def validate_hard(
    path: Path,
    recipe: str | None = None,
    config_name: str | None = None,
    world_size: int | None = None,
    overrides: list[str] | None = None,
    timeout_s: float = 1800.0,
    trace: bool = False,
    out: Path | None = None,
) -> HardReport:
    recipe_root, repo_root = resolve_recipe(Path(path), recipe)
    if world_size is not None and world_size < 1:
        raise InputError("--world-size must be >= 1")
    if timeout_s <= 0:
        raise InputError("--timeout must be > 0")
    for item in overrides or []:
        if "=" not in item:
            raise InputError(f"--config-override {item!r} is not KEY=VALUE")
    out_dir = Path(out).resolve() if out else Path(tempfile.mkdtemp(prefix="model-compile-hard-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    python = os.environ.get(PYTHON_ENV, sys.executable)
    env = _child_env(out_dir)
    environment = env_mod.detect(python, env)
    label = environment.label
    kind = "cpu-only runtime checks" if environment.cpu_only else "runtime compile validation"
    report = HardReport(
        version=model_compile.__version__,
        kind=kind,
        recipe=recipe_root.name,
        repo_root=str(repo_root),
        out_dir=str(out_dir),
        environment=environment,
    )
    interrupt.track(report)
    soft, report.wiring = run_soft(recipe_root)
    report.layers.append(soft)
    if soft.status == "failed":
        _verdict(report)
        return report
    runtime_dir = out_dir / "runtime"
    for spec in layers.plan(recipe_root, config_name, world_size, list(overrides or []), soft.compile_path):
        layer_env = dict(env)
        if spec.name == "smoke" and trace:
            layer_env["TORCH_TRACE"] = str(out_dir / "trace")
        layer = run_pytest_layer(spec, recipe_root, repo_root, python, layer_env, timeout_s, out_dir, label)
        report.layers.append(layer)
        if spec.name == "smoke":
            report.runtime, report.runtime_files = _read_runtime(runtime_dir)
            if report.runtime is not None:
                report.runtime["label"] = label
            if trace:
                report.trace = summarise(out_dir / "trace", out_dir / "tlparse")
            if layer.status == "failed" and report.runtime and report.runtime.get("violations"):
                layer.reason = "runtime: " + "; ".join(report.runtime["violations"]) + "\n\n" + (layer.reason or "")
        if layer.status in ("failed", "timeout") or (layer.status == "missing" and spec.required):
            break
    _verdict(report)
    return report


def run_hard(args) -> int:
    fmt = getattr(args, "format", "text")
    if fmt not in ("text", "json", "markdown"):
        raise InputError(f"--hard supports --format text, json or markdown (not {fmt})")
    with interrupt.on_signals(fmt) as run:  # SIGINT/SIGTERM/SIGHUP: groups ended, partial report written
        report = validate_hard(
            Path(args.path),
            recipe=getattr(args, "recipe", None),
            config_name=getattr(args, "config_name", None),
            world_size=getattr(args, "world_size", None),
            overrides=list(getattr(args, "config_override", None) or []),
            timeout_s=float(getattr(args, "timeout", 1800.0) or 1800.0),
            trace=bool(getattr(args, "trace", False)),
            out=Path(args.out) if getattr(args, "out", None) else None,
        )
    if run.interrupted:
        return run.exit_code
    text = render.emit(report, fmt)
    sys.stdout.write(text)
    out = Path(report.out_dir)
    (out / "report.json").write_text(report.model_dump_json(indent=2))
    return report.exit_code
