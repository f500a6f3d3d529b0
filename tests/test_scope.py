"""Compiled scope in module terms (ledger/compiled_scope.py): kit, regional, submodule, and what a switch moves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from model_compile.analyze import analyze_path
from model_compile.ledger.compiled_scope import compiled_scope, planned_scope, scope_changes
from model_compile.ledger.models import Branch, Event, Ledger
from model_compile.ledger.repo import KitFacts

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo_repo"
ENGINE = "recipes/toy/engine/toy_engine.py"
KIT = KitFacts(
    file="eng/kit.py", line=1, class_name="MLLMModelKit", in_place=True, disables=["m.model.visual"], model_param="m"
)
TEXT_KIT = KitFacts(file="eng/llm.py", line=1, class_name="LLMModelKit", in_place=True)
SOURCE = {
    ENGINE: "from eng.kit import MLLMModelKit\n\nclass ToyEngine:\n    def __init__(self):\n        self.model_kit = MLLMModelKit()\n"
}


def ledger(*compiles: Event) -> Ledger:
    events = [
        Event(kind="build", file=ENGINE, line=10, call="self.model_kit.build_model(path)"),
        Event(
            kind="patch",
            file=ENGINE,
            line=11,
            call="self.token_loss_kit.apply_chunked_token_loss_patch(model)",
            target="model",
        ),
        *compiles,
        Event(kind="wrap", file=ENGINE, line=30, call="parallelize_model(model)", target="model"),
    ]
    return Ledger(engine_class="ToyEngine", file=ENGINE, line=9, events=events)


def kit_call() -> Event:
    return Event(
        kind="compile",
        file=ENGINE,
        line=20,
        call="self.model_kit.apply_model_compile(model, backend=b, mode=m)",
        target="model",
        compile_style="kit",
        kit=True,
    )


def regional(container: str = "model.model.language_model.layers") -> Event:
    return Event(
        kind="compile",
        file=ENGINE,
        line=21,
        call="block.compile(backend=b, mode=m)",
        target=f"each of {container}",
        compile_style="inplace",
        branches=[Branch(node=f"{ENGINE}:20", arm="loop")],
    )


def submodule() -> Event:
    return Event(
        kind="compile",
        file=ENGINE,
        line=21,
        call="model.model.language_model.compile(backend=b, mode=m)",
        target="model.model.language_model",
        compile_style="inplace",
    )


def test_kit_scope_is_the_whole_model_minus_what_the_kit_disables():
    scope = compiled_scope([ledger(kit_call())], [TEXT_KIT, KIT], SOURCE)
    assert scope.summary == "whole model `model` minus `model.model.visual`"  # rebased from the kit's `m`
    assert scope.patterns == [""]
    assert scope.eager == ["`model.model.visual` (torch.compiler.disable in the kit)"]


def test_kit_scope_picks_the_kit_class_the_engine_instantiates():
    source = {ENGINE: SOURCE[ENGINE].replace("MLLMModelKit", "LLMModelKit")}
    assert compiled_scope([ledger(kit_call())], [KIT, TEXT_KIT], source).summary == "whole model `model`"


def test_regional_scope_is_n_blocks_of_the_container():
    scope = compiled_scope([ledger(regional())], [KIT], SOURCE)
    assert scope.summary == "N blocks of `model.model.language_model.layers` (each compiled; N known at run time)"
    assert scope.patterns == ["model.language_model.layers.*"]
    assert scope.eager[0].startswith(
        "everything `model` runs outside the blocks of `model.model.language_model.layers`"
    )
    assert scope.eager[0] == "everything `model` runs outside the blocks of `model.model.language_model.layers`"
    assert scope.eager[1] == "`model.model.visual`, all of it (the kit keeps it eager too)"
    assert scope.eager[2] == "code patched in by apply_chunked_token_loss_patch, unless it runs inside a compiled part"
    both = compiled_scope([ledger(regional(), regional("model.model.visual.blocks"))], [KIT], SOURCE)
    assert not any("all of it" in line for line in both.eager)  # its blocks are compiled


def per_block(member: str, line: int = 21) -> Event:
    """`for layer in model.model.language_model.layers: layer.<member>.compile()`, as the ledger reads it."""
    return Event(
        kind="compile",
        file=ENGINE,
        line=line,
        call=f"layer.{member}.compile(backend=b, mode=m)",
        target=f"model.model.language_model.layers.*.{member}",
        compile_style="inplace",
        branches=[Branch(node=f"{ENGINE}:20", arm="loop")],
    )


def test_per_block_submodules_are_read_as_those_modules_of_each_block():
    scope = compiled_scope([ledger(per_block("self_attn"), per_block("mlp", 22))], [KIT], SOURCE)
    assert scope.patterns == ["model.language_model.layers.*.self_attn", "model.language_model.layers.*.mlp"]
    assert scope.summary == (
        "`self_attn` of each of the N blocks of `model.model.language_model.layers` (each compiled; N known at run "
        "time); `mlp` of each of the N blocks of `model.model.language_model.layers` (each compiled; N known at run "
        "time)"
    )
    assert scope.eager[0] == (
        "everything `model` runs outside the `self_attn` of each block of `model.model.language_model.layers` and "
        "the `mlp` of each block of `model.model.language_model.layers`"
    )


def test_planned_per_block_scope_names_the_models_own_modules():
    scope = planned_scope(
        "regional",
        "model.vit.layers.*.attention",
        "model",
        around=(["vit.embeddings", "vit.layers.*.layernorm_before", "classifier"], "ViTForImageClassification"),
    )
    assert scope.patterns == ["vit.layers.*.attention"]
    assert "`model.classifier`" in scope.eager[0] and "merger" not in scope.eager[0]
    assert scope.eager[0].endswith("(modules read from ViTForImageClassification)")


def test_submodule_scope_is_that_module():
    scope = compiled_scope([ledger(submodule())], [KIT], SOURCE)
    assert scope.summary == "`model.model.language_model`"
    assert scope.patterns == ["model.language_model"]
    assert scope.eager[0] == "everything `model` runs outside `model.model.language_model`"


def test_no_compile_no_scope():
    scope = compiled_scope([ledger()], [KIT], SOURCE)
    assert scope.summary == "nothing compiled" and scope.patterns == []


def test_kit_to_regional_names_what_moves_to_eager():
    kit = compiled_scope([ledger(kit_call())], [KIT], SOURCE)
    reg = compiled_scope([ledger(regional())], [KIT], SOURCE)
    lines = scope_changes(kit, reg)
    assert lines[0] == (
        "compiled scope: whole model `model` minus `model.model.visual` -> "
        "N blocks of `model.model.language_model.layers` (each compiled; N known at run time)"
    )
    assert len(lines) == 2 and lines[1].startswith(
        "moved to eager: what `model` runs outside the blocks of `model.model.language_model.layers`"
    )
    assert "apply_chunked_token_loss_patch" in lines[1]
    for guessed in ("token embeddings", "lm_head", "in a Hugging Face model"):  # no module named without the model
        assert guessed not in lines[1]
    back = scope_changes(reg, kit)  # widening: the same code moves into compile
    assert back[1].startswith("moved into compile: what `model` runs outside the blocks of")


def test_regional_vision_blocks_move_into_compile_from_the_kits_disabled_tower():
    kit = compiled_scope([ledger(kit_call())], [KIT], SOURCE)
    both = compiled_scope([ledger(regional(), regional("model.model.visual.blocks"))], [KIT], SOURCE)
    lines = scope_changes(kit, both)
    assert "moved into compile: N blocks of `model.model.visual.blocks` (each compiled; N known at run time)" in lines


def test_a_region_the_old_scope_disabled_moves_into_compile_as_no_longer_disabled():
    """Kit (vision tower in torch.compiler.disable) -> torch.compile of the whole model: the tower is compiled
    now; the line must not say it is now wrapped in torch.compiler.disable (that is the other direction)."""
    kit = compiled_scope([ledger(kit_call())], [KIT], SOURCE)
    whole = kit.model_copy(update={"parts": [kit.parts[0].model_copy(update={"minus": [], "when_present": []})]})
    into = scope_changes(kit, whole)
    assert "moved into compile: `model.model.visual` (no longer wrapped in torch.compiler.disable)" in into
    out = scope_changes(whole, kit)
    assert "moved to eager: `model.model.visual` (now wrapped in torch.compiler.disable)" in out


def test_same_scope_says_nothing():
    kit = compiled_scope([ledger(kit_call())], [KIT], SOURCE)
    assert scope_changes(kit, kit.model_copy()) == []


def test_kit_compile_of_the_wrapped_model_is_the_same_scope():
    """Compiling `parallelized_model` instead of `model` names the same regions: no moved-to/into lines."""
    before = compiled_scope([ledger(kit_call())], [KIT], SOURCE)
    wrapped = replace(
        kit_call(), target="parallelized_model", call="self.model_kit.apply_model_compile(parallelized_model)"
    )
    after = compiled_scope([ledger(wrapped)], [KIT], SOURCE)
    assert after.parts[0].minus == ["parallelized_model.model.visual"]
    assert scope_changes(before, after) == []


def test_scope_on_the_demo_repo_matches_the_committed_runtime_patterns():
    report = analyze_path(DEMO)
    by_name = {r.name: r for r in report.recipes}
    # the demo kit disables the vision tower only when the model has one (hasattr): hedged, statically
    assert by_name["vlm_kit"].scope.summary == "whole model `model` minus `model.model.visual` (when present)"
    assert by_name["vlm_regional"].scope.patterns == ["model.language_model.layers.*", "model.visual.blocks.*"]
    asserts = (DEMO / "recipes/vlm_regional/tests/skills/model-compile/asserts.py").read_text()
    assert 'TARGET_PATTERNS = ["model.language_model.layers.*", "model.visual.blocks.*"]' in asserts


def test_planned_scope_for_each_fallback():
    assert planned_scope("regional", "model.model.language_model.layers", "model").patterns == [
        "model.language_model.layers.*"
    ]
    assert planned_scope("submodule", "model.model.language_model", "model").patterns == ["model.language_model"]
    gb = planned_scope("graph-break", "model.model.visual", "model")
    assert gb.summary == "whole model `model` minus `model.model.visual`"
