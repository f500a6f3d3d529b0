"""`generate RECIPE --enable STAGE ... / --disable STAGE ...`: compile on or off in stage YAMLs only."""

from __future__ import annotations

import git
import pytest
from gen_helpers import RECIPE_REL, run_generate, snapshot

from model_compile.errors import InputError
from model_compile.generate.planning.stage_switch import set_compile
from model_compile.parse.documentation import comment_docs, yaml_comments

REASON = "try compile on the second stage; not measured yet"
STAGE2 = f"{RECIPE_REL}/configs/stage2.yaml"


PER_BLOCK = """def fully_shard(module, mesh=None):
    return module


def parallelize_model(model, parallel_mesh=None, backend_kwargs=None):
    for block in model.model.language_model.layers:
        fully_shard(block)
    return fully_shard(model)
"""


def _shard_per_block(root):
    (root / "toykit" / "distributed" / "parallelize.py").write_text(PER_BLOCK)


def _commit(root):
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("step")


@pytest.fixture
def wired(repo):
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    _commit(repo)
    return repo


def test_dry_run_shows_the_diff_and_writes_nothing(wired):
    before = snapshot(wired)
    code, out, err = run_generate(
        str(wired / RECIPE_REL), "--enable", "stage2", "--mode", "max-autotune", "--reason", REASON
    )
    assert code == 0, err
    assert snapshot(wired) == before
    assert f"+++ b/{STAGE2}" in out and "configs/train.yaml" not in out  # exactly the stage asked for
    assert f"+        enabled: true  # model-compile: enabled - {REASON}" in out  # the file's own 4-space indent
    assert "after this edit, compile path kit: 0 error(s)" in err and "MC203" not in err
    hint = next(line for line in err.splitlines() if "not run by generate" in line)
    assert "after --write (it runs the files on disk)" in hint
    assert hint.endswith(f"model-compile rehearse {wired / RECIPE_REL} --config-name stage2")


def test_write_applies_it_and_a_rerun_is_a_no_op(wired):
    args = (str(wired / RECIPE_REL), "--enable", "stage2", "--backend", "aot_eager", "--reason", REASON)
    code, _, err = run_generate(*args, "--write")
    assert code == 0, err
    assert "model-compile: not run by generate: the rehearsal" in err  # written: it runs on what is on disk now
    text = (wired / STAGE2).read_text()
    assert "backend: aot_eager" in text and "optim: {lr: 2.0e-5}  # flow style stays as is" in text
    docs = comment_docs(yaml_comments(text), STAGE2)
    assert [(d.kind, d.reason) for d in docs] == [("enabled", REASON)]
    _commit(wired)
    before = snapshot(wired)
    code, out, err = run_generate(*args, "--write")
    assert code == 0 and out == "" and snapshot(wired) == before
    assert "(already so)" in err


def test_a_comma_separated_stage_list_names_the_same_stages(wired):
    spaced = run_generate(str(wired / RECIPE_REL), "--enable", "stage2", "train", "--reason", REASON)
    commas = run_generate(str(wired / RECIPE_REL), "--enable", "stage2,train", "--reason", REASON)
    assert spaced[0] == commas[0] == 0, commas[2]
    assert commas[1] == spaced[1] and "configs/train.yaml" in commas[1] and f"+++ b/{STAGE2}" in commas[1]


