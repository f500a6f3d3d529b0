"""The hard runner on small fixture repos (no torch needed: fast)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from model_compile.cli import main
from model_compile.errors import InputError
from model_compile.hard.layers.junit import origin, parse_junit
from model_compile.hard.layers.runner import validate_hard

REPO = Path(__file__).parent / "fixtures" / "repo"
RECIPES = REPO / "recipes"


def statuses(report):
    return [(layer.name, layer.status) for layer in report.layers]


def test_all_layers_pass_in_order_and_record_commands(tmp_path):
    report = validate_hard(RECIPES / "ok", overrides=["train.lr=0.5"], world_size=2, out=tmp_path)
    assert [n for n, _ in statuses(report)] == ["soft", "structure", "smoke", "impact:test_impact.py"]
    assert all(s in ("passed", "unavailable") for _, s in statuses(report)), statuses(report)
    assert report.verdict == "passed" and report.exit_code == 0
    smoke = report.layers[2]
    assert smoke.command == shlex.quote(sys.executable) + (
        " -m pytest recipes/ok/tests/test_smoke.py -q --world-size 2 "
        "--config-override model.compile.enabled=true --config-override train.lr=0.5"
    )
    assert smoke.cwd == str(REPO.resolve())
    assert smoke.counts.tests == 1 and smoke.counts.passed == 1
    impact = report.layers[3]
    assert (impact.counts.tests, impact.counts.passed, impact.counts.skipped) == (2, 1, 1)
    # the runtime JSON the smoke wrote comes back, labelled
    assert report.runtime["overrides"] == ["model.compile.enabled=true", "train.lr=0.5"]
    assert report.runtime["label"] == report.environment.label
    assert report.environment.cpu_only and report.environment.label == "cpu-only"
    assert "runtime compile validation" not in report.kind
    assert all(layer.label in ("static", "cpu-only") for layer in report.layers)


def test_a_failed_layer_does_not_stop_the_layers_after_it(tmp_path):
    report = validate_hard(RECIPES / "structfail", out=tmp_path)
    assert [n for n, _ in statuses(report)] == ["soft", "structure", "smoke", "impact"]
    assert statuses(report)[1] == ("structure", "failed")
    assert "config has no model.compile section" in report.layers[1].reason
    smoke = report.layers[2]
    assert smoke.started and smoke.status in ("passed", "failed") and smoke.stopped_by is None  # still evidence
    assert smoke.command.startswith(shlex.quote(sys.executable) + " -m pytest recipes/structfail/tests/test_smoke.py")
    assert report.verdict == "failed" and report.exit_code == 1


def test_a_failed_smoke_stops_the_impact_tests_and_says_so(tmp_path):
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    smoke = repo / "recipes" / "ok" / "tests" / "test_smoke.py"
    smoke.write_text(
        smoke.read_text() + "\n\ndef test_compile_fails():\n    raise AssertionError('compiled run broke')\n"
    )
    report = validate_hard(repo / "recipes" / "ok", out=tmp_path / "out")
    by_name = {layer.name: layer for layer in report.layers}
    assert by_name["smoke"].status == "failed"
    impact = by_name["impact:test_impact.py"]
    assert impact.status == "not-run" and impact.stopped_by == "smoke" and "stopped by smoke" in impact.reason
    assert impact.next_step and "test_impact.py" in impact.next_step


def test_a_failure_the_base_has_too_is_existing(tmp_path):
    import shutil
    import subprocess

    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    readme = repo / "recipes" / "structfail" / "README.md"
    readme.write_text("changed\n")  # a change that does not touch what the structure test checks
    report = validate_hard(repo / "recipes" / "structfail", out=tmp_path / "out", base_rev="HEAD")
    structure = report.layers[1]
    assert structure.status == "failed" and structure.existing is True
    assert structure.reason.startswith("existing: it failed on the base")
    left = subprocess.run([*git, "worktree", "list"], capture_output=True, text=True, check=True).stdout
    assert len(left.strip().splitlines()) == 1  # the base's worktree is gone


def test_soft_errors_do_not_stop_the_tests(tmp_path):
    report = validate_hard(RECIPES / "softfail", out=tmp_path)
    soft = report.layers[0]
    if soft.status == "unavailable":
        pytest.skip("static analysis not merged yet")
    assert statuses(report)[0] == ("soft", "failed")
    structure = report.layers[1]  # not run here for its own reason (this fixture's engine package is missing)
    assert structure.name == "structure" and structure.stopped_by is None
    assert "after soft" not in structure.reason and structure.reason.startswith("environment:")
    assert soft.findings and all(f["severity"] == "error" for f in soft.findings)
    assert report.exit_code == 1


def test_timeout_kills_the_process_group(tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("FIXTURE_PID_FILE", str(pid_file))
    start = time.monotonic()
    report = validate_hard(RECIPES / "sleepy", timeout_s=8, out=tmp_path / "out")
    assert time.monotonic() - start < 60
    smoke = next(layer for layer in report.layers if layer.name == "smoke")
    assert (smoke.name, smoke.status) == ("smoke", "timeout")
    assert report.layers[-1].status in ("missing", "not-run")
    assert "killed" in smoke.reason and report.exit_code == 1
    child = int(pid_file.read_text())
    for _ in range(50):  # the grandchild must be gone (killed and reaped by init)
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {child} survived the timeout")


def test_smoke_that_refuses_cpu_is_not_run_with_command(tmp_path):
    report = validate_hard(RECIPES / "needs_gpu", out=tmp_path)
    smoke = next(layer for layer in report.layers if layer.name == "smoke")
    assert smoke.status == "not-run"
    assert "needs an accelerator" in smoke.reason and "require GPUs/NPUs" in smoke.reason
    assert smoke.started and smoke.where and smoke.where.endswith("(refused there: needs GPUs/NPUs)")
    # the command for the other machine names no path of this one
    assert "from the repository root: python -m pytest recipes/needs_gpu/tests/test_smoke.py" in smoke.next_step
    assert sys.executable not in smoke.next_step and str(REPO) not in smoke.next_step
    assert "--config-override model.compile.enabled=true" in smoke.next_step
    assert report.layers[-1].status == "passed"  # the impact layer still ran
    assert report.verdict == "incomplete" and report.exit_code == 0


def test_missing_smoke_says_what_to_add(tmp_path):
    report = validate_hard(RECIPES / "nosmoke", out=tmp_path)
    smoke = report.layers[2]
    assert (smoke.name, smoke.status) == ("smoke", "missing")
    # the smoke test is the repository's own, not something generate writes
    assert "tests/test_smoke.py" in smoke.next_step and "generate" not in smoke.next_step
    assert report.exit_code == 1


def test_missing_impact_layer_says_it_is_optional_and_how_to_add_one():
    """generate is a no-op on a recipe already wired the same way, so the hint must not send people there."""
    from model_compile.hard.layers.plan import plan

    specs = plan(RECIPES / "nosmoke", None, None, [], "fallback:regional")
    impact = specs[-1]
    assert impact.name == "impact" and not impact.required
    assert impact.generate_hint.startswith("optional: add an eager-vs-compiled parity test under ")
    assert "tests/skills/model-compile/" in impact.generate_hint


def test_input_errors(tmp_path):
    with pytest.raises(InputError):
        validate_hard(tmp_path / "nope")
    with pytest.raises(InputError, match="one recipe"):
        validate_hard(REPO)
    with pytest.raises(InputError):
        validate_hard(RECIPES / "ok", overrides=["no-equals-sign"])
    assert main(["validate", "--hard", str(tmp_path / "nope")]) == 2


def test_cli_json_and_markdown(tmp_path, capsys):
    rc = main(["validate", "--hard", str(REPO), "--recipe", "ok", "--format", "json", "--out", str(tmp_path)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert {"tool", "version", "recipe", "environment", "layers", "runtime", "verdict"} <= set(data)
    assert data["recipe"] == "ok" and data["verdict"] == "passed"
    assert (tmp_path / "report.json").is_file()
    rc = main(["validate", "--hard", str(RECIPES / "ok"), "--format", "markdown", "--out", str(tmp_path / "md")])
    text = capsys.readouterr().out
    assert rc == 0 and "| smoke | passed | cpu-only |" in text and "runtime compile validation" not in text


def test_junit_parsing(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(
        """<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="4" failures="1" errors="1" skipped="1">
        <testcase classname="t" name="ok"/>
        <testcase classname="t" name="bad"><failure message="AssertionError: budget">trace line</failure></testcase>
        <testcase classname="t" name="err"><error message="fixture boom"/></testcase>
        <testcase classname="t" name="skip"><skipped message="needs a GPU"/></testcase>
        </testsuite></testsuites>"""
    )
    counts = parse_junit(xml)
    assert (counts.tests, counts.passed, counts.failures, counts.errors, counts.skipped) == (4, 1, 1, 1, 1)
    assert counts.failed_tests == ["t.bad", "t.err"]
    assert counts.messages[0].startswith("t.bad: AssertionError: budget")
    assert counts.skip_reasons == ["t.skip: needs a GPU"]
    assert parse_junit(tmp_path / "absent.xml") is None


CHAINED = """    def test_engine_structure(engine_class):
>       assert "self.model_kit.apply_model_compile" in prepare_source
E       AssertionError

