"""Rehearsing any recipe as it is, the pure parts: shrinking a recipe's own configs, names a model is loaded by,
the repository's pins, the user's config overrides, the memory a run needs, and how a rank the machine ended
is told. No torch, no child process."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from model_compile.errors import InputError
from model_compile.hard.env import lock
from model_compile.hard.env.proc import RankResult
from model_compile.hard.models import RehearsalFacts
from model_compile.hard.rehearsal import command
from model_compile.hard.rehearsal.planning import overrides
from model_compile.hard.rehearsal.planning.overrides import read_keys
from model_compile.hard.rehearsal.reading import attribution
from model_compile.hard.rehearsal.seen import batches, drift, faults
from model_compile.runtime.rehearsal.measure import memory
from model_compile.runtime.rehearsal.models import names, shrink

FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal_repo"


# -- shrinking -------------------------------------------------------------------------------------------------


def test_shrinking_a_config_twice_changes_nothing_the_second_time() -> None:
    real = {"model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936}  # fmt: skip
    once, changed = shrink.shrink(real)
    twice, again = shrink.shrink(once)
    assert changed and again == [] and once == twice
    assert once["num_hidden_layers"] == 36 and once["num_attention_heads"] % once["num_key_value_heads"] == 0


def test_a_second_try_keeps_each_head_at_its_real_size_with_fewer_heads() -> None:
    """For a model whose code checks its head size (a rotary split): fewer heads, each of its real size."""
    real = {"hidden_size": 512, "intermediate_size": 2048, "num_attention_heads": 8, "num_hidden_layers": 3}
    tiny, _ = shrink.shrink(real)
    assert tiny["hidden_size"] // tiny["num_attention_heads"] == 16
    kept, changed = shrink.shrink(real, keep_head=True)
    assert kept["num_attention_heads"] == 4 and kept["hidden_size"] == 4 * 64 and kept["intermediate_size"] == 512
    assert kept["num_hidden_layers"] == 3 and "hidden_size 512 -> 256" in changed
    vl = {
        "hidden_size": 64,
        "head_dim": 16,
        "num_attention_heads": 4,
        "vision_config": {"embed_dim": 1280, "num_heads": 16},
    }
    assert shrink.shrink(vl, keep_head=True)[0]["vision_config"] == {"embed_dim": 320, "num_heads": 4}


def test_a_config_the_recipe_built_keeps_its_vocabulary_and_token_ids() -> None:
    """Its own tokenizer or data make the ids: only the rehearsal's own tokenizer shrinks the vocabulary."""
    real = {"hidden_size": 768, "num_attention_heads": 12, "vocab_size": 1000, "eos_token_id": 999}
    kept, changed = shrink.shrink(real, vocab_too=False)
    assert kept["vocab_size"] == 1000 and kept["eos_token_id"] == 999 and kept["hidden_size"] == 64
    assert not any("vocab" in c for c in changed)


