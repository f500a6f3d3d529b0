"""The parity rule on hand-made twins: the compiled twin is held to the eager twin's drift so far."""

from __future__ import annotations

import torch

from model_compile.runtime.rehearsal.measure.parity import _grad_err, compare, envelope, failures, pack, step_of


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


def test_a_bound_wider_than_the_gradients_is_said_to_be_inconclusive() -> None:
    from model_compile.runtime.rehearsal.measure.parity import blind

    noisy = _twin([2.0] * 4, grad_scale=1.0)  # the eager twin itself ~0.7 (relative) from the reference
    parity = compare(_twin([2.0] * 4, grad_scale=-1.0), noisy, REF, "aot_eager")
    assert failures(parity) == []  # the bound lets anything this size through ...
    assert (blind(parity) or "").startswith("the eager twin's own gradients differ from the reference by up to")
    assert blind(compare(_twin([2.0] * 4, grad_scale=3e-3), _twin([2.0] * 4, grad_scale=1e-3), REF, "x")) is None


# -- the saved form: one flat tensor a step, judged per parameter ----------------------------------------------


def _grads(**tensors: torch.Tensor) -> list[dict]:
    return [dict(tensors)]


def _err(mine: list[dict], theirs: list[dict]) -> dict:
    (row,) = _grad_err(pack([step_of(g) for g in mine]), pack([step_of(g) for g in theirs]))
    return row


def test_packed_error_is_the_global_relative_l2_and_names_the_worst_parameter() -> None:
    ref = _grads(a=torch.ones(4), b=torch.full((2, 3), 2.0))
    mine = _grads(a=torch.ones(4), b=torch.full((2, 3), 2.0) + torch.tensor([[0.0, 0.0, 0.3], [0.0, 0.0, 0.0]]))
    row = _err(mine, ref)
    expected = 0.3 / float(torch.cat([torch.ones(4), torch.full((6,), 2.0)]).norm())
    assert abs(row["err"] - expected) < 1e-6 and row["worst"] == "b" and row["compared"] == 2


def test_packed_near_miss_another_order_is_matched_by_name() -> None:
    ref = _grads(a=torch.ones(4), b=torch.full((3,), 2.0))
    mine = _grads(b=torch.full((3,), 2.0), a=torch.ones(4) + torch.tensor([0.0, 0.5, 0.0, 0.0]))
    row = _err(mine, ref)
    assert row["worst"] == "a" and abs(row["err"] - 0.5 / float((4 + 12) ** 0.5)) < 1e-6


def test_packed_invalid_a_size_change_or_a_nan_is_infinite() -> None:
    ref = _grads(a=torch.ones(4), b=torch.ones(3))
    assert _err(_grads(a=torch.ones(4), b=torch.ones(2)), ref) == {
        "step": 0,
        "err": float("inf"),
        "worst": "b",
        "missing": [],
        "compared": 2,
    }
    assert _err(_grads(a=torch.tensor([1.0, float("nan"), 1.0, 1.0]), b=torch.ones(3)), ref)["err"] == float("inf")


def test_packed_valid_equal_twins_and_empty_gradients_are_zero() -> None:
    ref = _grads(a=torch.ones(4), empty=torch.zeros(0), b=torch.ones(3))
    row = _err(_grads(a=torch.ones(4), empty=torch.zeros(0), b=torch.ones(3)), ref)
    assert row["err"] == 0.0 and row["worst"] == ""


def test_packed_a_missing_parameter_is_listed() -> None:
    ref = _grads(a=torch.ones(4), b=torch.ones(3))
    row = _err(_grads(a=torch.ones(4)), ref)
    assert row["missing"] == ["b"] and row["err"] == 0.0


def test_pack_keeps_names_once_unless_the_steps_differ() -> None:
    same = pack([step_of({"a": torch.ones(2)}), step_of({"a": torch.zeros(2)})])
    assert same["names"] == ["a"] and len(same["flat"]) == 2
    differ = pack([step_of({"a": torch.ones(2)}), step_of({"a": torch.ones(2), "b": torch.ones(1)})])
    assert [s["names"] for s in differ["steps"]] == [["a"], ["a", "b"]]
    assert [r["err"] for r in _grad_err(differ, differ)] == [0.0, 0.0]