def test_disable_turns_it_off_and_drops_the_note(wired):
    assert run_generate(str(wired / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")[0] == 0
    _commit(wired)
    code, _, err = run_generate(str(wired / RECIPE_REL), "--disable", "stage2", "--write")
    assert code == 0, err
    assert "rehearse" not in err  # nothing compiles more than before
    text = (wired / STAGE2).read_text()
    assert "enabled: false" in text and "model-compile: enabled" not in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--enable", "stage9", "--reason", REASON],
            "no stage stage9 in recipes/toy_vlm/configs (stages: stage2, train)",
        ),
        (["--enable", "stage2,stage9", "--reason", REASON], "no stage stage9 in recipes/toy_vlm/configs"),
        (["--enable", "stage2"], "pass --reason TEXT"),
        (["--enable", "stage2", "--mode", "fastest", "--reason", REASON], "argument --mode: invalid choice"),
        (["--enable", "stage2", "--backend", "tvm", "--reason", REASON], "argument --backend: invalid choice"),
        (["--enable", "stage2", "--disable", "stage2", "--reason", REASON], "given to both --enable and --disable"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(wired, argv, message):
    before = snapshot(wired)
    code, out, err = run_generate(str(wired / RECIPE_REL), *argv, "--write")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert snapshot(wired) == before


def test_a_recipe_that_does_not_compile_yet_names_the_generate_to_run_first(repo):
    before = snapshot(repo)
    code, _, err = run_generate(str(repo / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")
    assert code == 2 and err.count("\n") == 1
    assert "does not compile yet; run `model-compile generate recipes/toy_vlm --path kit --write` first" in err
    assert snapshot(repo) == before


def test_a_block_sharded_stage_gets_the_regional_alternative_and_the_smoke_commands(wired):
    stage = wired / STAGE2
    stage.write_text(stage.read_text() + "parallel:\n  mesh:\n    shard: 4\n    tensor: 2\n")
    _shard_per_block(wired)
    (wired / RECIPE_REL / "tests" / "test_smoke.py").parent.mkdir(exist_ok=True)
    (wired / RECIPE_REL / "tests" / "test_smoke.py").write_text("def test_smoke():\n    pass\n")
    (wired / RECIPE_REL / "tests" / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        '    parser.addoption("--config-name", default="train")\n'
        '    parser.addoption("--world-size", type=int, default=1)\n'
    )
    _commit(wired)
    code, _, err = run_generate(str(wired / RECIPE_REL), "--enable", "stage2", "--reason", REASON)
    assert code == 0, err
    assert "stage2 (parallel.mesh.shard: 4) shards the model block by block with FSDP2" in err
    assert "See it for this stage: `model-compile rehearse recipes/toy_vlm --config-name stage2`" in err
    assert (
        "regional instead: model-compile generate recipes/toy_vlm --path regional --switch --config-name stage2 "
        "--target 'model.model.language_model.layers.*.self_attn' --target 'model.model.language_model.layers.*.mlp' "
        '--reason "..."' in err  # stage2 leaves checkpointing to the schema: not decided, so the blocks' insides
    )
    assert "python -m pytest recipes/toy_vlm/tests/test_smoke.py -q --config-name stage2 --world-size 8" in err


STAGE = """model:
  compile:
    enabled: false   # off by default
    backend: 'inductor'
"""


def test_set_compile_keeps_quotes_and_comments_and_adds_a_missing_key():
    out = set_compile(STAGE, {"enabled": True, "mode": "max-autotune"}, REASON, filename="s.yaml")
    assert out.splitlines() == [
        "model:",
        "  compile:",
        f"    # model-compile: enabled - {REASON}",
        "    enabled: true   # off by default",
        "    backend: 'inductor'",
        "    mode: max-autotune",
    ]
    assert set_compile(out, {"enabled": True, "mode": "max-autotune"}, REASON, filename="s.yaml") == out
    back = set_compile(out, {"enabled": False}, None, filename="s.yaml")
    assert "model-compile: enabled" not in back and "enabled: false   # off by default" in back


def test_set_compile_refuses_a_stage_without_a_compile_block():
    with pytest.raises(InputError, match="no block `model.compile` mapping"):
        set_compile("model:\n  path: x\n", {"enabled": True}, REASON, filename="s.yaml")


def test_kit_on_a_block_sharded_recipe_says_what_that_means(repo):
    stage = repo / f"{RECIPE_REL}/configs/train.yaml"
    stage.write_text(stage.read_text() + "parallel:\n  mesh:\n    shard: 8\n")
    _shard_per_block(repo)
    _commit(repo)
    code, _, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0, err
    assert "info MC407" in err
    assert "train (parallel.mesh.shard: 8) shards the model block by block with FSDP2: the kit path" in err
    # checkpointing is on in train: each block's attention and MLP (one rule, whatever transformers)
    assert (
        "--path regional --switch --config-name train --target 'model.model.language_model.layers.*.self_attn'" in err
    )


def test_no_sharding_note_where_the_wrapper_does_not_shard_per_block(repo):
    stage = repo / f"{RECIPE_REL}/configs/train.yaml"
    stage.write_text(stage.read_text() + "parallel:\n  mesh:\n    shard: 8\n")  # the fixture's wrapper shards nothing
    _commit(repo)
    code, _, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0, err
    assert "block by block" not in err


def _shard_stage2_with_a_smoke_test(wired):
    """stage2 on a 4 x 2 mesh (shard 4), and a smoke test whose conftest.py registers the stage options."""
    stage = wired / STAGE2
    stage.write_text(stage.read_text() + "parallel:\n  mesh:\n    shard: 4\n    tensor: 2\n")
    (wired / RECIPE_REL / "tests" / "test_smoke.py").write_text("def test_smoke():\n    pass\n")
    (wired / RECIPE_REL / "tests" / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        '    parser.addoption("--config-name", default="train")\n'
        '    parser.addoption("--world-size", type=int, default=1)\n'
        '    parser.addoption("--config-override", action="append", default=[])\n'
    )
    _commit(wired)


def test_a_path_switch_names_the_smoke_run_of_each_stage_whose_mesh_shards(wired):
    """The switch to regional is about the sharded stages: their smoke commands (own stage, own world size,
    compile on) come with the default one; a stage whose mesh does not shard gets none (near miss: train)."""
    _shard_stage2_with_a_smoke_test(wired)
    code, _, err = run_generate(str(wired / RECIPE_REL), "--path", "regional", "--switch", "--reason", REASON)
    assert code == 0, err
    sharded = [line for line in err.splitlines() if "in a stage whose mesh shards the model" in line]
    assert len(sharded) == 1 and "--config-name train" not in sharded[0]
    assert (
        "python -m pytest recipes/toy_vlm/tests/test_smoke.py -q --config-name stage2 --world-size 8 "
        "--config-override model.compile.enabled=true  # stage2: 8 rank(s)" in sharded[0]
    )


@pytest.mark.parametrize(
    ("mode", "noted"),
    [("max-autotune", True), ("reduce-overhead", True), ("max-autotune-no-cudagraphs", False), (None, False)],
)
def test_a_mode_that_records_cuda_graphs_says_so(wired, mode, noted):
    argv = ["--enable", "stage2", "--reason", REASON] + (["--mode", mode] if mode else [])
    code, _, err = run_generate(str(wired / RECIPE_REL), *argv)
    assert code == 0, err
    assert (f"stage2: mode {mode} turns on CUDA graphs" in err) is noted
    assert ("max-autotune-no-cudagraphs tunes kernels without them" in err) is noted


def test_the_readme_commands_run_the_stage_that_enables_compile(wired):
    """A recipe whose only compiling stage is stage2: the README's run and smoke commands are stage2's (its
    config file, --config-name, its mesh's world size), not the first stage's; near miss: none enabled."""
    _shard_stage2_with_a_smoke_test(wired)
    code, out, err = run_generate(str(wired / RECIPE_REL), "--path", "regional", "--switch", "--reason", REASON)
    assert code == 0, err
    assert "model-compile generate recipes/toy_vlm --enable train --reason" in out  # none enabled: the first stage
    assert run_generate(str(wired / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")[0] == 0
    _commit(wired)
    code, out, err = run_generate(str(wired / RECIPE_REL), "--path", "regional", "--switch", "--reason", REASON)
    assert code == 0, err
    assert "model-compile generate recipes/toy_vlm --enable stage2 --reason" in out
    assert (  # within the repository's line length: a `\` continuation, an option and its value together
        "+python -m pytest recipes/toy_vlm/tests/test_smoke.py -q --config-name stage2 \\\n"
        "+  --world-size 8 --config-override model.compile.enabled=true" in out
    )
