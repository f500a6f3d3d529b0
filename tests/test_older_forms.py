"""Older recipe forms, as the reference repository's history has them: the flat `compile: bool` switch with
`compile_backend`/`compile_mode`, a prose reason above a graph-break region, a teacher model kept and compiled
for distillation, and a repository without a model kit. One finding per defect, and no false sentence."""

from __future__ import annotations

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.render.text import inspect_text
from model_compile.rules.base import Example
from model_compile.rules.scaffold import (
    CANONICAL_BODY,
    FLAT_BODY,
    FLAT_SCHEMA,
    FLAT_STAGE,
    example_files,
    replace_once,
)

KIT = (
    "class MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)
FLAT_ON = replace_once(FLAT_STAGE, "compile: false", "compile: true")
PROSE = (
    "if self.config.model.compile:\n"
    "    # The vision encoder computes data-dependent lengths dynamo cannot trace;\n"
    "    # wrapping its forward in compiler.disable runs it eagerly.\n"
    "    if hasattr(model, 'model') and hasattr(model.model, 'visual'):\n"
    "        model.model.visual.forward = torch.compiler.disable(model.model.visual.forward)\n"
    "    model.compile(backend=self.config.model.compile_backend, mode=self.config.model.compile_mode)\n"
)
OLD_BODY = (
    "model = build_model(self.config.model)\n"
    + PROSE
    + "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
)


def _report(example: Example, kit: bool = True):
    files = dict(example_files(example))
    if kit:
        files["example_engine/kit/mllm/model.py"] = KIT
    return analyze_tree(MemoryTree(files))


def _rules(report) -> list[str]:
    return [f.rule for f in report.all_findings()]


def test_flat_form_is_one_warning_and_no_wiring_error():
    report = _report(Example(body=FLAT_BODY, schema=FLAT_SCHEMA, stages={"stage1": FLAT_STAGE, "stage2": FLAT_ON}))
    rules = _rules(report)
    assert rules.count("MC206") == 1 and "MC204" not in rules and "MC201" not in rules
    mc206 = next(f for f in report.all_findings() if f.rule == "MC206")
    assert "`ExampleModelConfig.compile` is `bool` with `compile_backend` and `compile_mode` beside it" in mc206.message
    assert (
        "gates `apply_model_compile(...)` (L" in mc206.message
        and "stage YAMLs in this form: stage1, stage2" in mc206.message
    )
    assert "compile: {enabled, backend, mode}" in mc206.fix
    # the flat `compile: true` is stage2's switch: MC203 asks for its intent, and only there
    assert [f.file for f in report.all_findings() if f.rule == "MC203"] == ["recipes/example/configs/stage2.yaml"]


def test_flat_form_is_read_by_inspect_as_the_stage_switch():
    report = _report(Example(body=FLAT_BODY, schema=FLAT_SCHEMA, stages={"train": FLAT_ON}))
    stage = report.recipes[0].config.stages[0]
    assert stage.form == "flat" and stage.values == {"enabled": True, "backend": "inductor", "mode": "default"}
    text = inspect_text(report)
    assert "stage train (flat form): compile=True, compile_backend='inductor', compile_mode='default'" in text
    assert "is `bool` (the older flat form)" in text


def test_a_flat_call_with_a_section_schema_is_one_error_naming_each_part():
    report = _report(Example(body=FLAT_BODY))
    mc204 = [f for f in report.all_findings() if f.rule == "MC204"]
    assert len(mc204) == 1, [f.message for f in mc204]
    msg = mc204[0].message
    assert "is not gated by model.compile.enabled" in msg
    assert "backend is read from `model.compile_backend` instead of `model.compile.backend`" in msg
    assert "mode is read from `model.compile_mode`" in msg


def test_prose_reason_and_no_kit_fix_on_the_old_openbee_shape():
    schema = FLAT_SCHEMA.replace(
        "class ExampleConfig", "def build_model(cfg):\n    return cfg\n\n\nclass ExampleConfig"
    )
    report = _report(Example(body=OLD_BODY, schema=schema, stages={"train": FLAT_ON}), kit=False)
    rules = _rules(report)
    assert "MC102" not in rules  # the five-line prose comment above the `if` is its reason
    assert "MC204" not in rules and rules.count("MC206") == 1
    mc101 = next(f for f in report.all_findings() if f.rule == "MC101")
    assert "no model kit" in mc101.message and "model_kit" not in mc101.fix and "apply_model_compile(" not in mc101.fix


def test_generate_hints_name_only_what_the_repository_has():
    body = "model = build_model(self.config.model)\nreturn parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
    schema = replace_once(
        FLAT_SCHEMA,
        '    compile: bool = False\n    compile_backend: str = "inductor"\n    compile_mode: str = "default"\n',
        "",
    )
    stage = replace_once(FLAT_STAGE, "  compile: false\n  compile_backend: inductor\n  compile_mode: default\n", "")
    without = next(
        f
        for f in _report(Example(body=body, schema=schema, stages={"train": stage}), kit=False).all_findings()
        if f.rule == "MC100"
    )
    assert "--path kit" not in without.fix and "no model kit" in without.fix
    with_kit = next(
        f
        for f in _report(Example(body=body, schema=schema, stages={"train": stage})).all_findings()
        if f.rule == "MC100"
    )
    assert with_kit.fix.endswith("--path kit")


def test_a_teacher_compiled_and_kept_for_distillation_is_no_copy():
    body = replace_once(
        CANONICAL_BODY,
        "return parallelize_model(model, parallel_mesh=self.parallel_mesh)\n",
        "self.teacher_model = copy.deepcopy(model)\n"
        "model = parallelize_model(model, parallel_mesh=self.parallel_mesh)\n"
        "if self.config.model.compile.enabled:\n"
        "    # model-compile: post-wrap - the teacher runs forward only\n"
        "    self.teacher_model = torch.compile(self.teacher_model, backend=self.config.model.compile.backend, "
        "mode=self.config.model.compile.mode)\n"
        "return model\n",
    )
    assert "MC301" not in _rules(_report(Example(body=body)))


def test_planned_smoke_commands_switch_the_flat_form_as_it_is_spelled():
    from model_compile.report.build import _in_form
    from model_compile.report.models import LayerRow

    row = LayerRow(
        name="smoke",
        status="not-run",
        where="-",
        command="python -m pytest t.py --config-override model.compile.enabled=true",
        commands=["python -m pytest t.py --config-name s2 --config-override model.compile.enabled=true"],
    )
    flat = _in_form(row.model_copy(deep=True), "flat")
    assert flat.command.endswith("model.compile=true") and flat.commands[0].endswith("model.compile=true")
    assert _in_form(row.model_copy(deep=True), "section").command == row.command
