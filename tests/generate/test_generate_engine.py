"""Adding and repairing compile wiring in prepare_model()."""

from __future__ import annotations

import difflib
import json

import git
import pytest
from gen_helpers import (
    ENGINE_REL,
    REASON,
    RECIPE_REL,
    assert_one_gated_block,
    checkpointing_off,
    make_repo,
    run_generate,
    snapshot,
)

FALLBACK_TARGETS = {
    "submodule": "model.model.language_model",
    "graph-break": "model.model.visual",
    "regional": "model.model.language_model.layers",
}


def _only_insertions(old: str, new: str) -> list[str]:
    """Lines inserted; fails if any original line was changed or removed."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    added = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        assert op in ("equal", "insert"), (op, a[i1:i2], b[j1:j2])
        if op == "insert":
            added.extend(b[j1:j2])
    return added


def test_kit_on_recipe_without_compile_inserts_one_block_before_wrap(repo):
    engine = repo / ENGINE_REL
    old = engine.read_text()
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    new = engine.read_text()
    block = assert_one_gated_block(new)
    assert "self.model_kit.apply_model_compile" in ast_text(block)
    added = _only_insertions(old, new)  # every untouched byte reprinted as it was
    assert "".join(added).count("apply_model_compile") == 1
    assert "# odd   spacing kept" in new


def ast_text(node):
    import ast

    return ast.unparse(node)


def test_kit_without_kit_instance_adds_import_and_init(tmp_path):
    repo = make_repo(tmp_path, "none_return")
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    new = (repo / ENGINE_REL).read_text()
    assert "from toykit.kit import MLLMModelKit\n" in new  # where the other recipes import it from
    # toykit has no engine module to read the base __init__ from: no annotation is invented
    assert (
        "    def __init__(self, config):\n"
        '        """Initialize the engine and the model kit it compiles with."""\n'
        "        super().__init__(config)\n        self.model_kit = MLLMModelKit()\n"
    ) in new
    # the wrap is in the return: the block goes right before it
    assert new.index("apply_model_compile") < new.index("return parallelize_model(")
    assert_one_gated_block(new)


@pytest.mark.parametrize(
    "signature, expected, imported",
    [
        ("def __init__(self, config):", "def __init__(self, config):", None),
        (
            "def __init__(self, config: DictConfig):",
            "def __init__(self, config: DictConfig):",
            "from omegaconf import DictConfig\n",
        ),
    ],
)
def test_new_init_mirrors_the_base_class(tmp_path, signature, expected, imported):
    repo = make_repo(tmp_path, "none_return", use_git=False)
    (repo / "toykit" / "engine.py").write_text(
        '"""Base engine."""\n\nfrom omegaconf import DictConfig\n\n\nclass Engine:\n'
        f'    """Base."""\n\n    {signature}\n        self.config = config\n'
    )
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    new = (repo / ENGINE_REL).read_text()
    assert f"    {expected}\n" in new
    assert "the new __init__ mirrors toykit.engine.Engine.__init__" in err
    if imported:  # in the third-party group, where isort puts it
        assert new.index("import torch\n") < new.index(imported) < new.index("from toykit.")
    else:
        assert "DictConfig" not in new


@pytest.mark.parametrize("kind", ["submodule", "graph-break", "regional"])
def test_fallbacks_infer_target_and_document(repo, kind):
    checkpointing_off(repo)  # whole blocks (checkpointed ones get their attention and MLP: test_generate_scopes)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", kind, "--reason", REASON, "--write")
    assert code == 0, err
    target = FALLBACK_TARGETS[kind]
    assert f"target: {target} (inferred" in err
    new = (repo / ENGINE_REL).read_text()
    block = assert_one_gated_block(new)
    text = ast_text(block)
    assert "apply_model_compile" not in text
    assert f"# model-compile: {kind} - {REASON}" in new
    assert target in text
    if kind == "graph-break":
        assert f"{target}.forward = torch.compiler.disable({target}.forward)" in text
    readme = (repo / RECIPE_REL / "README.md").read_text()
    assert readme.startswith("# Toy VLM\n\nA tiny recipe")  # rest of the README untouched
    assert "## Compile" in readme and REASON in readme and f"`{target}`" in readme


def test_post_wrap_compiles_the_wrapped_module_after_the_wrap(repo):
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "post-wrap", "--reason", REASON, "--write")
    assert code == 0, err
    new = (repo / ENGINE_REL).read_text()
    block = assert_one_gated_block(new, post_wrap=True)
    assert ast_text(block).count("parallelized_model.compile(") == 1
    assert "# model-compile: post-wrap - " in new


def test_post_wrap_splits_a_wrapping_return(tmp_path):
    repo = make_repo(tmp_path, "none_return")
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "post-wrap", "--reason", REASON, "--write")
    assert code == 0, err
    new = (repo / ENGINE_REL).read_text()
    assert "        model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n" in new
    assert new.rstrip().endswith("return model")
    assert_one_gated_block(new, post_wrap=True)
    assert "MLLMModelKit" not in new  # a fallback needs no kit


@pytest.mark.parametrize("defect", ["after_wrap", "before_freeze", "ungated", "hardcoded", "wrapper"])
def test_repairs_replace_the_defective_block(tmp_path, defect):
    repo = make_repo(tmp_path, defect)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    assert "replaced" in err
    new = (repo / ENGINE_REL).read_text()
    assert_one_gated_block(new)
    assert new.count("apply_model_compile") == 1
    assert "torch.compile(" not in new and '"max-autotune"' not in new
    if defect == "wrapper":
        assert "# compile for speed" not in new  # the old block's own comment goes with it


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--path", "submodule", "--reason", REASON],
        ["--path", "graph-break", "--reason", REASON],
        ["--path", "regional", "--reason", REASON],
        ["--path", "post-wrap", "--reason", REASON],
    ],
)
@pytest.mark.parametrize("engine", ["none_assign", "none_return", "wrapper"])
def test_idempotent(tmp_path, engine, args):
    repo = make_repo(tmp_path, engine)
    recipe = str(repo / RECIPE_REL)
    code, _, err = run_generate(recipe, *args, "--write")
    assert code == 0, err
    first = snapshot(repo)
    code, out, err = run_generate(recipe, *args, "--write")
    assert code == 0, err
    assert "no changes" in err and out == "" and "replaced" not in err
    assert snapshot(repo) == first


def test_switching_paths_leaves_one_block(repo):
    checkpointing_off(repo)
    recipe = str(repo / RECIPE_REL)
    assert run_generate(recipe, "--path", "regional", "--reason", REASON, "--write", "--force")[0] == 0
    code, _, err = run_generate(recipe, "--write", "--force")
    assert code == 2 and "pass --switch" in err  # an existing fallback is not silently replaced
    code, _, err = run_generate(recipe, "--write", "--force", "--switch")
    assert code == 0 and "switching from fallback:regional (model.model.language_model.layers) to kit" in err
    new = (repo / ENGINE_REL).read_text()
    assert_one_gated_block(new)
    assert "block.compile" not in new and "# model-compile: regional" not in new


def test_dry_run_prints_diff_and_writes_nothing(repo):
    before = snapshot(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL))
    assert code == 0, err
    assert snapshot(repo) == before
    assert f"--- a/{ENGINE_REL}" in out and f"+++ b/{ENGINE_REL}" in out
    assert "+        if self.config.model.compile.enabled:" in out
    assert "+    compile:" in out  # the stage YAML too


def test_json_lists_files_hunks_and_snippets(repo):
    checkpointing_off(repo)
    code, out, err = run_generate(str(repo / RECIPE_REL), "--path", "submodule", "--reason", REASON, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["dry_run"] is True and data["target"] == "model.model.language_model" and data["target_inferred"]
    paths = {f["path"] for f in data["files"]}
    assert {
        ENGINE_REL,
        f"{RECIPE_REL}/configs/schema.py",
        f"{RECIPE_REL}/configs/train.yaml",
        f"{RECIPE_REL}/README.md",
    } <= paths
    assert all(f["hunks"] and f["hunks"][0].startswith("@@") for f in data["files"])
    assert "model.model.language_model.compile(" in data["snippets"]["compile_block"]


def test_explicit_target_is_used(repo):
    code, out, err = run_generate(
        str(repo / RECIPE_REL), "--path", "submodule", "--target", "model.lm_head", "--reason", REASON, "--write"
    )
    assert code == 0, err
    assert "model.lm_head.compile(" in (repo / ENGINE_REL).read_text()


def test_a_switch_keeps_the_spacing_of_the_compile_it_replaces(tmp_path):
    repo = make_repo(tmp_path, "none_assign")
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    engine = repo / ENGINE_REL
    gate = "        if self.config.model.compile.enabled:\n"
    text = engine.read_text()
    assert "\n\n" + gate in text
    engine.write_text(text.replace("\n\n" + gate, "\n" + gate))  # the team keeps it tight after its last step
    git.Repo(repo).git.add(A=True)
    git.Repo(repo).git.commit("-qm", "tight")
    code, _, err = run_generate(str(repo / RECIPE_REL), "--path", "regional", "--switch", "--reason", REASON, "--write")
    assert code == 0, err
    new = engine.read_text()
    assert gate in new and "\n\n" + gate not in new  # no blank line appears where the team had none
