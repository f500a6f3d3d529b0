"""generate writes the scopes that compile: per-block submodule targets (`X.*.name`, several at once), checked
against the model's own module tree (read from the stand-in transformers of fixtures/site_packages) for gradient
checkpointing and FSDP2 units; its README names the model's own modules; and what it writes reads back."""

from __future__ import annotations

import ast
import shutil

import git
from gen_helpers import ENGINE_REL, RECIPE_REL, SITE_PACKAGES, make_repo, run_generate, snapshot

from model_compile.analyze import analyze_path

REASON = "attention and MLP of each block compile inside the gradient checkpoint"
ATTN = "model.model.language_model.layers.*.self_attn"
MLP = "model.model.language_model.layers.*.mlp"


def per_block_loop(engine: str) -> list[str]:
    """The compile calls of the one `for block in ...` loop of prepare_model(), as `container: block.<m>.compile`."""
    tree = ast.parse(engine)
    loops = [n for n in ast.walk(tree) if isinstance(n, ast.For) and ast.unparse(n.target) == "block"]
    assert len(loops) == 1
    calls = [ast.unparse(c.func) for c in ast.walk(loops[0]) if isinstance(c, ast.Call)]
    return [f"{ast.unparse(loops[0].iter)}: {c}" for c in calls]


LOOP = [
    "model.model.language_model.layers: block.self_attn.compile",
    "model.model.language_model.layers: block.mlp.compile",
]


def _checkpoint_in_forward(root):
    """The repository's transformers runs a layer's checkpoint inside its forward (as 5.23 and later do)."""
    layers = root / SITE_PACKAGES / "transformers"
    shutil.copy(layers / "modeling_layers_forward.py.txt", layers / "modeling_layers.py")


def _added(diff: str) -> str:
    """The lines a diff adds."""
    return "\n".join(line for line in diff.splitlines() if line.startswith("+"))


def _commit(root):
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("step")


def test_per_block_submodule_targets_are_one_loop_that_reads_back_as_those_targets(repo):
    code, _, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--target", ATTN, "--target", MLP, "--reason", REASON, "--write"
    )
    assert code == 0, err
    engine = (repo / ENGINE_REL).read_text()
    assert per_block_loop(engine) == LOOP
    # after checkpointing, before the distributed wrap, gated by the recipe's own switch
    assert (
        engine.index("apply_gradient_checkpointing") < engine.index("for block in") < engine.index("parallelize_model(")
    )
    assert (
        "        if self.config.model.compile.enabled:\n            # model-compile: regional - attention and MLP"
        in engine
    )
    recipe = analyze_path(repo / RECIPE_REL).recipes[0]  # what review, inspect and the rehearsal read
    assert recipe.compile_path == "fallback:regional" and not recipe.errors
    assert recipe.compiled_target == [ATTN, MLP]
    assert recipe.scope.patterns == ["model.language_model.layers.*.self_attn", "model.language_model.layers.*.mlp"]
    asserts = (repo / RECIPE_REL / "tests/skills/model-compile/asserts.py").read_text()
    assert "model.language_model.layers.*.self_attn" in asserts and "model.language_model.layers.*.mlp" in asserts
    readme = " ".join((repo / RECIPE_REL / "README.md").read_text().split())  # wrapped at the repo's width
    assert f"- Targets: `{ATTN}`, `{MLP}`" in readme
    _commit(repo)
    again = snapshot(repo)
    code, _, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--target", MLP, "--target", ATTN, "--reason", REASON, "--write"
    )
    assert code == 0 and "already wired" in err and snapshot(repo) == again  # idempotent, in any order


def test_readme_names_the_models_own_modules_outside_the_blocks(repo):
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--write")
    assert code == 0, err
    readme = " ".join((repo / RECIPE_REL / "README.md").read_text().split())  # unwrapped
    for module in ("model.model.visual", "model.model.language_model.embed_tokens", "model.model.language_model.norm"):
        assert f"`{module}`" in readme
    assert "`model.lm_head`" in readme and "the loss included where the model computes it" in readme
    assert "Qwen2VLForConditionalGeneration in transformers 5.99.0 in the repository's environment" in readme
    assert "merger/projector" not in readme and "Hugging Face model:" not in readme  # nothing guessed


