"""Sites by code identity and keys across a change, read without running anything (issue 45).

The rehearsed cases are in test_change_identity.py (slow); these pin the readers: a statement moved by lines
added above it keeps its identity, an edited one does not; resume functions' lines follow the statement; the
first renames are paired; a rename breaks the checkpoint code that matches state by parameter name; a keys note
documents it.
"""

from __future__ import annotations

from pathlib import Path

from git_helpers import git

from model_compile.hard.models import GraphBreakSite, RehearsalFacts, RehearsalStep
from model_compile.hard.rehearsal import base
from model_compile.hard.rehearsal.reading import identity, keys

LOSS = """\
import torch


def loss(x, chunks):
    total = 0
    for part in x.split(chunks):
        total = total + part.sum()
        torch._dynamo.graph_break()
    return total
"""


def _facts(tmp: Path, text: str, line: int, frame_line: int) -> RehearsalFacts:
    (tmp / "pkg").mkdir(parents=True, exist_ok=True)
    (tmp / "pkg" / "loss.py").write_text(text)
    hit = (
        f"torch._dynamo hit config.recompile_limit (8) function: 'torch_dynamo_resume_in_loss_at_{frame_line}' "
        f"(pkg/loss.py:{frame_line}) last reason: size mismatch"
    )
    facts = RehearsalFacts(
        status="passed",
        label="cpu-only (tiny model)",
        graph_break_sites=[GraphBreakSite(site=f"pkg/loss.py:{line}", reason="graph_break()", count=2)],
        steps=[RehearsalStep(step=0, shape="s", limit_hits=[hit])],
    )
    facts.code_ids = identity.identities([facts.graph_break_sites[0].site, hit], tmp)
    return facts


def test_a_statement_moved_down_is_the_same_site_and_an_edited_one_is_not(tmp_path: Path) -> None:
    at_base = _facts(tmp_path / "base", LOSS, 8, 8)
    moved = LOSS.replace("    total = 0\n", "    total = 0\n    chunks = max(chunks, 1)\n    assert chunks\n")
    head = _facts(tmp_path / "head", moved, 10, 10)
    assert base.regressions(head, at_base) == []
    said = base.versus(head, at_base, "main")
    assert "1 graph-break site(s) only moved with the change (the same statement): pkg/loss.py:8 -> pkg/loss.py:10" in (
        said
    )
    assert not any("new with the change" in line and "graph-break" in line for line in said)
    edited = moved.replace("torch._dynamo.graph_break()", "torch._dynamo.graph_break()  # still here\n        print(1)")
    head = _facts(tmp_path / "edited", edited, 11, 11)  # another statement at the break
    assert [r.split(" (", 1)[0] for r in base.regressions(head, at_base)] == [
        "new graph-break site pkg/loss.py:11",
        "new recompile-limit hit in 'torch_dynamo_resume_in_loss_at_11'",
    ]


def test_keys_across_pair_the_first_renames_and_say_what_they_break(tmp_path: Path) -> None:
    before = {"parameters": ["blocks.0.attn.q.weight", "blocks.0.mlp.w.weight", "head.weight"]}
    after = {
        "parameters": [
            "blocks.0.attn._checkpoint_wrapped_module.q.weight",
            "blocks.0.mlp._checkpoint_wrapped_module.w.weight",
            "head.weight",
        ]
    }
    differ = keys.across(after, before)
    assert list(differ) == ["parameters"]
    assert differ["parameters"].startswith("parameter names: 3 at the base, 3 at the head; 2 of the base's are gone")
    assert "'blocks.0.attn.q.weight' -> 'blocks.0.attn._checkpoint_wrapped_module.q.weight'" in differ["parameters"]
    assert keys.across(before, before) == {}
    root = tmp_path / "repo"
    (root / "recipes" / "r" / "engine").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ckpt.py").write_text(
        "from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict\n\n\n"
        "def save(model, optimizer):\n    return get_optimizer_state_dict(model, optimizer)\n\n\n"
        "def fill(model, state):\n    for name, _ in model.named_parameters():\n        state.setdefault(name, 0)\n"
    )
    (root / "recipes" / "r" / "engine" / "e.py").write_text("from pkg.ckpt import save\n")
    git(root, "init", "-q")
    calls = keys.checkpoint_calls(root, root / "recipes" / "r")
    assert [(c["form"], c["does"], c["site"], c["function"]) for c in calls] == [
        ("optimizer", "reads", "pkg/ckpt.py:5", "save"),
        ("by_name", "matches", "pkg/ckpt.py:9", "fill"),
    ]
    assert keys.breaks("parameters", calls) == (
        "a checkpoint saved before the change does not resume after it as saved: pkg/ckpt.py:9 (fill) matches "
        "saved state to parameters by name"
    )
    assert keys.documented(root, ["pkg/ckpt.py"]) is None
    (root / "pkg" / "ckpt.py").write_text("# model-compile: keys - wrapped blocks; old checkpoints are converted\n")
    assert keys.documented(root, ["pkg/ckpt.py"]) == "pkg/ckpt.py:1: wrapped blocks; old checkpoints are converted"


def test_a_rename_fails_the_head_unless_documented() -> None:
    head = RehearsalFacts(status="passed", label="x", steps=[RehearsalStep(step=0, shape="s")])
    at_base = RehearsalFacts(status="passed", label="x", steps=[RehearsalStep(step=0, shape="s")])
    head.keys_across = ["parameter names: 3 at the base, 3 at the head; 2 of the base's are gone"]
    base.apply(head, at_base, "main")
    assert head.status == "failed" and head.reason is not None
    assert head.reason.startswith("new with the change: keys differ from the base's: parameter names")
    documented = RehearsalFacts(status="passed", label="x", steps=[RehearsalStep(step=0, shape="s")])
    documented.keys_across, documented.keys_documented = head.keys_across, "e.py:3: the blocks are wrapped now"
    base.apply(documented, at_base, "main")
    assert documented.status == "passed" and documented.regressions == []
    assert any("documented by the change (e.py:3" in v for v in base.versus(documented, at_base, "main"))


def test_nothing_worse_says_so_when_none_of_the_changes_lines_ran() -> None:
    """A change to checkpoint saving that the rehearsal never reaches: 'the change makes nothing worse' covers
    nothing of it, and the verdict says so (an agent found the save code never ran)."""
    from model_compile.hard.facts import ChangedLines

    head = RehearsalFacts(
        status="failed",
        label="x",
        reason="compile has no effect on layers",
        steps=[RehearsalStep(step=0, shape="s")],
        changed_lines=[ChangedLines(file="pkg/save.py", lines=[3, 4], ran_compiled=0, ran_eager=0, not_reached=[3, 4])],
    )
    at_base = RehearsalFacts(status="failed", label="x", steps=[RehearsalStep(step=0, shape="s")])
    base.apply(head, at_base, "main")
    assert head.existing and "none of its 1 changed hunk(s) ran here: it says nothing of them" in (head.reason or "")
