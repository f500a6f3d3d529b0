"""The change's own lines, from the twins' counts: each hunk's runs in a graph, as Python, in the eager twin, and
the lines no run reached."""

from __future__ import annotations

from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal.reading import changes

ROOT = "/repo"
LOSS = "/repo/pkg/kit/loss.py"


def _recs(compiled: dict, eager: dict) -> dict:
    return {"compiled": [{"phases": {"lines": compiled}}], "eager": [{"phases": {"lines": eager}}]}


def test_each_hunk_says_how_it_ran_and_what_it_did_not_reach() -> None:
    facts = RehearsalFacts(label="cpu-only (tiny model)", overrides=["data.max_seq_len=512"])
    spec = {"repo_root": ROOT, "changed_lines": {"pkg/kit/loss.py": [10, 11, 30], "pkg/unused.py": [1]}}
    compiled = {
        "how": "sys.monitoring line events",
        "counts": {LOSS: {"10": 16}},
        "imported": [LOSS],
        "graphs": [{"lines": [[LOSS, 30]], "calls": 8}],
    }
    eager = {"counts": {LOSS: {"10": 16}}, "imported": [LOSS]}
    changes.read(facts, _recs(compiled, eager), spec)
    first, second = facts.changed_lines
    assert (first.file, first.lines, first.ran_compiled, first.ran_eager, first.ran_eager_twin) == (
        "pkg/kit/loss.py",
        [10, 11],
        0,
        16,
        16,
    )
    assert first.not_reached == [11]
    assert (second.lines, second.ran_compiled, second.ran_eager, second.not_reached) == ([30], 8, 0, [])
    assert (
        facts.changed_note and "1 changed Python file(s) the run does not import (pkg/unused.py)" in facts.changed_note
    )
    assert any("pkg/kit/loss.py:11 did not run in any twin" in n and "data.max_seq_len=512" in n for n in facts.notes)


def test_the_json_contract_keys() -> None:
    facts = RehearsalFacts(label="cpu-only (tiny model)")
    spec = {"repo_root": ROOT, "changed_lines": {"pkg/kit/loss.py": [10]}}
    changes.read(facts, _recs({"counts": {}, "imported": [LOSS]}, {"counts": {}, "imported": [LOSS]}), spec)
    entry = facts.model_dump()["changed_lines"][0]
    assert {"file", "lines", "ran_compiled", "ran_eager"} <= set(entry)
    assert isinstance(entry["lines"], list) and isinstance(entry["ran_compiled"], int)


def test_no_change_no_lines() -> None:
    facts = RehearsalFacts(label="cpu-only (tiny model)")
    changes.read(facts, _recs({}, {}), {"repo_root": ROOT})
    assert facts.changed_lines == [] and facts.changed_note is None


def test_a_call_written_over_lines_ran_when_its_statement_ran_and_its_body_line_is_its_own(tmp_path) -> None:
    engine = tmp_path / "recipes" / "r" / "engine.py"
    engine.parent.mkdir(parents=True)
    engine.write_text(
        "def prepare(kit, model, cfg):\n"  # 1
        "    model = kit.apply_model_compile(\n"  # 2
        "        model,\n"  # 3
        "        cfg,\n"  # 4
        "    )\n"  # 5: the closing `)` never gets a line event
        "    if cfg.never:\n"  # 6
        "        return None\n"  # 7: its own statement: not reached
        "    return model\n"  # 8
    )
    facts = RehearsalFacts(label="cpu-only (tiny model)")
    spec = {"repo_root": str(tmp_path), "changed_lines": {"recipes/r/engine.py": [2, 3, 4, 5, 6, 7]}}
    path = str(engine)
    counts = {"counts": {path: {"2": 2, "6": 2}}, "imported": [path]}
    changes.read(facts, _recs(counts, counts), spec)
    (hunk,) = facts.changed_lines
    assert hunk.lines == [2, 3, 4, 5, 6, 7] and hunk.ran_eager == 2 and hunk.not_reached == [7]


def test_a_changed_signature_runs_when_its_function_is_called_not_when_it_is_defined(tmp_path) -> None:
    """A def line runs at import: an agent read `2 ran as Python` of a change whose new function was never called."""
    util = tmp_path / "pkg" / "util.py"
    util.parent.mkdir(parents=True)
    util.write_text(
        "@staticmethod\n"  # 1
        "def save(model,\n"  # 2
        "         processor=None):\n"  # 3
        '    """Save it."""\n'  # 4
        "    return model\n"  # 5
        "def used(x):\n"  # 6
        "    return x\n"  # 7
    )
    facts = RehearsalFacts(label="cpu-only (tiny model)")
    spec = {"repo_root": str(tmp_path), "changed_lines": {"pkg/util.py": [1, 2, 3, 6]}}
    path = str(util)
    counts = {"counts": {path: {"1": 1, "2": 1, "6": 1, "7": 5}}, "imported": [path]}  # defined; only used() called
    changes.read(facts, _recs(counts, counts), spec)
    first, second = facts.changed_lines
    assert first.lines == [1, 2, 3] and first.ran_eager == 0 and first.not_reached == [1, 2, 3]
    assert second.lines == [6] and second.ran_eager == 5 and second.not_reached == []
