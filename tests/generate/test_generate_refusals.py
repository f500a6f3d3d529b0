"""Refusals: nothing is written and the exit code is 2 with a one-line reason."""

from __future__ import annotations

import shutil

from gen_helpers import ENGINE_REL, FIXTURES, REASON, RECIPE_REL, checkpointing_off, make_repo, run_generate, snapshot


def test_unparseable_engine_writes_nothing(tmp_path):
    repo = make_repo(tmp_path, "broken.txt")
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 2
    assert "cannot parse" in err and ENGINE_REL in err and len(err.strip().splitlines()) == 1
    assert snapshot(repo) == before  # schema and YAML untouched too: the edit is all or nothing


def test_unparseable_yaml_writes_nothing(repo):
    stage = repo / RECIPE_REL / "configs" / "stage2.yaml"
    stage.write_text("model:\n  path: [unclosed\n")
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write", "--force")
    assert code == 2 and "cannot parse YAML" in err
    assert snapshot(repo) == before


def test_dirty_file_is_refused_without_force(repo):
    engine = repo / ENGINE_REL
    engine.write_text(engine.read_text() + "\n# local edit\n")
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 2 and "uncommitted changes" in err and ENGINE_REL in err
    assert snapshot(repo) == before
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write", "--force")
    assert code == 0, err
    assert "apply_model_compile" in engine.read_text() and "# local edit" in engine.read_text()


def test_dry_run_ignores_dirty_files(repo):
    engine = repo / ENGINE_REL
    engine.write_text(engine.read_text() + "\n# local edit\n")
    code, out, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0 and "+++ b/" in out


def test_kit_path_without_kit_in_repo_points_to_fallbacks(tmp_path):
    repo = make_repo(tmp_path, "none_return", use_git=False)
    shutil.rmtree(repo / "toykit" / "kit")
    shutil.rmtree(repo / "recipes" / "other")
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 2
    assert "no model kit class (one defining apply_model_compile)" in err and "--path submodule" in err
    assert snapshot(repo) == before


def test_fallback_requires_reason(repo):
    for args in (["--path", "submodule"], ["--path", "regional", "--reason", "x"]):
        code, out, err = run_generate(str(repo / RECIPE_REL), *args, "--write")
        assert code == 2 and "--reason" in err


def test_bad_backend_and_target_are_usage_errors(repo):
    assert run_generate(str(repo / RECIPE_REL), "--backend", "tvm")[0] == 2
    code, _, err = run_generate(str(repo / RECIPE_REL), "--path", "submodule", "--target", "net.x", "--reason", REASON)
    assert code == 2 and "must start with the model variable" in err
    code, _, err = run_generate(
        str(repo / RECIPE_REL), "--path", "submodule", "--target", "model.x-y", "--reason", REASON
    )
    assert code == 2


def test_missing_recipe(tmp_path):
    code, _, err = run_generate(str(tmp_path / "nope"))
    assert code == 2 and "not found" in err


def test_compile_hidden_in_helper_is_refused(tmp_path):
    repo = make_repo(tmp_path, use_git=False)
    engine = repo / ENGINE_REL
    text = (
        engine.read_text().replace(
            "        parallelized_model = parallelize_model(",
            "        model = self._maybe_compile(model)\n\n        parallelized_model = parallelize_model(",
        )
        + "\n    def _maybe_compile(self, model):\n        return torch.compile(model)\n"
    )
    engine.write_text(text)
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 2 and "_maybe_compile" in err
    assert engine.read_text() == text


def test_fixture_tree_is_not_modified():
    # the tests copy the fixture repo; the checked-in copy never changes
    assert "compile" not in (FIXTURES / "toy_repo" / "recipes" / "toy_vlm" / "configs" / "train.yaml").read_text()


def test_parity_test_is_self_contained(repo):
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    skill = repo / RECIPE_REL / "tests" / "skills" / "model-compile"
    asserts = (skill / "asserts.py").read_text()
    parity = (skill / "test_compile_parity.py").read_text()
    assert 'COMPILE_PATH = "kit"' in asserts
    assert "toykit" not in parity  # nothing imported from the repository's shared code
    assert 'RECIPE_PACKAGE = "recipes.toy_vlm"' in parity and 'CONFIG_CLASS = "ToyVLMConfig"' in parity
    assert 'ENGINE_MODULE = "recipes.toy_vlm.engine.toy_vlm_engine"' in parity
    assert 'ENGINE_CLASS = "ToyVLMEngine"' in parity
    assert "testing" not in err  # never asks to edit shared code


def test_parity_test_needs_no_testing_module(tmp_path):
    repo = make_repo(tmp_path, use_git=False)
    shutil.rmtree(repo / "toykit" / "testing")
    checkpointing_off(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--reason", REASON, "--write")
    assert code == 0, err
    skill = repo / RECIPE_REL / "tests" / "skills" / "model-compile"
    assert (skill / "asserts.py").is_file() and (skill / "test_compile_parity.py").is_file()
    assert 'TARGET_PATTERNS = ["model.language_model.layers.*"]' in (skill / "asserts.py").read_text()


def test_enable_on_a_recipe_that_does_not_compile_is_refused_with_why(tmp_path):
    """A flat `compile:` switch that no prepare_model() reads turns nothing on: wire compile first."""
    repo = make_repo(tmp_path, "none_return", use_git=False)
    stage = repo / RECIPE_REL / "configs" / "train.yaml"
    stage.write_text(stage.read_text().replace("  freeze_vit: true\n", "  freeze_vit: true\n  compile: false\n"))
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--enable", "train", "--reason", "try it on the toy")
    assert code == 2 and err.count("\n") == 1
    assert "it does not compile yet; run `model-compile generate recipes/toy_vlm --path kit --write` first" in err
    assert snapshot(repo) == before
