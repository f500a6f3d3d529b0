"""The parity rule on hand-made twins: the compiled twin is held to the eager twin's drift so far."""

from __future__ import annotations

import torch

from model_compile.runtime.rehearsal.parity import compare, envelope, failures


def _twin(losses: list[float], grad_scale: float = 0.0) -> dict:
    base = torch.linspace(1.0, 2.0, 16)
    return {"grads": [{"w": base + grad_scale * torch.ones(16)}], "losses": losses}


REF = _twin([2.0, 2.0, 2.0, 2.0])


def test_envelope_keeps_the_largest_error_so_far() -> None:
    assert envelope([1e-4, 1e-6, 3e-4, 2e-5]) == [1e-4, 1e-4, 3e-4, 3e-4]
    assert envelope([]) == []


def test_valid_a_step_where_eager_landed_on_the_reference_by_luck() -> None:
    # eager drifts 1e-4 relative, then lands on the reference (1e-6); compiled drifts like eager did before
    eager = _twin([2.0 * (1 + 1e-4), 2.0 * (1 + 1e-6), 2.0 * (1 + 1e-4), 2.0])
    compiled = _twin([2.0 * (1 + 1e-4), 2.0 * (1 + 2e-4), 2.0 * (1 + 1e-4), 2.0])
    parity = compare(compiled, eager, REF, "aot_eager")
    assert failures(parity) == []
    assert "largest error so far" in parity["rule"]


def test_invalid_compiled_drift_above_every_eager_step() -> None:
    eager = _twin([2.0 * (1 + 1e-4), 2.0 * (1 + 1e-6), 2.0, 2.0])
    compiled = _twin([2.0, 2.0 * (1 + 5e-4), 2.0, 2.0])  # 5e-4 > 3 x 1e-4 + 1e-4
    (why,) = failures(compare(compiled, eager, REF, "aot_eager"))
    assert why == "loss differs at micro-step 1: 5.00e-04 > 4.00e-04; eager 1.00e-06, at most 1.00e-04 so far"


def test_invalid_near_miss_the_envelope_looks_back_not_ahead() -> None:
    # eager's large drift comes after the step the compiled twin drifts at: it does not cover it
    eager = _twin([2.0, 2.0 * (1 + 1e-3), 2.0, 2.0])
    compiled = _twin([2.0 * (1 + 2e-4), 2.0, 2.0, 2.0])
    (why,) = failures(compare(compiled, eager, REF, "aot_eager"))
    assert why.startswith("loss differs at micro-step 0: 2.00e-04 > 1.00e-04; eager 0.00e+00")


def test_gradients_use_the_same_envelope() -> None:
    eager = _twin([2.0] * 4, grad_scale=1e-3)
    inside = _twin([2.0] * 4, grad_scale=3e-3)
    outside = _twin([2.0] * 4, grad_scale=6e-3)
    assert failures(compare(inside, eager, REF, "aot_eager")) == []
    (why,) = failures(compare(outside, eager, REF, "aot_eager"))
    assert why.startswith("gradients differ at optimizer step 0:") and "(worst: w)" in why
