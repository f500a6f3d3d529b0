"""`diff` of a change of compiled scope (the kit's whole model to regional blocks) names the model's own modules
that leave compile, as generate's README does, read from the checkout (the toy repository's transformers)."""

from __future__ import annotations

import json

from gen_helpers import RECIPE_REL, checkpointing_off, make_repo, run_generate

from model_compile.cli import main


def test_kit_to_regional_names_the_modules_that_move_to_eager(tmp_path, capsys):
    root = checkpointing_off(make_repo(tmp_path))  # whole blocks: the rule for checkpointed ones is elsewhere
    code, _, err = run_generate(str(root / RECIPE_REL), "--path", "kit", "--write")
    assert code == 0, err
    import git

    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("kit")
    code, _, err = run_generate(
        str(root / RECIPE_REL), "--path", "regional", "--switch", "--reason", "cold start per block", "--write"
    )
    assert code == 0, err
    assert main(["diff", str(root), "--format", "json"]) == 0
    (recipe,) = json.loads(capsys.readouterr().out)["recipes"]
    (moved,) = [c for c in recipe["ledger_changes"] if c.startswith("moved to eager: ")]
    assert "what `model` runs outside the blocks of `model.model.language_model.layers`: the modules" in moved
    assert "`model.model.language_model.embed_tokens`" in moved and "`model.lm_head`" in moved
    assert "`model.model.visual`" not in moved.split("(read from")[0]  # the kit kept it eager already
    assert "read from Qwen2VLForConditionalGeneration in transformers 5.99.0" in moved