def test_a_recipes_own_fields_shrink_only_when_wide_and_heads_follow_the_width() -> None:
    assert shrink.shrink_fields({"d_model": 128, "n_heads": 4, "n_layers": 4}) == {}  # tiny already
    new = shrink.shrink_fields({"d_model": 768, "n_heads": 12, "n_kv_heads": 4, "n_layers": 12, "vocab_size": 32000})
    assert new == {"d_model": 64, "n_heads": 4, "n_kv_heads": 2}  # depth and vocabulary untouched
    assert shrink.shrink_fields({"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 16}) == {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,  # as many as the heads before: as many after
    }


def test_widths_that_are_not_positive_are_found_in_nested_configs() -> None:
    assert shrink.bad_widths({"text_config": {"hidden_size": -64}, "num_hidden_layers": 0}) == [
        "text_config.hidden_size -64"
    ]


# -- names a model is loaded by ----------------------------------------------------------------------------------


def test_a_name_matches_under_any_of_its_spellings(tmp_path: Path) -> None:
    mapping = {"./pretrained/enc/": "A", "Qwen/Qwen3-8B": "B", str(tmp_path / "abs"): "C"}
    assert names.lookup(mapping, "pretrained/enc", str(tmp_path)) == "A"
    assert names.lookup(mapping, str(tmp_path / "pretrained" / "enc"), str(tmp_path)) == "A"
    assert names.lookup(mapping, "Qwen/Qwen3-8B", str(tmp_path)) == "B"
    assert names.lookup(mapping, str(tmp_path / "abs") + "/", str(tmp_path)) == "C"
    assert names.lookup(mapping, "Qwen/Qwen3-8B-Base", str(tmp_path)) is None  # near miss
    assert names.slug("/mnt/x/onevision encoder/") == "mnt-x-onevision-encoder"


# -- the user's options ------------------------------------------------------------------------------------------


def test_model_config_options_take_a_bare_path_and_named_ones(tmp_path: Path) -> None:
    bare = tmp_path / "config.json"
    bare.write_text("{}")
    main, named = overrides.model_config_options([str(bare), "/cluster/enc=enc.json", "acme/x=b.json"])
    assert main == bare and named == {"/cluster/enc": Path("enc.json"), "acme/x": Path("b.json")}
    with pytest.raises(InputError, match="a second bare PATH"):
        overrides.model_config_options([str(bare), str(bare)])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("not json", "not a readable JSON file"),
        ("[1, 2]", "not a config"),
        (json.dumps({"model_type": "vit", "hidden_size": -8}), "hidden_size -8"),
    ],
)
def test_a_supplied_config_that_is_missing_or_wrong_is_bad_input(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message):
        command.check(command.Options(model_configs={"/cluster/enc": path}))


SCHEMA = """
from pydantic import BaseModel, ConfigDict, Field
from elsewhere import DataConfig

class Compile(BaseModel):
    enabled: bool = False

class Model(BaseModel):
    hidden_size: int = 768
    compile: Compile = Field(default_factory=Compile)
    extra: dict = {}

class Root(BaseModel):
    model: Model = Field(default_factory=Model)
    data: DataConfig = Field(default_factory=DataConfig)
"""


def test_an_override_must_name_a_key_of_the_stage_or_its_schema(tmp_path: Path) -> None:
    schema = tmp_path / "schema.py"
    schema.write_text(SCHEMA)
    stage = {"model": {"compile": {"enabled": False}}, "data": {"batch_size": 8}}
    overrides.check(
        ["data.batch_size=2", "model.hidden_size=128", "model.compile.enabled=true"], stage, "train", schema, "Root"
    )
    overrides.check(["data.anything=1", "model.extra.x=1"], stage, "train", schema, "Root")  # types it cannot read
    with pytest.raises(InputError, match=r"configs/train.yaml has no key model.hiden_size nor the schema \(Root\)"):
        overrides.check(["model.hiden_size=128"], stage, "train", schema, "Root")
    with pytest.raises(InputError, match="has no key optim.lr"):
        overrides.check(["optim.lr=1"], stage, "train", None, None)  # no schema: the stage is the config


@pytest.mark.parametrize("item", ["model.hidden_size", "=3", "a..b=1", "model.hidden_size=-64", "model.n_heads=0"])
def test_a_malformed_override_or_a_negative_width_is_bad_input(item: str) -> None:
    with pytest.raises(InputError):
        overrides.parse([item])


def test_overrides_are_applied_as_a_dotlist_reads_them() -> None:
    stage = {"data": {"batch_size": 8, "paths": ["a"]}}
    out = overrides.apply(stage, ["data.batch_size=2", "data.paths=[b, c]", "model.name=x", "data.flag=true"])
    assert out == {"data": {"batch_size": 2, "paths": ["b", "c"], "flag": True}, "model": {"name": "x"}}
    assert stage["data"]["batch_size"] == 8  # the stage itself is not touched


def test_the_rerun_command_repeats_every_option_that_shaped_the_run() -> None:
    options = command.Options(
        steps=3,
        model_configs={"/cluster/enc": Path("enc.json")},
        config_overrides=["data.batch_size=2", "model.size=large"],
    )
    assert command.extra_flags(options) == [
        "--steps", "3", "--model-config", "/cluster/enc=enc.json",
        "--config-override", "data.batch_size=2", "--config-override", "model.size=large",
    ]  # fmt: skip