def test_inferred_blocks_under_a_checkpoint_inside_forward_compile_their_attention_and_mlp(repo):
    _checkpoint_in_forward(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--write")
    assert code == 0, err
    assert "Qwen2VLDecoderLayer is a GradientCheckpointingLayer and transformers 5.99.0" in err
    assert "runs the checkpoint inside its forward" in err and "compiles nothing (dynamo traces" in err
    assert "`self.config.model.gradient_checkpointing.enabled`: on in stage2, train" in err  # stage2: the default
    assert f"target: {ATTN}, {MLP} (picked: the form that compiles" in err
    assert per_block_loop((repo / ENGINE_REL).read_text()) == LOOP


def test_given_checkpointed_blocks_are_written_as_asked_with_the_form_that_compiles_offered(repo):
    _checkpoint_in_forward(repo)
    code, out, err = run_generate(
        str(repo / RECIPE_REL),
        "--path",
        "regional",
        "--target",
        "model.model.language_model.layers",
        "--reason",
        REASON,
    )
    assert code == 0, err
    assert "compiles nothing (dynamo traces" in err
    offered = next(line for line in err.splitlines() if "the form that compiles:" in line)
    assert offered.endswith(f"--target '{ATTN}' --target '{MLP}'")  # quoted: `*` stays out of the shell's hands
    assert "for block in model.model.language_model.layers:\n+                block.compile(" in out


def test_a_checkpoint_around_the_call_gets_the_same_form_one_rule_whatever_transformers(repo):
    """transformers 5.3.0 checkpoints around the layer's call (the fixture's): a whole block would compile there but
    not from 5.23 on; the rule is one, each block's attention and MLP, stated with where it was measured."""
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON)
    assert code == 0, err
    assert "checkpoints around its call, so compiling `model.model.language_model.layers` compiles on this" in err
    assert "but nothing from transformers 5.23 on" in err
    assert "measured with transformers 5.3.0 and 5.25" in err
    assert f"target: {ATTN}, {MLP} (picked: the form that compiles" in err
    assert "block.self_attn.compile(" in out and "block.mlp.compile(" in out


def test_blocks_not_checkpointed_in_the_stages_acted_on_are_compiled_whole(repo):
    stage2 = repo / RECIPE_REL / "configs/stage2.yaml"
    stage2.write_text(
        stage2.read_text().replace(
            "    freeze_vit: false\n", "    freeze_vit: false\n    gradient_checkpointing: {enabled: false}\n"
        )
    )
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--config-name", "stage2"
    )
    assert code == 0, err
    assert "gradient checkpointing" not in err and "picked" not in err and "block.compile(" in out


def test_no_checkpointing_no_checkpoint_note(tmp_path):
    root = make_repo(tmp_path, "none_return", use_git=False)  # prepare_model() without checkpointing
    _checkpoint_in_forward(root)
    code, out, err = run_generate(str(root / RECIPE_REL), "--path", "regional", "--reason", REASON)
    assert code == 0, err
    assert "gradient checkpointing" not in err and "block.compile(" in out


def test_a_module_holding_fsdp2_units_is_said_with_the_per_unit_command(tmp_path):
    repo = make_repo(tmp_path, "none_return")  # no checkpointing: the units compile, one frame each
    stage2 = repo / RECIPE_REL / "configs" / "stage2.yaml"
    stage2.write_text(stage2.read_text() + "parallel:\n  mesh:\n    shard: 8\n")
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "submodule", "--target", "model.model.language_model", "--reason", REASON
    )
    assert code == 0, err
    note = next(line for line in err.splitlines() if "shards per block with FSDP2" in line)
    assert (
        "fully_shard on each Qwen2VLDecoderLayer, from `_no_split_modules` of Qwen2VLForConditionalGeneration" in note
    )
    assert note.endswith(f"--path regional --reason '{REASON}' --target model.model.language_model.layers")


def test_checkpointed_fsdp2_units_inside_a_compiled_module_compile_nothing(repo):
    """Measured on 2 CPU ranks: the language model compiled whole, its layers checkpointed and sharded per layer,
    compiled none of them, with the checkpoint around the call (5.3.0) as inside forward (5.25)."""
    stage2 = repo / RECIPE_REL / "configs" / "stage2.yaml"
    stage2.write_text(stage2.read_text() + "parallel:\n  mesh:\n    shard: 8\n")
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "submodule", "--reason", REASON)
    assert code == 0, err
    assert "checkpoints around its call, and stage stage2 wraps each of them with FSDP2" in err
    assert f"target: {ATTN}, {MLP} (picked: the form that compiles" in err


