"""Soft validation of the fixture repository: every compile path, helpers,
branches, aliases, wrappers, Literal types, multi-stage YAMLs, README
fallbacks and broken files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from model_compile.analyze import analyze_path

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / "tests" / "fixtures" / "soft_repo"


@pytest.fixture(scope="module")
def report():
    return analyze_path(REPO)


def _recipe(report, name):
    return next(r for r in report.recipes if r.name == name)


def _rules(recipe, severity=None):
    return sorted({f.rule for f in recipe.findings if severity is None or f.severity == severity})


EXPECTED = {
    # recipe: (compile_path, error rules, warning rules)
    "kit_canonical": ("kit", [], []),
    "kit_helpers": ("kit", [], []),
    "fallback_submodule": ("fallback:submodule", [], []),
    "fallback_graph_break": ("fallback:graph-break", [], []),
    "fallback_post_wrap": ("fallback:post-wrap", [], []),
    "fallback_regional": ("fallback:regional", [], []),
    "exclusive_paths": ("fallback:regional", [], []),
    "direct_wrapper": ("direct", ["MC101", "MC103", "MC204", "MC404"], ["MC203"]),
    "plain": ("none", [], []),
    "placement_defects": ("kit", ["MC401", "MC402", "MC403"], ["MC203"]),
    "identity_defects": ("kit", ["MC301", "MC405"], []),
    "broken_syntax": ("none", ["MC000"], []),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipe_expectations(report, name):
    path, errors, warnings = EXPECTED[name]
    recipe = _recipe(report, name)
    assert recipe.compile_path == path
    assert _rules(recipe, "error") == errors
    assert _rules(recipe, "warning") == warnings


def test_every_compile_path_is_covered():
    paths = {v[0] for v in EXPECTED.values()}
    assert paths == {
        "kit",
        "fallback:submodule",
        "fallback:graph-break",
        "fallback:post-wrap",
        "fallback:regional",
        "direct",
        "none",
    }


def test_helpers_aliases_and_early_return_resolve(report):
    ledger = _recipe(report, "kit_helpers").ledger[0]
    kinds = [e.kind for e in ledger.events if e.kind != "return"]
    assert kinds == ["build", "patch", "freeze", "compile", "wrap"]
    compile_event = next(e for e in ledger.events if e.kind == "compile")
    # `cfg = self.config.model.compile; if not cfg.enabled: return model` resolves to a positive gate
    assert compile_event.condition == ["self.config.model.compile.enabled"]
    assert compile_event.arguments == {
        "backend": "self.config.model.compile.backend",
        "mode": "self.config.model.compile.mode",
    }
    assert compile_event.via == ["self._maybe_compile(model)"]
    assert compile_event.anchor_line is not None


def test_recipe_function_in_other_module_is_followed(report):
    ledger = _recipe(report, "placement_defects").ledger[0]
    freeze = next(e for e in ledger.events if e.kind == "freeze")
    assert freeze.file.endswith("model/setup.py")
    assert freeze.via == ["freeze_and_patch(model)"]
    assert freeze.target == "each of model.model.visual.parameters()"


def test_exclusive_branches_are_not_two_paths(report):
    recipe = _recipe(report, "exclusive_paths")
    assert "MC406" not in _rules(recipe)
    events = [e for e in recipe.ledger[0].events if e.kind == "compile"]
    assert [e.compile_style for e in events] == ["inplace", "kit"]
    assert events[1].condition == [
        "not (self.config.model.compile.enabled and self.config.model.compile.regional)",
        "self.config.model.compile.enabled",
    ]


def test_submodule_target_through_alias(report):
    recipe = _recipe(report, "fallback_submodule")
    assert recipe.compiled_target == ["model.model.language_model"]


def test_regional_target_and_placement(report):
    recipe = _recipe(report, "fallback_regional")
    assert recipe.compiled_target == ["each of model.model.language_model.layers"]
    assert "before wrap (fully_shard)" in recipe.placement


def test_post_wrap_recognises_deepspeed(report):
    ledger = _recipe(report, "fallback_post_wrap").ledger[0]
    assert [e.kind for e in ledger.events if e.kind in ("wrap", "compile")] == ["wrap", "compile"]


def test_literal_alias_and_multi_stage_config(report):
    recipe = _recipe(report, "kit_canonical")
    schema = recipe.config.schema_
    assert schema.compile_class == "CompileConfig"
    assert schema.fields["mode"].allowed == ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
    assert schema.fields["backend"].allowed == ["inductor", "aot_eager", "eager"]
    assert [(s.name, s.values["backend"]) for s in recipe.config.stages] == [
        ("stage1", "inductor"),
        ("stage2", "aot_eager"),
    ]


def test_kit_facts(report):
    assert [(k.class_name, k.in_place, k.disables) for k in report.kit] == [
        ("MLLMModelKit", True, ["model.model.visual"])
    ]


def test_broken_file_does_not_stop_other_recipes(report):
    broken = _recipe(report, "broken_syntax")
    files = sorted(f.file for f in broken.findings if f.rule == "MC000")
    assert files == ["recipes/broken_syntax/configs/bad.yaml", "recipes/broken_syntax/engine/broken_syntax_engine.py"]
    assert len(report.recipes) == len(EXPECTED)


def test_single_recipe_folder_paths_are_relative_to_it():
    report = analyze_path(REPO / "recipes" / "direct_wrapper")
    assert [r.name for r in report.recipes] == ["direct_wrapper"]
    assert all(not f.file.startswith("recipes/") for f in report.recipes[0].findings)
    # the shared kit is named from the repository root, as in a whole-repository run
    assert report.kit and not report.kit[0].file.startswith("../")


def _cli(*args, cwd=ROOT):
    env = {"PYTHONPATH": str(ROOT / "tools"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "model_compile.cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


def test_cli_json_contract():
    proc = _cli("validate", "--soft", str(REPO), "--format", "json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["tool"] == "model-compile" and data["version"]
    for recipe in data["recipes"]:
        assert {"name", "path", "compile_path", "compiled_target", "ledger", "config", "findings"} <= set(recipe)
        for f in recipe["findings"]:
            assert {"rule", "severity", "file", "line", "message", "fix"} <= set(f)
            assert not Path(f["file"]).is_absolute()


def test_cli_exit_codes():
    assert _cli("validate", str(REPO), "--recipe", "kit_canonical").returncode == 0
    assert _cli("validate", str(REPO), "--recipe", "direct_wrapper").returncode == 1
    missing = _cli("validate", str(REPO / "nope"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr


@pytest.mark.parametrize("fmt", ["text", "markdown", "sarif", "github"])
def test_cli_formats(fmt):
    proc = _cli("validate", str(REPO), "--format", fmt)
    assert proc.returncode == 1 and "MC404" in proc.stdout
    if fmt == "sarif":
        run = json.loads(proc.stdout)["runs"][0]
        assert run["results"] and all(r["partialFingerprints"] for r in run["results"])


_CYCLE_CHECK = """
import gc, json, sys
from pathlib import Path
from model_compile.analyze import analyze_path, analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.rules import ALL_RULES  # every rule's examples too: many shapes
from model_compile.rules.scaffold import example_files

repo, demo = Path(sys.argv[1]), Path(sys.argv[2])
gc.collect()
gc.disable()
gc.set_debug(gc.DEBUG_SAVEALL)
analyze_path(repo)
analyze_path(demo)
kit = "class MLLMModelKit:\\n    def apply_model_compile(self, model, backend, mode):\\n        model.compile()\\n"
for rule in ALL_RULES:
    for example in [*rule.VALID, *rule.INVALID]:
        analyze_tree(MemoryTree({"example_engine/kit/mllm/model.py": kit, **example_files(example)}))
gc.collect()
cyclic = list(gc.garbage)
print(json.dumps([len(cyclic), sorted({type(o).__qualname__ for o in cyclic})[:10]]))
"""


def test_analysis_makes_no_reference_cycles():
    """analyze_tree pauses the cycle collector: that is only safe while nothing it builds is a cycle. In a process
    of its own: garbage an earlier test left in this worker (torch's fake tensors, say) is not the analysis's."""
    args = [sys.executable, "-c", _CYCLE_CHECK, str(REPO), str(ROOT / "examples" / "demo_repo")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tools")}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    count, kinds = json.loads(done.stdout.strip().splitlines()[-1])
    assert count == 0, f"{count} objects in reference cycles: {kinds}"
