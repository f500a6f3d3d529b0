"""The TORCH_TRACE reader: records in the format torch writes (glog prefix, JSON, tab-indented payload)."""

from __future__ import annotations

import json
from pathlib import Path

from model_compile.hard.trace import read_trace


def line(obj: dict, payload: str | None = None, pid: int = 4242) -> str:
    head = f"V1130 14:30:07.536000 {pid} torch/_logging/_internal.py:1328] {json.dumps(obj)}\n"
    if payload is None:
        return head
    return head + "".join(f"\t{ln}\n" for ln in payload.splitlines())


def metrics(frame: int, attempt: int, **extra) -> dict:
    body = {
        "co_name": "step",
        "co_filename": "/r/test_smoke.py",
        "co_firstlineno": 16,
        "compile_id": f"{frame}/{attempt}",
    }
    body.update(extra)
    return {"compilation_metrics": body, "frame_id": frame, "frame_compile_id": attempt, "rank": 1}


BREAK = """Graph break in user code at /r/test_smoke.py:18
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print`
  Hint: Avoid calling builtin `print`"""


def test_one_rank_breaks_recompiles_limit_and_time(tmp_path: Path):
    trace = tmp_path / "trace"
    trace.mkdir()
    text = (
        line({"artifact": {"name": "torch_version", "encoding": "json"}}, '{"pytorch_version": "2.13"}')
        + line({"dynamo_start": {"stack": []}, "frame_id": 0, "rank": 1})
        + line({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, "rank": 1}, BREAK)
        + line(metrics(0, 0, entire_frame_compile_time_s=0.5))
        + line({"artifact": {"name": "recompile_reasons", "encoding": "json"}}, "[\"0/0: tensor 'x' size mismatch\"]")
        + line(
            metrics(
                0, 1, entire_frame_compile_time_s=0.25, recompile_reason="0/0: tensor 'x' size mismatch  at index 0"
            )
        )
        + line(
            {
                "compilation_metrics": {
                    "co_name": None,
                    "fail_type": "Unsupported",
                    "compile_id": "0/2",
                    "fail_reason": "Dynamo recompile limit exceeded\n  Explanation: ...",
                    "recompile_reason": "0/1: tensor 'x' size mismatch",
                },
                "frame_id": 0,
                "frame_compile_id": 2,
            }
        )
        + "not a record line\n"
    )
    (trace / "dedicated_log_torch_trace_abc.log").write_text(text)
    (trace / "dedicated_log_torch_trace_empty.log").write_text(
        line({"artifact": {"name": "torch_version"}}, "{}", pid=7)
    )
    summary = read_trace(trace)
    (rank,) = summary.ranks  # the log without compiles is left out
    assert rank.rank == "rank 1"
    assert rank.compiles == 2 and rank.compile_time_s == 0.75
    assert rank.graph_breaks == [
        "1x test_smoke.py:18: Failed to trace builtin operator - Dynamo does not know how to trace builtin operator `print`"
    ]
    assert rank.recompiles == ["0/1 step (test_smoke.py:16): 0/0: tensor 'x' size mismatch at index 0"]
    assert rank.recompile_limit_hits == [
        "step (test_smoke.py:16): Dynamo recompile limit exceeded (last failed guard: 0/1: tensor 'x' size mismatch)"
    ]
    assert [f.time_s for f in rank.frames] == [0.5, 0.25, None]
    assert (summary.compiles, summary.graph_breaks, summary.recompile_limit_hits) == (2, 1, 1)


def test_no_trace_says_so(tmp_path: Path):
    summary = read_trace(tmp_path / "absent")
    assert summary.ranks == [] and "no trace log" in summary.note


def test_gaps_come_from_the_trace_when_the_recipe_has_no_runtime_record():
    """A recipe with its own asserts (no model-compile hooks) still gets breaks and recompiles in its gaps."""
    from model_compile.hard.layers.verdict import find_gaps
    from model_compile.hard.models import Environment, HardReport, RankTrace, TraceSummary

    trace = TraceSummary(
        ranks=[
            RankTrace(rank="1", log="b.log", graph_breaks=["m.py:9: x"]),
            RankTrace(
                rank="0",
                log="a.log",
                graph_breaks=["m.py:3: .item()", "m.py:5: print"],
                recompiles=["0/1: tensor 'x' size mismatch"],
                recompile_limit_hits=["f"],
            ),
        ]
    )
    report = HardReport(
        version="0",
        kind="cpu-only runtime checks",
        recipe="r",
        repo_root="/",
        out_dir="/o",
        environment=Environment(python="3.12", executable="/p", label="cpu-only", cpu_only=True),
        traces={"smoke": trace},
    )
    gaps = find_gaps(report)
    assert any(g.startswith("2 graph breaks [smoke, rank 0 of 2 (TORCH_TRACE)]") for g in gaps), gaps
    assert any(g.startswith("1 recompiles [smoke, rank 0") for g in gaps)
    assert any("recompile_limit hit [smoke" in g for g in gaps)


def test_a_backend_that_failed_on_an_operator_is_named_in_the_breaks_reason() -> None:
    from model_compile.hard.rehearsal.reading.sites import reason_of

    payload = (
        "Graph break encountered:\n\n\tBackend compiler exception\n\t  Explanation: Backend compiler `aot_eager` "
        "failed with aten.nonzero.default. Adding a graph break.\n"
    )
    reason = reason_of("Failed to handle graph break gracefully. Skipping the function", payload)
    assert reason == "Backend compiler exception (aot_eager failed on aten.nonzero) (no resume: the frame ran eager)"