recipes/r/tests/skills/model-compile/asserts.py:35: AssertionError

During handling of the above exception, another exception occurred:

>           raise AssertionError(f"Engine structure test failed: {e}")
E           AssertionError: Engine structure test failed:

recipes/r/tests/test_structure.py:124: AssertionError"""


def test_a_failure_re_raised_by_a_helper_names_where_it_was_first_raised(tmp_path):
    """A helper that catches an assert and raises its own (empty) message hides the file and line that matter."""
    xml = tmp_path / "j.xml"
    failure = CHAINED.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    xml.write_text(
        '<?xml version="1.0"?><testsuite tests="1" failures="1"><testcase classname="t" name="structure">'
        f'<failure message="AssertionError: Engine structure test failed:">{failure}</failure></testcase></testsuite>'
    )
    (message,) = parse_junit(xml).messages
    assert message.splitlines()[0] == (
        "t.structure: AssertionError: Engine structure test failed: "
        "(first raised at recipes/r/tests/skills/model-compile/asserts.py:35)"
    )
    assert origin("x.py:3: AssertionError") is None  # near miss: one place only, the message is its own


def test_trace_summary_and_missing_tlparse(tmp_path, monkeypatch):
    from model_compile.hard import trace

    assert "no trace log" in trace.summarise(tmp_path / "none", tmp_path / "o").note
    tdir = tmp_path / "trace"
    tdir.mkdir()
    (tdir / "dedicated_log_torch_trace_rank_0_x.log").write_text("{}\n")
    monkeypatch.setattr(trace, "find_tlparse", lambda: None)
    summary = trace.summarise(tdir, tmp_path / "o")
    assert summary.log.endswith(".log") and "tlparse not installed" in summary.note
    out = tmp_path / "tl"
    (out / "-_0_1_0").mkdir(parents=True)
    (out / "-_0_1_0" / "recompile_reasons_9.json").write_text("0/0: tensor 'x' size mismatch\n")
    (out / "compile_directory.json").write_text(
        json.dumps(
            {
                "[0/0]": {
                    "artifacts": [
                        {"name": "dynamo_output_graph_1.txt", "url": "a"},
                        {"name": "dynamo_graph_break_reason_2", "url": "b"},
                    ]
                },
                "[0/1]": {
                    "artifacts": [
                        {"name": "dynamo_output_graph_5.txt", "url": "c"},
                        {"name": "recompile_reasons_9.json", "url": "-_0_1_0/recompile_reasons_9.json"},
                    ]
                },
            }
        )
    )
    filled = trace.TraceSummary()
    trace._fill_counts(filled, out)
    assert (filled.compiles, filled.graph_breaks) == (2, 1)
    assert filled.recompile_reasons == ["[0/1]: 0/0: tensor 'x' size mismatch"]


def test_report_names_wiring_and_gaps_without_torch(tmp_path):
    report = validate_hard(RECIPES / "needs_gpu", out=tmp_path)
    assert report.wiring.compile_path is not None
    assert any(g.startswith("smoke: not-run - run: ") for g in report.gaps)
    if report.environment.cpu_only:
        assert report.gaps[0].startswith("no accelerator")


_SCHEMA_COMPILE_OFF = """from pydantic import BaseModel


