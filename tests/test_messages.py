"""What findings say: calls by short form and line, where a value comes from, one error per defect,
and the effect of a schema default."""

from __future__ import annotations

from model_compile.analyze import analyze_tree
from model_compile.discover.tree import MemoryTree
from model_compile.rules.base import Example
from model_compile.rules.placement import _GATED_KIT, _WITHOUT_COMPILE
from model_compile.rules.scaffold import CANONICAL_BODY, SCHEMA, STAGE, example_files, replace_once

KIT = (
    "class MLLMModelKit:\n"
    "    def apply_model_compile(self, model, backend, mode):\n"
    "        model.compile(backend=backend, mode=mode)\n"
    "        return model\n"
)
_CKPT = "if self.config.model.gradient_checkpointing.enabled:\n    model = self.model_kit.apply_gradient_checkpointing(model)\n"


def _findings(example: Example) -> list[tuple[str, int, str]]:
    report = analyze_tree(MemoryTree({"example_engine/kit/mllm/model.py": KIT, **example_files(example)}))
    return [(f.rule, f.line, f.message) for f in report.all_findings()]


def _only(example: Example, rule: str) -> tuple[int, str]:
    hits = [(line, msg) for r, line, msg in _findings(example) if r == rule]
    assert len(hits) == 1, hits
    return hits[0]


def test_order_findings_name_calls_by_short_form_and_line():
    body = replace_once(
        replace_once(CANONICAL_BODY, _CKPT, ""), "return parallelize_model", _CKPT + "return parallelize_model"
    )
    line, msg = _only(Example(body=body), "MC403")
    assert msg.startswith("checkpointing `apply_gradient_checkpointing(...)` (L")
    assert f"(L{line})" in msg and "runs after compile `apply_model_compile(...)` (L" in msg
    assert "self.model_kit" not in msg and "backend=" not in msg  # not the whole call text


def test_mc204_names_the_other_config_field():
    body = replace_once(
        CANONICAL_BODY, "backend=self.config.model.compile.backend", "backend=self.config.optim.compile_backend"
    )
    _, msg = _only(Example(body=body), "MC204")
    assert "backend is read from `optim.compile_backend` instead of `model.compile.backend`" in msg
    assert "hard-coded" not in msg


def test_mc204_says_hard_coded_only_for_a_literal():
    body = replace_once(CANONICAL_BODY, "backend=self.config.model.compile.backend", 'backend="inductor"')
    _, msg = _only(Example(body=body), "MC204")
    assert "backend is hard-coded as 'inductor' instead of `model.compile.backend`" in msg


def test_compile_after_return_is_one_error():
    rules = [r for r, _, _ in _findings(Example(body=_WITHOUT_COMPILE + _GATED_KIT)) if r.startswith(("MC2", "MC4"))]
    assert rules == ["MC405"]


def test_mc203_states_which_stages_get_compile_from_the_default():
    schema = replace_once(SCHEMA, "    enabled: bool = False\n    backend", "    enabled: bool = True\n    backend")
    stage_without = "model:\n  path: x\n"
    _, msg = _only(Example(schema=schema, stages={"stage1": STAGE, "stage2": stage_without}), "MC203")
    assert "stage2 sets no `model.compile.enabled` and gets compile from it today" in msg
    assert "any new stage file without a `compile:` block" in msg
    _, msg = _only(Example(schema=schema, stages={"stage1": STAGE}), "MC203")
    assert "no stage gets compile from the default today (every stage sets false: stage1)" in msg
    assert "any new stage file without a `compile:` block" in msg