def test_compile_is_turned_on_by_the_switch_the_recipes_code_reads() -> None:
    class Event:
        condition = ["bool(OmegaConf.select(self.config, 'optim.compile', default=False))"]
        arguments = {"backend": "OmegaConf.select(self.config, 'optim.compile_backend', default='inductor')"}

    paths = {"optim": {}, "optim.compile": False, "optim.compile_backend": "inductor"}
    assert read_keys(Event(), paths) == {"enabled": "optim.compile", "backend": "optim.compile_backend"}
    assert read_keys(Event(), {}) == {}  # keys the stage does not hold: the form's default keys stay


# -- the repository's pins ---------------------------------------------------------------------------------------


def test_pins_come_from_the_lock_then_requirements_then_pyproject(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(
        'version = 1\n[[package]]\nname = "transformers"\nversion = "5.3.0"\n'
        '[[package]]\nname = "me"\nversion = "0.1.0"\nsource = { editable = "." }\n'
        '[[package]]\nname = "torch"\nversion = "2.8.0"\n[[package]]\nname = "torch"\nversion = "2.8.0+cpu"\n'
    )
    (tmp_path / "requirements-dev.txt").write_text("pytest==8.0.0  # tests\nnumpy>=1.0\nPyYAML==6.0.3\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "me"\ndependencies = ["transformers==4.0.0", "rich==14.0.0"]\n'
    )
    pins = lock.pins(tmp_path)
    assert pins["transformers"] == ("5.3.0", "uv.lock") and pins["pyyaml"] == ("6.0.3", "requirements-dev.txt")
    assert pins["rich"] == ("14.0.0", "pyproject.toml") and "me" not in pins and "numpy" not in pins
    found = lock.drift(
        tmp_path, {"transformers": "5.25.0", "torch": "2.8.0+cu128", "PyYAML": "6.0.3", "rich": "15.0.0"}
    )
    assert [lock.line(f) for f in lock.ordered(found)] == [
        "transformers 5.25.0 here, uv.lock pins 5.3.0",
        "rich 15.0.0 here, pyproject.toml pins 14.0.0",
    ]


def test_the_drift_a_failure_runs_through_is_said_as_not_ruled_out(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text('[[package]]\nname = "transformers"\nversion = "5.3.0"\n'
                                      '[[package]]\nname = "torch"\nversion = "2.8.0"\n')  # fmt: skip
    facts = RehearsalFacts(label="cpu-only", status="not-run", reason="the eager twin failed: ValueError: x is missing")
    eager = {
        "packages": {"torch": "2.13.0", "transformers": "5.25.0"},
        "status": "not-run",
        "fault": "recipe",
        "reason": "the recipe's training raised with compile off: ValueError: x is missing",
        "raised_in": {
            "exception": "ValueError",
            "innermost": {
                "where": "<site-packages>/transformers/x.py:9 in forward",
                "kind": "library",
                "package": "transformers",
            },
            "repo": "recipes/r/model.py:3 in forward",
            "library": {"package": "transformers", "name": "transformers", "version": "5.25.0"},
        },
    }
    recs = {"eager": [eager]}
    drift.read(facts, recs, tmp_path)
    assert facts.environment_drift == [
        "torch 2.13.0 here, uv.lock pins 2.8.0",
        "transformers 5.25.0 here, uv.lock pins 5.3.0",
    ]
    attribution.attribute(facts, recs, tmp_path)
    (att,) = facts.attribution
    assert att.owner == "recipe" and facts.fault == "recipe" and facts.status == "not-run"
    assert "transformers 5.25.0 here, uv.lock pins 5.3.0 (the failing frame is in transformers)" in att.not_ruled_out
    assert facts.reason.endswith("[whose: the recipe's]")


# -- memory ------------------------------------------------------------------------------------------------------


def test_the_memory_a_run_needs_before_it_steps() -> None:
    small = memory.expected_mb(rss_now_mb=400, parameters=500_000, trainable=500_000, world=2)
    assert small["more_mb"] == round((500_000 * 12 / memory.MB + memory.ACTIVATION_FLOOR_MB) * 2, 1)
    assert memory.fits(small["more_mb"], 20_000) and memory.fits(1e9, None)  # unknown free memory: not refused
    big = memory.expected_mb(rss_now_mb=1500, parameters=86_600_000, trainable=86_600_000, world=2)
    assert big["activations_mb"] > memory.ACTIVATION_FLOOR_MB and not memory.fits(big["more_mb"], 2_000)


def test_the_machine_says_its_free_memory_and_a_process_its_resident_memory() -> None:
    import os

    free = memory.machine()
    assert free["available_mb"] is None or free["available_mb"] > 0
    rss = memory.rss_mb(os.getpid())
    assert rss is None or rss > 1


def test_the_memory_watch_ends_the_ranks_when_free_memory_runs_low(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from model_compile.hard.env import memwatch

    free = iter([8000, 8000, 120])  # at the start, then as the ranks run
    monkeypatch.setattr(memwatch.memory, "machine", lambda: {"available_mb": next(free), "source": "test"})
    watch = memwatch.MemoryWatch()
    assert watch.floor_mb == 400  # 5% of what was free, between 256 MB and the reserve
    assert watch({0: os.getpid()}) is None
    watch._next = 0.0
    reason = watch({0: os.getpid()}) or ""
    assert reason.startswith("memory: this machine's free memory fell to 120 MB (below 400 MB; 8000 MB was free")
    assert "rank 0" in reason and watch.rss(0)[0] is not None


# -- a rank the machine ended ------------------------------------------------------------------------------------


def _facts() -> RehearsalFacts:
    return RehearsalFacts(label="cpu-only (tiny model)", status="passed")


def test_a_rank_the_oom_killer_ended_is_an_environment_fault_with_its_memory() -> None:
    facts = _facts()
    ranks = [
        RankResult(0, None, "/l0", killed="rank 1 exited -9"),
        RankResult(1, -signal.SIGKILL, "/l1", last_rss_mb=10240.0, peak_rss_mb=10300.0),
    ]
    peer = {"status": "not-run", "reason": "the recipe's training raised: Connection closed by peer", "fault": "recipe"}
    assert faults.machine_fault(facts, "reference", [peer, {"status": "running"}], ranks, False)
    assert facts.status == "not-run" and facts.fault == "environment"
    assert "rank 1 of the reference run was killed by SIGKILL" in (facts.reason or "")
    assert "10240 MB" in (facts.reason or "") and "not the recipe's" in (facts.reason or "")
    assert "Connection closed" not in (facts.reason or "")


def test_ranks_the_memory_watch_ended_and_a_segfault_are_told_apart() -> None:
    facts = _facts()
    watched = [RankResult(0, None, "/l0", killed="memory: free memory fell to 200 MB")]
    assert faults.machine_fault(facts, "eager", [{}], watched, False)
    assert facts.status == "not-run" and "ended for lack of memory" in (facts.reason or "")
    segfault = [RankResult(0, -signal.SIGSEGV, "/l0")]
    assert not faults.machine_fault(_facts(), "compiled", [{}], segfault, False)  # judged as the twin's failure
    assert faults.note(segfault[0]) == " (SIGSEGV; its resident memory was not sampled)"
    quick = RankResult(0, -signal.SIGKILL, "/l0", exit_peak_rss_mb=812.4)  # reaped before the watch's first sample
    assert faults.note(quick) == (
        " (SIGKILL; its peak resident memory was 812 MB (the kernel's count for its own process; it ended before "
        "the memory watch's first sample))"
    )


def test_a_child_that_stopped_on_what_this_machine_lacks_says_so_in_one_line() -> None:
    facts = _facts()
    missing = {
        "status": "not-run",
        "fault": "environment",
        "stopped_at": "train",
        "reason": "AutoModel.from_pretrained('/cluster/enc'): no config.json of it on this machine (...); "
        "supply one with --model-config /cluster/enc=PATH",
        "phases": {"train": {"ok": False, "detail": "Traceback ..."}},
    }
    assert faults.machine_fault(facts, "reference", [missing], [RankResult(0, 1, "/l0")], False)
    assert facts.reason == missing["reason"] and facts.fault == "environment"


# -- the batches seen --------------------------------------------------------------------------------------------


def test_the_reasons_a_data_path_gives_for_dropping_rows_are_folded_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "compiled-rank0.log"
    log.write_text(
        "[12:00:01] WARNING Data guard skip: reason=too_long sample=12\n"
        "[12:00:02] WARNING Data guard skip: reason=too_long sample=40\n"
        "dropping sample with missing image media: 3\n"
        "step 1 loss 2.0\n"
    )
    assert batches.reasons(log) == [
        "WARNING Data guard skip: reason=too_long sample=N (2x)",
        "dropping sample with missing image media: N (1x)",
    ]


def test_batches_seen_say_their_keys_their_packing_and_any_from_the_tool(tmp_path: Path) -> None:
    seen = {
        "batches": {"recipe": 4},
        "keys": {"input_ids": "int64", "pack_segment_ids": "int64"},
        "described": [
            {"source": "recipe", "keys": {"input_ids": "int64 [1, 512]", "pack_segment_ids": "int64 [1, 512]"}}
        ],
        "samples": 11,
        "rows": 4,
        "most_in_a_row": 4,
        "counted_by": "pack_segment_ids",
    }
    facts = _facts()
    facts.batches_mode = "rows"
    recs = {
        "compiled": [{"feed": {"mode": "rows", "seen": seen}, "rows": {"read": 40}}],
        "eager": [{"feed": {"seen": {"batches": {"tool": 2}}}}],
    }
    batches.read(facts, recs, tmp_path)
    assert facts.packing == "packed: up to 4 samples in a row, 11 in 4 rows (pack_segment_ids)"
    assert facts.rows_dropped and facts.rows_dropped.startswith("40 synthetic rows read on rank 0, 11 samples reached")
    assert any("2 of the 6 batches the twins trained on came from the tool" in n for n in facts.notes)
    assert batches.keys_line(facts) == (
        "handed to the model (rank 0, first batch): input_ids int64 [1, 512], pack_segment_ids int64 [1, 512]; "
        "batches: 4 from the recipe and 2 from the tool (synthetic)"
    )


# -- the child's pure parts: a recipe's config objects, remote code ----------------------------------------------


def test_a_recipes_own_config_object_is_shrunk_in_place_whatever_its_kind() -> None:
    from dataclasses import dataclass
    from types import SimpleNamespace

    from pydantic import BaseModel

    from model_compile.runtime.rehearsal.models import intercept

    @dataclass(frozen=True)
    class TransformerConfig:
        d_model: int = 768
        n_heads: int = 12
        n_layers: int = 12
        vocab_size: int = 32000

    class Section(BaseModel):
        hidden_size: int = 1024
        num_attention_heads: int = 16

    frozen, section, space = TransformerConfig(), Section(), SimpleNamespace(dim=2048, n_heads=32, depth=24)
    assert intercept.shrink_object(frozen) == [
        "TransformerConfig.d_model 768 -> 64",
        "TransformerConfig.n_heads 12 -> 4",
    ]
    assert (frozen.d_model, frozen.n_heads, frozen.n_layers, frozen.vocab_size) == (64, 4, 12, 32000)
    assert intercept.shrink_object(section) and (section.hidden_size, section.num_attention_heads) == (64, 4)
    assert intercept.shrink_object(space) and (space.dim, space.n_heads, space.depth) == (64, 4, 24)
    assert intercept.shrink_object(frozen) == [] and intercept.shrink_object(768) == []  # once; not a config


def test_a_supplied_config_whose_remote_code_is_not_here_says_so(tmp_path: Path) -> None:
    from model_compile.runtime.rehearsal.models import stand_in
    from model_compile.runtime.rehearsal.models.state import ModelConfigMissing

    config = {"model_type": "onevision", "auto_map": {"AutoModel": "modeling_ov.OVModel"}}
    with pytest.raises(ModelConfigMissing, match=r"remote code \(modeling_ov.py, model_type 'onevision'\)"):
        stand_in._code_files(config, None, "/cluster/ov")
    (tmp_path / "modeling_ov.py").write_text("x = 1\n")
    assert stand_in._code_files(config, str(tmp_path), "/cluster/ov") == [tmp_path / "modeling_ov.py"]
    with pytest.raises(ModelConfigMissing, match="another repository"):
        stand_in._code_files({"auto_map": {"AutoModel": "acme/ov--modeling_ov.OVModel"}}, None, "x")


def _models_phase(loads: list[dict[str, str]]) -> dict[str, list[dict[str, object]]]:
    built = {"class": "Qwen3ForCausalLM", "role": "prepare_model() returned it", "parameters": 435_840,
             "stacks": {"model.layers": "10 Qwen3DecoderLayer"}, "shrunk": [], "source": "x"}  # fmt: skip
    return {"compiled": [{"phases": {"models": {"ok": True, "built": [built], "loads": loads}}}]}


@pytest.mark.parametrize(
    ("loads", "own"),
    [
        ([{"kind": "model", "to": "/out/tiny-checkpoint"}], False),
        ([{"kind": "config", "to": "/out/tiny-checkpoint"}], False),  # the config read, the weights random
        ([{"kind": "tokenizer", "to": "/out/tiny-checkpoint"}], True),  # only its tokenizer: the model is its own
        ([], True),
    ],
)
def test_the_model_line_says_whether_the_recipe_built_the_planned_architecture(loads: list, own: bool) -> None:
    from types import SimpleNamespace

    from model_compile.hard.rehearsal.seen import models

    plan = SimpleNamespace(
        spec={"checkpoint": {"dir": "/out/tiny-checkpoint"}},
        model=SimpleNamespace(
            model_type="qwen3", source="qwen3 from a checkpoint's config.json", shrunk=["hidden_size 4096 -> 64"]
        ),
    )
    facts = RehearsalFacts(label="cpu-only", model_source="qwen3 from a checkpoint's config.json", depth_known=False)
    models.read(facts, plan, _models_phase(loads))  # type: ignore[arg-type]
    assert facts.depth == {"model.layers": "10 Qwen3DecoderLayer"}  # measured, either way
    assert (facts.model_source or "").startswith("built by the recipe itself") is own
    assert facts.depth_known is (True if own else False)


def test_what_a_recipe_raises_for_a_missing_package_or_a_configured_path_is_the_machines(tmp_path: Path) -> None:
    from model_compile.runtime.rehearsal.record import not_on_machine, short_error

    (tmp_path / "recipes").mkdir()
    stage = tmp_path / "stage.yaml"
    stage.write_text("model:\n  init_from: ./outputs/stage1/hf_model\n  name: qwen\n")
    spec = {"config_file": str(stage), "repo_root": str(tmp_path)}
    missing = FileNotFoundError(2, "No such file or directory", "./outputs/stage1/hf_model/model.safetensors")
    said = not_on_machine(missing, spec)
    assert said and "(model.init_from: ./outputs/stage1/hf_model)" in said
    assert "--config-override model.init_from=..." in said
    assert not_on_machine(FileNotFoundError(2, "No such file", "/elsewhere/x.bin"), spec) is None  # not configured
    worded = FileNotFoundError("No such file or directory: ./outputs/stage1/hf_model/model.safetensors")
    assert "(model.init_from: ./outputs/stage1/hf_model)" in (not_on_machine(worded, spec) or "")  # no filename
    assert not_on_machine(ModuleNotFoundError("No module named 'timm'", name="timm"), spec)
    assert not_on_machine(ModuleNotFoundError("No module named 'recipes.x'", name="recipes.x"), spec) is None
    needs = ImportError("\nAutoImageProcessor requires the PIL library: `pip install pillow`.")
    assert not_on_machine(needs, spec) and short_error(needs).startswith("ImportError: AutoImageProcessor requires")
    assert not_on_machine(ValueError("bad shape"), spec) is None
