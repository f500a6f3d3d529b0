"""One-call accelerator check: the bundled example's hard validation, with its figures.

The whole pipeline runs on `vlm_regional`; the `vlm_kit` recipe is rehearsed alone.

Run it on a machine with a GPU/NPU (it runs on CPU too, labelled so):

    python bench/accelerator_check.py                       # recipe backend (aot_eager)
    python bench/accelerator_check.py --backend inductor    # plus a second run with inductor

For each run it prints the environment label, every layer's status and time,
the rehearsal layer's figures (the recipe's prepare_model() on its tiny model, eager
twin vs compiled on one device: parity, keys, graph-break sites, recompiles and
recompile-limit hits per shape, first vs steady step), and the smoke's
figures: first step vs steady state, graph breaks, recompiles,
recompile-limit hits, compile time per rank (from TORCH_TRACE), compiled
region executed, and parity (the impact layer's eager-vs-compiled tests).
Exit status: 0 when every run's verdict is passed or incomplete, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from model_compile.hard.layers.runner import validate_hard  # noqa: E402
from model_compile.hard.models import HardReport  # noqa: E402

# The whole pipeline on the regional recipe (its rehearsal passes, so the smoke runs after it); the kit
# recipe's rehearsal alone (whole-model compile of Qwen2-VL recompiles per image size: its figures show that).
RECIPE = ROOT / "examples" / "demo_repo" / "recipes" / "vlm_regional"
KIT = ROOT / "examples" / "demo_repo" / "recipes" / "vlm_kit"


def run(backend: str | None, out: Path, timeout_s: float) -> tuple[HardReport, float]:
    """One hard validation of the example; `backend` overrides the recipe's compile backend."""
    overrides = [f"model.compile.backend={backend}"] if backend else []
    start = time.monotonic()
    report = validate_hard(RECIPE, overrides=overrides, timeout_s=timeout_s, out=out, backend=backend)
    return report, time.monotonic() - start


def figures(report: HardReport) -> dict[str, Any]:
    """The numbers worth comparing across machines."""
    rt = report.runtime or {}
    timing = rt.get("timing", {})
    smoke_trace = report.traces.get("smoke")
    parity = next((layer for layer in report.layers if layer.name.startswith("impact")), None)
    return {
        "label": report.environment.label,
        "torch": report.environment.torch,
        "device": f"{report.environment.device_type} x{report.environment.device_count}",
        "verdict": report.verdict,
        "layers": {layer.name: f"{layer.status} ({layer.duration_s:.1f} s)" for layer in report.layers},
        "first_step_s": timing.get("first_step_s"),
        "steady_state_s": timing.get("steady_state_s"),
        "first_over_steady": timing.get("first_over_steady"),
        "graph_breaks": rt.get("graph_breaks", {}).get("total"),
        "unique_graphs": rt.get("unique_graphs"),
        "recompiles": rt.get("recompiles", {}).get("count"),
        "recompile_limit_hit": rt.get("recompile_limit", {}).get("hit"),
        "compiled_region_events": rt.get("executed", {}).get("compiled_region_events"),
        "trace_per_rank": [
            {
                "rank": r.rank,
                "frame_compiles": r.compiles,
                "compile_time_s": r.compile_time_s,
                "graph_breaks": sum(int(b.split("x ", 1)[0]) for b in r.graph_breaks),
                "recompiles": len(r.recompiles),
                "recompile_limit_hits": len(r.recompile_limit_hits),
            }
            for r in (smoke_trace.ranks if smoke_trace else [])
        ],
        "rehearsal": _rehearsal(report),
        "parity": (
            f"{parity.status}: {parity.counts.passed}/{parity.counts.tests} tests"
            if parity and parity.counts
            else (parity.status if parity else "no impact layer")
        ),
    }


def _rehearsal(report: HardReport) -> Any:
    """The rehearsal layer's figures, or why it did not run."""
    from model_compile.hard.rehearsal.render import summary_lines

    facts = report.rehearsal
    if facts is None:
        return "not in this run"
    return {"status": facts.status, "reason": facts.reason, "wall_s": facts.wall_s, "lines": summary_lines(facts)}


def main(argv: list[str] | None = None) -> int:
    """Run the example once per backend and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", default=[], help="extra run with this compile backend")
    parser.add_argument("--out", default="/tmp/model-compile-accelerator-check")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per layer")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args(argv)
    results = {}
    status = 0
    for backend in [None, *args.backend]:
        name = backend or "recipe-default"
        report, seconds = run(backend, Path(args.out) / name, args.timeout)
        data = figures(report)
        data["wall_s"] = round(seconds, 1)
        from model_compile.hard.rehearsal.command import Options, standalone
        from model_compile.hard.rehearsal.render import summary_lines

        kit, _, _ = standalone(KIT, None, Options(backend=backend), Path(args.out) / name / "kit-rehearsal")
        data["kit_rehearsal"] = {
            "status": kit.status,
            "reason": kit.reason,
            "wall_s": kit.wall_s,
            "lines": summary_lines(kit),
        }
        results[name] = data
        status |= report.verdict == "failed"
        if not args.json:
            cpu = (
                " (CPU ONLY: no accelerator; figures say nothing about GPU/NPU speed)"
                if report.environment.cpu_only
                else ""
            )
            print(
                f"== {name}: {data['label']}{cpu}, torch {data['torch']}, {data['device']}: {data['verdict']} in {seconds:.0f} s"
            )
            for key, value in data.items():
                if key not in ("label", "torch", "device", "verdict", "wall_s"):
                    print(f"   {key}: {value}")
            if report.verdict != "passed":
                print(f"   summary: {report.summary}")
    if args.json:
        print(json.dumps(results, indent=2))
    return int(status)


if __name__ == "__main__":
    raise SystemExit(main())
