"""The smoke commands the review prints carry what the recipe's own tests need: where the smoke test replaces the
compile section with a bool (MC211), each stage's command rebuilds it with that stage's backend and mode."""

from __future__ import annotations

from report_helpers import demo_copy

from model_compile.report.run import review_path

SMOKE = "recipes/vlm_kit/tests/test_smoke.py"


def _smoke_commands(report) -> list[str]:
    (recipe,) = report.recipes
    rows = [row for row in recipe.validation if row.name == "smoke"]
    return [c for row in rows for c in [row.command or "", *row.commands] if c]


def test_a_rejected_compile_override_gets_the_stages_own_backend_and_mode(tmp_path):
    repo = demo_copy(tmp_path / "demo")
    smoke = repo / SMOKE
    smoke.write_text(smoke.read_text() + '\n\nSMOKE_OVERRIDE = {"model": {"compile": False}}\n')
    report = review_path(repo / "recipes" / "vlm_kit")
    (recipe,) = report.recipes
    assert any(f.rule == "MC211" for f in recipe.findings)
    commands = _smoke_commands(report)
    assert commands and all(
        "--config-override model.compile.enabled=true --config-override model.compile.backend=aot_eager "
        "--config-override model.compile.mode=default" in c
        for c in commands
    )


def test_without_it_the_switch_alone(tmp_path):
    repo = demo_copy(tmp_path / "demo")
    report = review_path(repo / "recipes" / "vlm_kit")
    commands = _smoke_commands(report)
    assert commands and all("model.compile.backend=" not in c for c in commands)