class CompileConfig(BaseModel):
    enabled: bool = False
    backend: str = "inductor"
    mode: str = "default"


class ModelConfig(BaseModel):
    compile: CompileConfig = CompileConfig()


class FixtureConfig(BaseModel):
    engine: str = "structfail"
    model: ModelConfig = ModelConfig()
"""


@pytest.mark.parametrize("stage_enables", [False, True])
def test_a_failure_with_compile_off_everywhere_is_not_compiles(tmp_path, stage_enables):
    """No base to compare with: a test layer that failed while every stage keeps compile off (and the run did
    not switch it on) is existing, not compile's; near miss: a stage that turns compile on keeps it the recipe's."""
    import shutil

    recipe = tmp_path / "repo" / "recipes" / "structfail"
    shutil.copytree(REPO, tmp_path / "repo")
    (recipe / "configs" / "schema.py").write_text(_SCHEMA_COMPILE_OFF)
    yaml = "engine: structfail\n" + ("model:\n  compile:\n    enabled: true\n" if stage_enables else "")
    (recipe / "configs" / "train.yaml").write_text(yaml)
    report = validate_hard(recipe, out=tmp_path / "out", rehearsal=False)
    structure = report.layers[1]
    assert structure.name == "structure" and structure.status == "failed"
    if stage_enables:
        assert structure.existing is None and not structure.reason.startswith("not caused by compile")
    else:
        assert structure.existing is True
        assert structure.reason.startswith(
            "not caused by compile: it failed with compile off (every stage keeps it off and this run did not pass "
            "model.compile.enabled=true)."
        )