def test_targets_the_model_does_not_have_are_refused_with_what_it_has(repo):
    before = snapshot(repo)
    code, _, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--target", "model.model.language_model.layers.*.attn",
        "--reason", REASON, "--write",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1
    assert "has no module `model.language_model.layers.*.attn`" in err
    assert "`model.model.language_model.layers.*` has: self_attn, mlp, input_layernorm, post_attention_layernorm" in err
    assert snapshot(repo) == before


def test_star_targets_are_for_regional_and_submodule_only(repo):
    for args, words in (
        (["--path", "graph-break", "--target", "model.model.visual.*"], "takes one module, not `*`"),
        (["--path", "regional", "--target", "model.*.layers.*"], "dotted attribute path"),
        (["--path", "regional", "--target", "*.layers"], "dotted attribute path"),
        (["--path", "regional", "--target", ATTN, "--target", ATTN], "the same target is given twice"),
    ):
        code, _, err = run_generate(str(repo / RECIPE_REL), *args, "--reason", REASON)
        assert code == 2 and words in err, (args, err)


def test_the_launch_command_names_this_recipes_config_never_another_recipes(repo):
    (repo / "README.md").write_text(
        "# Toy\n\n```bash\ntorchrun --nproc_per_node=1 -m toykit.launch --config ./recipes/other/configs/train.yaml\n```\n"
    )
    (repo / RECIPE_REL / "README.md").unlink()  # no README of its own: another recipe's command is no template
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON)
    assert code == 0, err
    assert "recipes/other" not in _added(out) + err
    # a README copied from another recipe: its command, pointed at this recipe's own stage file
    (repo / RECIPE_REL / "README.md").write_text(
        "# Toy VLM\n\n```bash\ntorchrun --nproc_per_node=1 -m toykit.launch "
        "--config ./recipes/other/configs/train.yaml\n```\n"
    )
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON)
    assert code == 0, err
    assert "recipes/other" not in _added(out) + err
    assert "--config ./recipes/toy_vlm/configs/train.yaml model.compile.enabled=true" in err


def test_the_smoke_note_without_config_override_never_asks_for_a_stage_file_edit(repo):
    (repo / RECIPE_REL / "tests").mkdir()
    (repo / RECIPE_REL / "tests" / "conftest.py").write_text("def pytest_addoption(parser):\n    pass\n")
    (repo / RECIPE_REL / "tests" / "test_smoke.py").write_text("def test_smoke():\n    pass\n")
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON)
    assert code == 0, err
    note = next(line for line in err.splitlines() if "registers no --config-override" in line)
    assert "never by setting `enabled: true` in a stage file to test" in note
    assert "model-compile rehearse recipes/toy_vlm" in note and "to `true` in" not in note
    smoke = next(line for line in err.splitlines() if "tests/test_smoke.py" in line and "recipe smoke test" in line)
    assert "with compile on" not in smoke and "it compiles only where its stage file does" in smoke


def test_a_stage_that_leaves_checkpointing_out_has_the_schemas_default(repo):
    """stage2 sets no gradient_checkpointing: the schema's default decides it there, not 'not decided'."""
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--config-name", "stage2"
    )
    assert code == 0, err
    assert "`self.config.model.gradient_checkpointing.enabled`: on in stage2" in err and "not decided" not in err
    assert f"target: {ATTN}, {MLP} (picked: the form that compiles" in err

    schema = repo / RECIPE_REL / "configs" / "schema.py"
    schema.write_text(schema.read_text().replace("    enabled: bool = True\n", "    enabled: bool = False\n"))
    _commit(repo)
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--config-name", "stage2"
    )
    assert code == 0, err
    assert "gradient checkpointing" not in err and "picked" not in err and "block.compile(" in out


def test_targets_that_run_none_of_the_repositorys_code_say_so(repo):
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--config-name", "stage2"
    )
    assert code == 0, err
    inside = [line for line in err.splitlines() if "inside the compiled targets:" in line]
    assert inside and any("none of the repository's own code seen running inside them" in line for line in inside)
