"""`--enable` on a recipe that compiles but whose stage YAML has no compile keys: the stage gets them, in the form
the recipe's schema has (the `model.compile` section, or the older flat keys), format-preserving and idempotent."""

from __future__ import annotations

import re

import git
import pytest
import yaml
from gen_helpers import ENGINE_REL, RECIPE_REL, make_repo, run_generate, snapshot

REASON = "try compile on the second stage; not measured yet"
STAGE2 = f"{RECIPE_REL}/configs/stage2.yaml"


def _commit(root):
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("step")


@pytest.fixture
def wired_without_block(repo):
    """Wired through the kit; stage2.yaml has no compile block (as a stage added after the wiring)."""
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    stage2 = repo / STAGE2
    stage2.write_text(re.sub(r"    compile:\n(?:        .*\n)+", "", stage2.read_text()))
    assert "compile" not in stage2.read_text()
    _commit(repo)
    return repo


def test_enable_adds_the_section_block_to_a_stage_without_one(wired_without_block):
    repo = wired_without_block
    before = (repo / STAGE2).read_text()
    code, out, err = run_generate(str(repo / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")
    assert code == 0, err
    assert "added the model.compile block (the schema's section form)" in err
    after = (repo / STAGE2).read_text()
    assert f"    compile:\n        enabled: true  # model-compile: enabled - {REASON}\n" in after  # the file's indent
    assert yaml.safe_load(after)["model"]["compile"] == {"enabled": True, "backend": "inductor", "mode": "default"}
    assert after.replace(after[after.index("    compile:") : after.index("optim:")], "") == before  # one edit
    assert "optim: {lr: 2.0e-5}  # flow style stays as is" in after
    assert "soft validation: compile path kit: 0 error(s)" in err and "MC203" not in err
    _commit(repo)
    again = snapshot(repo)
    code, _, err = run_generate(str(repo / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")
    assert code == 0 and "no changes" in err and snapshot(repo) == again  # idempotent


def test_enable_uses_the_backend_and_mode_given(wired_without_block):
    repo = wired_without_block
    code, _, err = run_generate(
        str(repo / RECIPE_REL), "--enable", "stage2", "--backend", "aot_eager", "--reason", REASON, "--write"
    )
    assert code == 0, err
    compile_ = yaml.safe_load((repo / STAGE2).read_text())["model"]["compile"]
    assert compile_ == {"enabled": True, "backend": "aot_eager", "mode": "default"}


def test_disable_writes_the_block_off(wired_without_block):
    repo = wired_without_block
    code, _, err = run_generate(str(repo / RECIPE_REL), "--disable", "stage2", "--write")
    assert code == 0, err
    assert yaml.safe_load((repo / STAGE2).read_text())["model"]["compile"]["enabled"] is False


FLAT_SCHEMA_FIELDS = (
    '    compile: bool = False\n    compile_backend: str = "aot_eager"\n    compile_mode: str = "default"\n'
)


@pytest.fixture
def flat(tmp_path):
    """A recipe in the older flat form: `model.compile: bool` beside compile_backend / compile_mode."""
    root = make_repo(tmp_path, "after_wrap", use_git=False)
    engine = root / ENGINE_REL
    text = engine.read_text()
    text = text.replace(
        "        parallelized_model = parallelize_model(\n            model,\n            parallel_mesh=self.parallel_mesh,\n"
        "        )\n\n        if self.config.model.compile.enabled:\n            parallelized_model = "
        "self.model_kit.apply_model_compile(\n                parallelized_model,\n"
        "                backend=self.config.model.compile.backend,\n                mode=self.config.model.compile.mode,\n"
        "            )\n",
        "        if self.config.model.compile:\n            model = self.model_kit.apply_model_compile(\n"
        "                model,\n                backend=self.config.model.compile_backend,\n"
        "                mode=self.config.model.compile_mode,\n            )\n\n"
        "        parallelized_model = parallelize_model(\n            model,\n            parallel_mesh=self.parallel_mesh,\n"
        "        )\n",
    )
    assert "compile_backend" in text
    engine.write_text(text)
    schema = root / RECIPE_REL / "configs" / "schema.py"
    schema.write_text(
        schema.read_text().replace(
            "    freeze_vit: bool = True\n", "    freeze_vit: bool = True\n" + FLAT_SCHEMA_FIELDS
        )
    )
    train = root / RECIPE_REL / "configs" / "train.yaml"
    train.write_text(
        train.read_text().replace(
            "  freeze_vit: true\n", '  freeze_vit: true\n  compile: false  # off\n  compile_backend: "eager"\n'
        )
    )
    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.com")
    _commit(root)
    return root


def test_enable_adds_the_flat_keys_where_the_schema_is_flat(flat):
    code, out, err = run_generate(str(flat / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")
    assert code == 0, err
    assert "added the flat compile keys (the schema's form)" in err
    text = (flat / STAGE2).read_text()
    assert f"    compile: true  # model-compile: enabled - {REASON}\n" in text
    model = yaml.safe_load(text)["model"]
    assert model["compile"] is True and model["compile_backend"] == "aot_eager" and model["compile_mode"] == "default"
    assert "MC203" not in err  # the intent note is read on the flat switch too
    _commit(flat)
    again = snapshot(flat)
    code, _, err = run_generate(str(flat / RECIPE_REL), "--enable", "stage2", "--reason", REASON, "--write")
    assert code == 0 and snapshot(flat) == again


def test_enable_turns_the_flat_switch_on_in_place(flat):
    code, _, err = run_generate(
        str(flat / RECIPE_REL), "--enable", "train", "--mode", "max-autotune", "--reason", REASON, "--write"
    )
    assert code == 0, err
    text = (flat / RECIPE_REL / "configs" / "train.yaml").read_text()
    # the line's own comment stays: the note goes on the line above
    assert f"  # model-compile: enabled - {REASON}\n  compile: true  # off\n" in text
    assert '  compile_backend: "eager"\n  compile_mode: max-autotune\n' in text
    code, _, err = run_generate(str(flat / RECIPE_REL), "--disable", "train", "--write", "--force")
    assert code == 0, err
    text = (flat / RECIPE_REL / "configs" / "train.yaml").read_text()
    assert "model-compile: enabled" not in text and "  compile: false  # off\n" in text


def test_a_switch_on_a_flat_recipe_writes_its_own_keys_and_commands(flat):
    """The older flat form keeps its keys: the regional block reads `model.compile` and `compile_backend`, the
    launch and smoke commands turn on `model.compile=true`, and the asserts read the same keys."""
    (flat / RECIPE_REL / "README.md").write_text(
        "# toy\n\n```bash\ntorchrun --nproc_per_node=1 -m toykit.launch --config recipes/toy_vlm/configs/train.yaml\n```\n"
    )
    _commit(flat)
    code, out, err = run_generate(
        str(flat / RECIPE_REL), "--path", "regional", "--switch", "--reason", "per block compile before sharding"
    )
    assert code == 0, err
    assert (
        "if self.config.model.compile:" in out
        and ".compile.enabled" not in out.split("+++ b/recipes/toy_vlm/README")[0]
    )
    assert "backend=self.config.model.compile_backend," in out and "mode=self.config.model.compile_mode" in out
    assert "run with compile on: torchrun" in err and "model.compile=true" in err and "compile.enabled=true" not in err
    assert 'SWITCH = "model.compile"' in out and 'BACKEND = "model.compile_backend"' in out
