"""The rehearsal's static plan, its shape schedule, and how it judges a record (no child process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_compile.analyze import analyze_path
from model_compile.hard.env.proc import ProcResult
from model_compile.hard.models import RehearsalFacts, RehearsalStep
from model_compile.hard.rehearsal import run as rehearsal
from model_compile.hard.rehearsal.plan import NotPlanned, family_from_name, plan, resolve_family
from model_compile.runtime.batches import kind_of, schedule

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"
RECIPES = FIXTURES / "recipes"
DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_repo"


def _plan(recipe_dir: Path, tmp_path: Path, **kwargs):
    report = analyze_path(recipe_dir)
    return plan(report.recipes[0], recipe_dir, recipe_dir.parents[1], tmp_path, **kwargs)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"),
        ("./pretrained/Qwen3-VL-8B-Base-stage1", "qwen3_vl"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl"),
        ("Qwen/Qwen2-VL-2B", "qwen2_vl"),
        ("Qwen/Qwen3-8B-Base", "qwen3"),
        ("google/vit-base-patch16-224", "vit"),
        ("acme/mystery-7b", None),
        ("Qwen/Qwen3-30B-A3B-MoE", None),  # near miss: a MoE has no tiny family here
    ],
)
def test_family_from_name(name: str, family: str | None) -> None:
    assert family_from_name(name) == family


def test_local_checkpoint_and_hub_cache_config_win_over_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"model_type": "qwen2_vl", "tie_word_embeddings": True}))
    family, source, base = resolve_family(str(local), tmp_path, None)
    assert (family, base["tie_word_embeddings"]) == ("qwen2_vl", True) and "local checkpoint" in source
    hub = tmp_path / "hf" / "hub" / "models--acme--mystery-7b" / "snapshots" / "abc"
    hub.mkdir(parents=True)
    (hub / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    family, source, _ = resolve_family("acme/mystery-7b", tmp_path, None)
    assert family == "qwen3" and "hub cache" in source


def test_unknown_architecture_is_not_planned_and_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(NotPlanned, match="--model-config"):
        _plan(RECIPES / "lm_unknown", tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"model_type": "mamba"}))
    with pytest.raises(NotPlanned, match="mamba.*no tiny family"):
        resolve_family("acme/mystery-7b", tmp_path, tmp_path / "bad.json")


def test_plan_overrides_checkpoint_attention_and_cpu_backend(tmp_path: Path) -> None:
    p = _plan(RECIPES / "lm_blocks", tmp_path)
    assert p.stage == "train" and p.family == "qwen3"
    assert f"model.pretrained_model_name_or_path={tmp_path / 'tiny-checkpoint'}" in p.overrides
    assert "model.attn_implementation=sdpa" in p.overrides
    assert (p.backend, p.mode) == ("aot_eager", "default") and "unless --backend inductor" in p.backend_reason
    assert p.spec["engine_module"] == "recipes.lm_blocks.engine.lm_blocks_engine"
    assert p.spec["targets"] == ["model.layers.*"]
    on_gpu = _plan(RECIPES / "lm_blocks", tmp_path, cpu_only=False)
    assert on_gpu.backend == "inductor" and on_gpu.backend_reason == "the stage's own backend"
    asked = _plan(RECIPES / "lm_blocks", tmp_path, backend="eager")
    assert asked.backend == "eager" and "asked for" in asked.backend_reason


def test_plan_of_a_recipe_that_builds_from_its_own_fields(tmp_path: Path) -> None:
    p = _plan(DEMO / "recipes" / "vlm_kit", tmp_path)
    assert p.family is None and p.spec["checkpoint"] is None and "own config fields" in p.family_source
    assert p.spec["disabled"] == ["model.visual"]  # the kit keeps the vision tower eager
    assert p.spec["schema_class"] == "VlmKitConfig"
    with pytest.raises(NotPlanned, match="no configs/nope.yaml"):
        _plan(DEMO / "recipes" / "vlm_kit", tmp_path, stage="nope")
    with pytest.raises(NotPlanned, match="does not compile"):
        _plan(DEMO / "recipes" / "vlm_plain", tmp_path)


def test_mesh_wandb_and_workers_are_one_rank_offline(tmp_path: Path) -> None:
    recipe = tmp_path / "repo" / "recipes" / "r"
    for sub in ("configs", "engine"):
        (recipe / sub).mkdir(parents=True)
    (recipe / "configs" / "schema.py").write_text((RECIPES / "lm_blocks" / "configs" / "schema.py").read_text())
    (recipe / "engine" / "r_engine.py").write_text(
        (RECIPES / "lm_blocks" / "engine" / "lm_blocks_engine.py").read_text()
    )
    (recipe / "configs" / "train.yaml").write_text(
        "model:\n  pretrained_model_name_or_path: Qwen/Qwen3-8B-Base\n  compile: {enabled: true, backend: inductor, mode: max-autotune}\n"
        "parallel:\n  mesh: {replicate: -1, shard: 8, tensor: 1}\nlog:\n  backends: [terminal, wandb]\ndata:\n  num_workers: 4\n"
        "optim:\n  mixed_precision: bf16\n"
    )
    p = plan(analyze_path(recipe).recipes[0], recipe, tmp_path / "repo", tmp_path / "out")
    assert {
        "parallel.mesh.replicate=1",
        "parallel.mesh.shard=1",
        "log.backends=[terminal]",
        "data.num_workers=0",
    } <= set(p.overrides)
    assert "parallel.mesh.tensor=1" not in p.overrides  # already one
    assert p.stage_reason == "the first stage that enables compile"
    assert p.spec["low_precision"] is True
    assert any("max-autotune applies to inductor only" in n for n in p.notes)


def test_schedule_has_ten_distinct_lengths_and_every_vlm_step_an_image() -> None:
    for kind, packed in (("vlm", True), ("vlm", False), ("causal_lm", False), ("causal_lm", True)):
        shapes = schedule(kind, 12, packed)
        totals = {s.describe(kind) for s in shapes}
        assert len(totals) == 12, (kind, packed)
        if kind == "vlm":
            assert all(any(x.images for x in s.samples) for s in shapes)
            assert {len(x.images) for s in shapes for x in s.samples} == {0, 1, 2}
    assert len({s.describe("classifier") for s in schedule("classifier", 10, False)}) == 10


def test_kind_of_reads_the_model_config() -> None:
    class C:
        pass

    vlm, clf, lm = C(), C(), C()
    vlm.vision_config, vlm.image_token_id = object(), 5
    clf.image_size, clf.num_labels = 32, 10
    assert (kind_of(vlm), kind_of(clf), kind_of(lm)) == ("vlm", "classifier", "causal_lm")


@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("/repo/recipes/x/model/a.py:12", "recipes/x/model/a.py:12"),
        ("/venv/lib/python3.12/site-packages/transformers/models/q.py:9", "library transformers/models/q.py:9"),
        ("/repo/.venv/lib/python3.12/site-packages/torch/nn/m.py:3", "library torch/nn/m.py:3"),
    ],
)
def test_graph_break_sites_name_user_and_library_code(where: str, name: str) -> None:
    assert rehearsal.site_name(where, Path("/repo")) == name


def _facts(**steps: object) -> RehearsalFacts:
    step = RehearsalStep(step=0, shape="s", loss_rel_err=0.0, grad_rel_err=0.0, tolerance=1e-5, new_graphs=2)
    for key, value in steps.items():
        setattr(step, key, value)
    return RehearsalFacts(status="passed", label="cpu-only (tiny model)", steps=[step], compiled_module_count=1)


def test_judge_fails_parity_limit_hits_and_nothing_compiled() -> None:
    ok = _facts()
    rehearsal.judge(ok)
    assert ok.status == "passed"
    bad = _facts(grad_rel_err=3e-3, worst_grad="model.layers.0.mlp.up_proj.weight")
    rehearsal.judge(bad)
    assert (
        bad.status == "failed"
        and "gradients differ at step 0" in (bad.reason or "")
        and "up_proj" in (bad.reason or "")
    )
    hit = _facts(limit_hits=["torch._dynamo hit config.recompile_limit (8) function: 'forward'"])
    rehearsal.judge(hit)
    assert hit.status == "failed" and "recompile limit hit at step 0" in (hit.reason or "")
    eager = _facts(new_graphs=0)
    rehearsal.judge(eager)
    assert eager.status == "failed" and "no graph was compiled" in (eager.reason or "")


def test_a_child_that_dies_without_a_record_is_a_failure_and_a_timeout_says_what_was_done() -> None:
    crashed = RehearsalFacts(label="cpu-only (tiny model)")
    rehearsal.interpret(crashed, {}, ProcResult(-11, 1.0, False, "Segmentation fault"), 60)
    assert crashed.status == "failed" and "exited -11 without a result" in (crashed.reason or "")
    slow = RehearsalFacts(label="cpu-only (tiny model)")
    record = {"phases": {"checkpoint": {"ok": True}, "engine": {"ok": True}}, "status": "running"}
    rehearsal.interpret(slow, record, ProcResult(None, 60.0, True, ""), 60)
    assert slow.status == "timeout" and "done: checkpoint, engine" in (slow.reason or "")


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3", "vit"])
def test_every_tiny_family_trains_on_its_batches(family: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from model_compile.runtime.batches import make_batch
    from model_compile.runtime.tiny_models import build

    model, _ = build(family)
    kind = kind_of(model.config)
    assert kind == {"vit": "classifier", "qwen3": "causal_lm"}.get(family, "vlm")
    assert sum(p.numel() for p in model.parameters()) < 400_000
    for packed in (False, True) if kind != "classifier" else (False,):
        for shape in schedule(kind, 2, packed):
            batch = make_batch(kind, model.config, shape, 0, set())
            out = model(**batch) if kind == "classifier" else model(**batch, use_cache=False)
            assert torch.isfinite(out.loss)
            out.loss.backward()


def test_a_recipe_builder_from_schema_sizes_is_shrunk(tmp_path: Path) -> None:
    recipe = tmp_path / "repo" / "recipes" / "vit"
    for sub in ("configs", "engine"):
        (recipe / sub).mkdir(parents=True)
    (recipe / "configs" / "schema.py").write_text(
        "from typing import Literal\nfrom pydantic import BaseModel, Field\n\n\n"
        "class CompileConfig(BaseModel):\n    enabled: bool = False\n"
        '    backend: Literal["inductor", "aot_eager", "eager"] = "inductor"\n'
        '    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"\n\n\n'
        "class ViTModelConfig(BaseModel):\n    load_pretrained_weights: bool = False\n"
        '    pretrained_model_name_or_path: str = "google/vit-base-patch16-224"\n'
        "    hidden_size: int = Field(768, ge=1)\n    num_hidden_layers: int = Field(default=12)\n    patch_size: int = 8\n"
        "    compile: CompileConfig = Field(default_factory=CompileConfig)\n\n\n"
        "class Root(BaseModel):\n    model: ViTModelConfig = Field(default_factory=ViTModelConfig)\n"
    )
    (recipe / "engine" / "vit_engine.py").write_text(
        "class VitEngine:\n    def prepare_model(self):\n        model = build_vit_model(self.config.model)\n"
        "        if self.config.model.compile.enabled:\n            model = self.model_kit.apply_model_compile(model, "
        "backend=self.config.model.compile.backend, mode=self.config.model.compile.mode)\n"
        "        return parallelize_model(model)\n"
    )
    (recipe / "configs" / "train.yaml").write_text(
        "model:\n  pretrained_model_name_or_path: google/vit-base-patch16-224\n  load_pretrained_weights: false\n"
        "  image_size: 224\n  compile: {enabled: false, backend: inductor, mode: default}\n"
    )
    p = plan(analyze_path(recipe).recipes[0], recipe, tmp_path / "repo", tmp_path / "out")
    assert p.spec["checkpoint"]["family"] == "vit"  # written for a builder that reads the config from the path
    assert f"model.pretrained_model_name_or_path={tmp_path / 'out' / 'tiny-checkpoint'}" in p.overrides
    assert {"model.hidden_size=32", "model.num_hidden_layers=2", "model.image_size=32"} <= set(p.overrides)
    assert not any(o.startswith("model.patch_size") for o in p.overrides)  # already tiny


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "tensorrt"], "--backend 'tensorrt' is not one of"),
        (["--steps", "1"], "--steps must be >= 2"),
        (["--model-config", "/nonexistent/config.json"], "no such file"),
        (["--timeout", "0"], "--timeout must be > 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from model_compile.cli import main

    code = main(["rehearse", str(RECIPES / "lm_blocks"), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_cpu_summary_names_what_the_rehearsal_measured() -> None:
    from model_compile.hard.layers.render import cpu_note
    from model_compile.hard.models import Environment, HardReport, LayerResult

    facts = _facts()
    layer = rehearsal.to_layer(
        facts.model_copy(update={"wall_s": 12.0}), "model-compile rehearse r", "/repo", "cpu-only"
    )
    report = HardReport(
        version="0",
        kind="cpu-only runtime checks",
        recipe="r",
        repo_root="/repo",
        out_dir="/out",
        environment=Environment(python="3.11", executable="python", label="cpu-only"),
        layers=[LayerResult(name="soft", status="passed", label="static"), layer],
        rehearsal=facts,
    )
    note = cpu_note(report)
    assert layer.started and "rehearsal" in note and "over 1 shapes on a tiny model" in note
    assert "nothing measured beyond pass/fail" not in note


def test_the_summary_leads_with_the_failure_groups_recompiles_and_reads_guards() -> None:
    from model_compile.hard.rehearsal.render import readable_guard, summary_lines

    guard = "tensor 'dict.__getitem__(___stack0, list(dict.keys(___stack0))[0])' size mismatch at index 1. expected 79, actual 98"
    assert readable_guard(guard) == "an input tensor dim 1 changed 79 -> 98"
    assert readable_guard("tensor 'kwargs['input_ids']' size mismatch at index 1. expected 52, actual 69") == (
        "input_ids dim 1 changed 52 -> 69"
    )
    loss = (
        "forward (mvp/loss.py:243): 0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 10, actual 34"
    )
    facts = _facts(
        recompiles=[loss, loss.replace("10, actual 34", "34, actual 57"), "wrapper (lib.py:9): 0/0: not args"],
        limit_hits=[
            "torch._dynamo hit config.recompile_limit (8) function: 'forward' (mvp/loss.py:243) last reason: x"
        ],
    )
    rehearsal.judge(facts)
    lines = summary_lines(facts)
    assert lines[0].startswith("FAILED: recompile limit hit at step 0") and lines[1].startswith("advice:")
    grouped = next(ln for ln in lines if "recompile(s) in" in ln)
    assert (
        "3 recompile(s) in 2 frame(s), most first: 2x forward (mvp/loss.py:243) (last: input_ids dim 1 changed 34 -> 57)"
        in grouped
    )


def test_a_parity_failure_prints_the_tolerance_it_was_judged_by() -> None:
    facts = _facts(grad_rel_err=1.65e-2, tolerance=1.6e-2)
    rehearsal.judge(facts)
    assert facts.status == "failed" and "1.65e-02 > 0.016" in (facts.reason or "")  # not "> 2e-02"


@pytest.mark.parametrize(
    ("status", "flags", "code"),
    [("failed", [], 1), ("passed", [], 0), ("not-run", [], 0), ("not-run", ["--require-complete"], 1)],
)
def test_rehearse_text_ends_with_its_verdict_and_exit_code(
    status: str, flags: list[str], code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long text report repeats its verdict on its last line, so the tail of a run shows it too."""
    from model_compile.cli import main
    from model_compile.hard.models import Environment
    from model_compile.hard.rehearsal import command as rehearse_mod

    facts = _facts().model_copy(update={"status": status, "reason": "gradients differ at step 0"})
    env = Environment(python="3.11", executable="python", label="cpu-only")
    monkeypatch.setattr(rehearse_mod, "standalone", lambda *a, **k: (facts, env, "model-compile rehearse r"))
    assert main(["rehearse", str(RECIPES / "lm_blocks"), *flags]) == code
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"rehearsal: {status}")
    assert out.splitlines()[-1] == f"rehearsal {status} [cpu-only (tiny model)]; exit {code}"
    assert main(["rehearse", str(RECIPES / "lm_blocks"), "--format", "json", *flags]) == code
    assert json.loads(capsys.readouterr().out)["status"] == status  # JSON gets no extra line


def test_the_rehearsal_row_says_when_aot_eager_stood_in_for_the_stages_inductor() -> None:
    from model_compile.hard.rehearsal.command import layer_where

    stood_in = _facts().model_copy(
        update={"backend": "aot_eager", "backend_reason": "the stage's backend is inductor; on CPU the rehearsal uses"}
    )
    assert layer_where(stood_in, "/r/.venv/bin/python") == (
        "cpu-only (tiny model), backend aot_eager (not the stage's inductor), /r/.venv/bin/python"
    )
    own = _facts().model_copy(update={"backend": "aot_eager", "backend_reason": "the stage's own backend"})
    assert layer_where(own, "py") == "cpu-only (tiny model), backend aot_eager, py"
    asked = _facts().model_copy(update={"backend": "inductor", "backend_reason": "asked for with --backend"})
    assert layer_where(asked, "py") == "cpu-only (tiny model), backend inductor, py"
