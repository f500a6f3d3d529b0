"""`generate --path kit` writes the README's Compile section too, with the scope the kit has for this model."""

from __future__ import annotations

from gen_helpers import RECIPE_REL, run_generate

from model_compile.generate.planning import locate
from model_compile.generate.planning.inputs import kit_scope
from model_compile.ledger.repo import KitFacts
from model_compile.parse.model_tree import ModelTree, Node


def layout(name: str, paths: tuple[str, ...], incomplete: tuple[str, ...] = ()) -> locate.ModelLayout:
    """A model layout with these modules (relative to the model), read as from the model's code."""
    tree = ModelTree(root=name, nodes={p: Node(p, "") for p in ("", *paths)}, incomplete=set(incomplete))
    return locate.ModelLayout(name, "read from its code", tree, "a test")


GUARDED = KitFacts(
    file="kit.py",
    line=1,
    class_name="MLLMModelKit",
    in_place=True,
    disables=["m.model.visual"],
    found_by={"m.model.visual": "hasattr(m, 'model') and hasattr(m.model, 'visual')"},
    model_param="m",
)
ALWAYS = GUARDED.model_copy(update={"found_by": {}})
VIT = layout("ViTForImageClassification", ("vit", "vit.encoder", "classifier"))
QWEN = layout("Qwen3VLForConditionalGeneration", ("model", "model.visual"))


def test_kit_path_writes_the_compile_section(repo):
    code, _, err = run_generate(str(repo / RECIPE_REL), "--write")
    assert code == 0, err
    readme = (repo / RECIPE_REL / "README.md").read_text()
    assert "## Compile" in readme and "- Path: kit" in readme
    assert "model kit's `apply_model_compile()`" in readme and "fallback" not in readme.split("## Compile")[1]
    assert "README: appended a Compile section" in err or "README: replaced the Compile section" in err


def test_a_guarded_kit_region_the_model_lacks_is_not_claimed():
    scope = kit_scope("model", GUARDED, VIT, [])
    assert scope.summary == "whole model `model`" and scope.eager == []


def test_a_guarded_region_is_hedged_when_the_layout_is_unknown_and_plain_when_seen():
    unknown = kit_scope("model", GUARDED, None, [])
    assert unknown.summary == "whole model `model` minus `model.model.visual` (when present)"
    assert unknown.eager == ["`model.model.visual` (torch.compiler.disable in the kit, when the model has it)"]
    assert kit_scope("model", GUARDED, QWEN, []).summary == "whole model `model` minus `model.model.visual`"


def test_an_unguarded_disable_is_always_claimed():
    assert kit_scope("model", ALWAYS, VIT, []).summary == "whole model `model` minus `model.model.visual`"
