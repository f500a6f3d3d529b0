"""`diff` matches findings by rule, recipe, file and subject; says what a change
really did (superseded, not fixed; a dead default; one line per change); and
names the commit it reviews."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_repo import base_files, commit, engine, git, init_repo, recipe_files, write

pytest.importorskip("model_compile.analyze")

from model_compile.review.render import render_text  # noqa: E402
from model_compile.review.run import review  # noqa: E402

MESH = "parallel:\n  mesh:\n    replicate: -1\n    shard: {shard}\n    tensor: 1\n"


def _repo(tmp_path: Path, shard: int = 8) -> Path:
    files: dict[str, str | bytes] = dict(base_files())
    files.update(recipe_files("vlm"))
    files["recipes/vlm/configs/train.yaml"] = MESH.format(shard=shard) + str(files["recipes/vlm/configs/train.yaml"])
    return init_repo(tmp_path / "repo", files)


def test_a_finding_survives_an_edit_of_its_line(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    schema = root / "recipes/vlm/configs/schema.py"
    literal = 'mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"'
    schema.write_text(schema.read_text().replace(literal, 'mode: str = "default"'))
    base = commit(root, "mode typed str (MC205)")
    schema.write_text(schema.read_text().replace('mode: str = "default"', '\n    mode: str = "max-autotune"'))
    head = commit(root, "other default, line moved")
    rep = review(root, base=base, head=head)
    assert rep.new == [] and rep.fixed == [] and rep.superseded == []
    (f,) = [f for f in rep.unchanged if f.rule == "MC205"]
    assert f.on_changed_line and f.code == 'mode: str = "max-autotune"'


def test_kit_compile_moved_after_wrap_supersedes_mc407(tmp_path: Path) -> None:
    root = _repo(tmp_path, shard=8)
    base = git(root, "rev-parse", "HEAD")
    write(root, {"recipes/vlm/engine/vlm_engine.py": engine("Vlm", "after_wrap")})
    head = commit(root, "compile after parallelize_model")
    rep = review(root, base=base, head=head)
    assert [f.rule for f in rep.new] == ["MC408"]
    assert rep.fixed == []
    assert [(f.rule, f.superseded_by) for f in rep.superseded] == [("MC407", "MC408")]
    (d,) = rep.recipes
    assert (d.new, d.fixed, d.superseded) == (1, 0, 1)
    text = render_text(rep)
    assert "superseded by MC408" in text and "fixed findings: 0" in text


def test_kit_call_replaced_by_a_wrapper_after_wrap_supersedes_mc407(tmp_path: Path) -> None:
    """The kit call is gone, a `torch.compile` wrapper after the wrap lands in its function with errors: MC407 is
    superseded by the placement error (the compile moved), not "no longer reported" as if it were an improvement."""
    root = _repo(tmp_path, shard=8)
    base = git(root, "rev-parse", "HEAD")
    write(root, {"recipes/vlm/engine/vlm_engine.py": engine("Vlm", "wrapper_after_wrap")})
    head = commit(root, "compile the wrapped model")
    rep = review(root, base=base, head=head)
    assert "MC404" in {f.rule for f in rep.new} or "MC408" in {f.rule for f in rep.new}
    assert rep.fixed == []
    ((rule, by),) = [(f.rule, f.superseded_by) for f in rep.superseded]
    assert rule == "MC407" and by in {f.rule for f in rep.new if f.severity == "error"}


def test_a_compile_call_that_stays_keeps_its_gone_finding_fixed(tmp_path: Path) -> None:
    """Near miss: a finding that goes while the compile call it was about stays (here: the mesh stops sharding,
    so MC407 no longer applies) is fixed, not superseded."""
    root = _repo(tmp_path, shard=8)
    base = git(root, "rev-parse", "HEAD")
    cfg = root / "recipes/vlm/configs/train.yaml"
    cfg.write_text(cfg.read_text().replace("shard: 8", "shard: 1"))
    head = commit(root, "no sharding")
    rep = review(root, base=base, head=head)
    assert [f.rule for f in rep.fixed] == ["MC407"] and rep.superseded == []


def test_mc407_names_the_sharding_stages_and_is_silent_under_ddp(tmp_path: Path) -> None:
    from model_compile.analyze import analyze_path

    fsdp = analyze_path(_repo(tmp_path / "a", shard=8))
    (f,) = [f for f in fsdp.all_findings() if f.rule == "MC407"]
    assert "in train (parallel.mesh.shard: 8)" in f.message
    ddp = analyze_path(_repo(tmp_path / "b", shard=1))
    assert not [f for f in ddp.all_findings() if f.rule == "MC407"]


def test_one_line_per_change_and_dead_default(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    base = git(root, "rev-parse", "HEAD")
    eng = root / "recipes/vlm/engine/vlm_engine.py"
    text = eng.read_text().replace(
        "model = self.model_kit.apply_model_compile(\n                model,",
        "net = model\n            model = self.model_kit.apply_model_compile(\n                net,",
    )
    eng.write_text(text)
    schema = root / "recipes/vlm/configs/schema.py"
    schema.write_text(schema.read_text().replace('] = "default"', '] = "max-autotune"'))
    head = commit(root, "compile an alias; change the default mode")
    rep = review(root, base=base, head=head)
    (d,) = rep.recipes
    target_lines = [c for c in d.ledger_changes if "target changed" in c]
    assert len(target_lines) <= 1, d.ledger_changes
    (mode,) = [c for c in d.config_changes if c.where == "schema" and c.field == "mode"]
    assert mode.effect == "no effect at run time: every stage YAML sets mode (train)"
    assert "(no effect at run time" in render_text(rep)


def test_clean_tree_head_is_the_branch_commit(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    git(root, "checkout", "-q", "-b", "feature")
    write(root, {"recipes/vlm/README.md": "# vlm\n\nMore words.\n"})
    sha = commit(root, "docs")
    rep = review(root)
    assert (rep.head.rev, rep.head.commit) == ("feature", sha)
    assert render_text(rep).splitlines()[0].endswith(f".. feature ({sha[:12]})")


def test_compile_turned_on_in_a_sharded_stage_makes_mc407_new(tmp_path: Path) -> None:
    """The finding's subject is the stages it applies to: enabling compile where FSDP2 shards changes it."""
    files: dict[str, str | bytes] = dict(base_files())
    files.update(recipe_files("vlm"))
    stage = str(files["recipes/vlm/configs/train.yaml"])
    files["recipes/vlm/configs/train.yaml"] = MESH.format(shard=1) + stage
    files["recipes/vlm/configs/stage2.yaml"] = MESH.format(shard=8) + stage
    root = init_repo(tmp_path / "repo", files)
    base = git(root, "rev-parse", "HEAD")
    s2 = root / "recipes/vlm/configs/stage2.yaml"
    s2.write_text(s2.read_text().replace("enabled: false", "enabled: true  # model-compile: enabled - faster steps"))
    head = commit(root, "compile on in stage2")
    rep = review(root, base=base, head=head)
    (f,) = [f for f in rep.new if f.rule == "MC407"]
    assert "compile is on in stage2" in f.message and "train uses DDP" in f.message
    assert not [f for f in rep.unchanged if f.rule == "MC407"]
    assert [(f.rule, f.superseded_by) for f in rep.superseded] == [("MC407", "MC407")]  # the base one is not "fixed"
    assert not [f for f in rep.fixed if f.rule == "MC407"]
    from model_compile.report.render import markdown
    from model_compile.report.run import review_path

    md = markdown(review_path(root, base=base, head=head))
    assert (
        "### Superseded by a new finding on the same subject, or where its compile call moved (not fixed)" in md
        and "stronger" not in md
    )
    assert "(replaced by the new MC407 finding)" in md
    # An unrelated edit keeps MC407 where it was: existing.
    (root / "recipes/vlm/README.md").write_text("# vlm\n\nmore\n")
    again = commit(root, "docs")
    rep = review(root, base=head, head=again)
    assert [f.rule for f in rep.unchanged if f.rule == "MC407"] == ["MC407"] and not rep.new


def test_the_same_rule_new_at_the_same_place_supersedes_instead_of_fixing() -> None:
    from model_compile.review.compare import split_findings
    from model_compile.rules.finding import Finding

    def mc407(subject: str, line: int) -> Finding:
        return Finding(
            rule="MC407",
            severity="info",
            file="engine/e.py",
            line=line,
            message="m",
            fix="f",
            recipe="r",
            subject=subject,
        )

    base = [mc407("compile apply_model_compile model | FSDP2 in train", 190)]
    head = [mc407("compile torch.compile model | FSDP2 in train", 190)]
    new, fixed, superseded, _ = split_findings(base, head, {}, {}, {"engine/e.py": {190}})
    assert [f.rule for f in new] == ["MC407"] and fixed == []
    assert [(f.rule, f.superseded_by) for f in superseded] == [("MC407", "MC407")]
    far = [mc407("compile torch.compile model | FSDP2 in train", 240)]  # near miss: elsewhere in the file
    _, fixed, superseded, _ = split_findings(base, far, {}, {}, {"engine/e.py": {240}})
    assert [f.rule for f in fixed] == ["MC407"] and superseded == []
