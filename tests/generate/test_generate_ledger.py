"""Placement read from the ledger: wraps and freezes the analysis sees through helpers and by receiver."""

from __future__ import annotations

import ast

import pytest
from gen_helpers import ENGINE_REL, REASON, RECIPE_REL, make_repo, run_generate, snapshot

GATE = "if self.config.model.compile.enabled:"

TRAINABLE = """def select_trainable(model, config):
    if config.freeze_vit:
        model.model.visual.requires_grad_(False)
"""


def prepare_model_body(source: str) -> list[str]:
    """First line of each statement of prepare_model(), docstring left out."""
    tree = ast.parse(source)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "prepare_model")
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return [ast.unparse(s).splitlines()[0] for s in body]


def _generate(repo, *args, code: int = 0):
    got, out, err = run_generate(str(repo / RECIPE_REL), *args, "--write")
    assert got == code, err  # 1: written, and the soft validation still finds an error
    return (repo / ENGINE_REL).read_text(), err


def test_wrap_inside_a_helper_block_goes_before_the_helper_call(tmp_path):
    repo = make_repo(tmp_path, "wrap_in_helper")
    new, err = _generate(repo)
    assert prepare_model_body(new) == [
        "model = build_toy_model(self.config.model).to(self.device)",
        "model = self.model_kit.apply_freeze_policy(model, freeze_vit=self.config.model.freeze_vit)",
        GATE,
        "parallelized_model = self._distribute(model)",
        "return parallelized_model",
    ]
    assert "model = self.model_kit.apply_model_compile(\n                model," in new
    assert "block placed before the distributed wrap (inside self._distribute())" in err
    # the helper itself is left alone
    assert (
        "    def _distribute(self, model):\n        return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
        in new
    )
    before = snapshot(repo)
    assert run_generate(str(repo / RECIPE_REL), "--write")[0] == 0
    assert snapshot(repo) == before  # idempotent


def test_wrap_inside_a_helper_post_wrap_compiles_after_the_helper_call(tmp_path):
    repo = make_repo(tmp_path, "wrap_in_helper")
    new, err = _generate(repo, "--path", "post-wrap", "--reason", REASON)
    body = prepare_model_body(new)
    assert body[-3:] == ["parallelized_model = self._distribute(model)", GATE, "return parallelized_model"]
    assert "parallelized_model.compile(" in new


def test_wrap_helper_that_also_freezes_is_reported(tmp_path):
    repo = make_repo(tmp_path, "wrap_in_helper", use_git=False)
    engine = repo / ENGINE_REL
    engine.write_text(
        engine.read_text().replace(
            "        return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n",
            "        model.model.visual.requires_grad_(False)\n"
            "        return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n",
        )
    )
    new, err = _generate(repo, code=1)
    assert prepare_model_body(new)[2:4] == [GATE, "parallelized_model = self._distribute(model)"]
    assert "self._distribute() also does freeze before it wraps" in err
    assert "error MC402" in err  # the helper's freeze now follows the compile: the review says so


def test_accelerator_prepare_is_the_wrap(tmp_path):
    repo = make_repo(tmp_path, "accelerate_prepare")
    new, err = _generate(repo)
    assert prepare_model_body(new) == [
        "net = build_toy_model(self.config.model)",
        "net = self.model_kit.apply_freeze_policy(net, freeze_vit=self.config.model.freeze_vit)",
        GATE,
        "prepared = self.trainer.accelerator.prepare(net)",
        "self.log_parameters(prepared)",
        "return prepared",
    ]
    assert "net = self.model_kit.apply_model_compile(\n                net," in new  # the wrapped variable
    assert "block placed before the distributed wrap" in err


def test_deepspeed_initialize_is_the_wrap(tmp_path):
    repo = make_repo(tmp_path, "deepspeed_init")
    new, err = _generate(repo, "--path", "submodule", "--target", "net.model.language_model", "--reason", REASON)
    assert prepare_model_body(new) == [
        "net = build_toy_model(self.config.model)",
        "net = self.model_kit.apply_gradient_checkpointing(net, use_reentrant=False)",
        GATE,
        "engine, _, _, _ = deepspeed.initialize(model=net, config=self.config.deepspeed)",
        "return engine",
    ]
    assert "net.model.language_model.compile(" in new


def test_freeze_by_a_function_in_another_module_is_followed(tmp_path):
    repo = make_repo(tmp_path, "freeze_elsewhere", use_git=False)
    (repo / RECIPE_REL / "model" / "trainable.py").write_text(TRAINABLE)
    engine = repo / ENGINE_REL
    # the freeze first, then the wrap: the block goes between them
    engine.write_text(
        engine.read_text().replace(
            "        model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
            "        select_trainable(model, self.config.model)\n",
            "        select_trainable(model, self.config.model)\n"
            "        model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n",
        )
    )
    new, err = _generate(repo)
    assert prepare_model_body(new) == [
        "model = build_toy_model(self.config.model).to(self.device)",
        "select_trainable(model, self.config.model)",
        GATE,
        "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)",
        "return model",
    ]


def test_freeze_by_a_function_in_another_module_after_the_wrap_keeps_the_block_after_it(tmp_path):
    repo = make_repo(tmp_path, "freeze_elsewhere", use_git=False)
    (repo / RECIPE_REL / "model" / "trainable.py").write_text(TRAINABLE)
    new, err = _generate(repo, code=1)
    # the compile never precedes the freeze, even though the wrap comes first
    assert prepare_model_body(new) == [
        "model = build_toy_model(self.config.model).to(self.device)",
        "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)",
        "select_trainable(model, self.config.model)",
        GATE,
        "return model",
    ]
    assert "comes before the last freeze step" in err and "block placed before the return" in err
    assert "use --path post-wrap" in err and "error MC408" in err  # a kit compile after the wrap


def test_freeze_after_the_wrap_post_wrap_compiles_after_both(tmp_path):
    repo = make_repo(tmp_path, "freeze_elsewhere", use_git=False)
    (repo / RECIPE_REL / "model" / "trainable.py").write_text(TRAINABLE)
    new, err = _generate(repo, "--path", "post-wrap", "--reason", REASON)
    assert prepare_model_body(new)[1:] == [
        "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)",
        "select_trainable(model, self.config.model)",
        GATE,
        "return model",
    ]
    assert "model.compile(" in new
    assert "after the distributed wrap and the freeze step after it" in err


def test_compile_in_a_function_of_another_module_is_refused(tmp_path):
    repo = make_repo(tmp_path, "freeze_elsewhere", use_git=False)
    (repo / RECIPE_REL / "model" / "trainable.py").write_text(TRAINABLE + "    model.compile()\n")
    before = snapshot(repo)
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "select_trainable() called from prepare_model() (line 24)" in err
    assert f"`model.compile()` at {RECIPE_REL}/model/trainable.py:4" in err
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    "statement",
    [
        "return torch.compile(parallelize_model(model, parallel_mesh=self.parallel_mesh))",
        "return self.model_kit.apply_model_compile(model, backend='inductor')",
    ],
)
def test_compile_sharing_a_statement_with_another_step_is_refused(tmp_path, statement):
    repo = make_repo(tmp_path, "none_return", use_git=False)
    engine = repo / ENGINE_REL
    engine.write_text(
        engine.read_text().replace("return parallelize_model(model, parallel_mesh=self.parallel_mesh)", statement)
    )
    before = snapshot(repo)
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 2 and "split it first" in err and "line 18" in err
    assert snapshot(repo) == before
