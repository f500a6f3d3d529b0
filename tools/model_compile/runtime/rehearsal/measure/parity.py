"""Parity of the compiled twin, judged against a measured noise floor.

The twins train the same steps on the same batches from the same initial weights. The reference twin runs
eager in full precision: fp32 with autocast off for a recipe that trains in bf16/fp16, float64 for one that
trains in fp32 (where the recipe's code runs in float64; else the eager twin is the reference and a fixed
fp32 tolerance applies). The eager twin runs eager in the recipe's own precision, the compiled twin compiled.
For each optimizer step, a twin's gradient error is ||g - ref|| / ||ref|| over all parameters at once (the
parameter that contributes most is named); for each micro-step its loss error is |loss - ref| / |ref|. The
compiled twin passes when its error is at most MULTIPLIER times the eager twin's plus FLOOR, the way PyTorch's
own accuracy checks judge a compiled result against an fp64 reference: a bf16 recipe is held to the drift
bf16 already has, not to an fp32 tolerance. The eager twin's error at a step is its largest up to that step
(an envelope): drift builds up over the steps, and one micro-step where eager happened to land on the
reference (1e-6 where its others are 1e-4) is luck, not the noise floor.
"""

from __future__ import annotations

from typing import Any

MULTIPLIER = 3.0
FLOOR = 1e-4  # relative: what two fp32 kernel orders may differ by on a tiny model
# without a float64 reference: what fp32 kernels of another order drift by over a few optimizer steps
FP32_TOLERANCE = {"eager": 1e-4, "aot_eager": 1e-4, "inductor": 1e-3}


def rel_err(a: Any, b: Any) -> float:
    """max|a - b| / max|b| (0 for two empty or all-zero tensors; inf for a shape change or a non-finite value)."""
    import torch

    if a.shape != b.shape:
        return float("inf")
    if not a.numel():
        return 0.0
    diff = (a.float() - b.float()).abs().max().item()
    if not torch.isfinite(torch.tensor(diff)):
        return float("inf")
    scale = b.float().abs().max().item()
    return diff / max(scale, 1e-12) if diff else 0.0


def step_of(grad: dict[str, Any]) -> dict[str, Any]:
    """One optimizer step's gradients (name -> tensor) in the saved form: names, sizes, one flat tensor."""
    import torch

    flat = torch.cat([t.reshape(-1) for t in grad.values()]) if grad else torch.zeros(0)
    return {"names": list(grad), "sizes": [int(t.numel()) for t in grad.values()], "flat": flat}


def pack(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A twin's gradients as saved: one flat tensor an optimizer step (`step_of`'s form, as the driver takes
    them), the parameter names and sizes once when every step has the same (the usual case).

    Thousands of small tensors cost a second to pickle and unpickle; a few flat ones cost milliseconds, and the
    error of each parameter is then a segment of one vector operation."""
    if steps and all(s["names"] == steps[0]["names"] and s["sizes"] == steps[0]["sizes"] for s in steps):
        return {"names": steps[0]["names"], "sizes": steps[0]["sizes"], "flat": [s["flat"] for s in steps]}
    return {"steps": steps}


def _steps(packed: Any) -> list[tuple[list[str], list[int], Any]]:
    """(names, sizes, flat) each optimizer step, from a packed form or a list of name -> tensor dicts."""
    if isinstance(packed, list):  # name -> tensor dicts, one a step
        packed = pack([step_of(grad) for grad in packed])
    if "steps" in packed:
        return [(s["names"], s["sizes"], s["flat"]) for s in packed["steps"]]
    return [(packed["names"], packed["sizes"], flat) for flat in packed["flat"]]


def _grad_err(grads: Any, ref: Any) -> list[dict[str, Any]]:
    """Per optimizer step: ||g - ref|| / ||ref|| over every parameter's gradient at once (a global relative L2
    error: a parameter whose gradient is all rounding noise cannot dominate it), and the parameter whose
    difference is the largest part of it."""
    import torch

    out = []
    for i, (mine, theirs) in enumerate(zip(_steps(grads), _steps(ref), strict=False)):
        names, sizes, flat = mine
        t_names, t_sizes, t_flat = theirs
        where = {name: (size, at) for name, size, at in zip(t_names, t_sizes, _offsets(t_sizes), strict=True)}
        shape_change, pairs, kept = "", [], []  # pairs: (my offset, their offset, size) of each compared one
        for name, size, at in zip(names, sizes, _offsets(sizes), strict=True):
            other = where.get(name)
            if other is None:
                continue
            if other[0] != size:
                shape_change = name
            elif size:  # an empty gradient adds nothing
                pairs.append((at, other[1], size))
                kept.append(name)
        err, name = 0.0, ""
        if kept:
            if names == t_names and sizes == t_sizes:  # the same parameters in the same order: no gather
                a, b = flat, t_flat
            else:
                a = flat[torch.cat([torch.arange(m, m + n) for m, _, n in pairs])]
                b = t_flat[torch.cat([torch.arange(t, t + n) for _, t, n in pairs])]
            # float64 copies, worked in place: two temporaries the size of the gradients, whatever their count
            a, b = a.to(torch.float64, copy=True), b.to(torch.float64, copy=True)
            per_param = torch.segment_reduce(a.sub_(b).square_(), "sum", lengths=torch.tensor([n for _, _, n in pairs]))
            diff_sq, ref_sq = float(per_param.sum()), float(b.square_().sum())
            err = (diff_sq**0.5) / max(ref_sq**0.5, 1e-30) if diff_sq else 0.0
            if diff_sq:
                name = kept[int(per_param.argmax())]
        if shape_change or not (err == err and err != float("inf")):
            err = float("inf")
        missing = sorted(set(t_names) - set(names))
        out.append(
            {"step": i, "err": err, "worst": shape_change or name, "missing": missing[:5], "compared": len(names)}
        )
    return out


def _offsets(sizes: list[int]) -> list[int]:
    out, at = [], 0
    for size in sizes:
        out.append(at)
        at += size
    return out


def _loss_err(losses: list[float], ref: list[float]) -> list[float]:
    return [abs(a - b) / max(abs(b), 1e-12) if a != b else 0.0 for a, b in zip(losses, ref, strict=False)]


def compare(
    compiled: dict[str, Any],
    eager: dict[str, Any],
    reference: dict[str, Any] | None,
    backend: str,
    ref_dtype: str = "float32",
) -> dict[str, Any]:
    """Per-step errors of the compiled twin (and of the eager twin, when there is a reference) and the bound."""
    ref = reference if reference is not None else eager
    c_grads = _grad_err(compiled["grads"], ref["grads"])
    c_loss = _loss_err(compiled["losses"], ref["losses"])
    out: dict[str, Any] = {
        "reference": f"the {ref_dtype} eager twin"
        if reference is not None
        else "the eager twin (the recipe trains in fp32)",
        "steps": len(c_grads),
        "micro_steps": len(c_loss),
        "compiled": {"grads": c_grads, "loss": c_loss},
    }
    if len(compiled["grads"]) != len(ref["grads"]) or len(compiled["losses"]) != len(ref["losses"]):
        out["count_mismatch"] = (
            f"compiled took {len(compiled['grads'])} optimizer steps / {len(compiled['losses'])} losses, "
            f"the reference {len(ref['grads'])} / {len(ref['losses'])}"
        )
    if reference is None:
        tol = FP32_TOLERANCE.get(backend, FP32_TOLERANCE["inductor"])
        out["rule"] = f"fixed fp32 tolerance {tol:g} ({backend})"
        out["bounds"] = {"grads": [tol] * len(c_grads), "loss": [tol] * len(c_loss)}
        return out
    e_grads = _grad_err(eager["grads"], reference["grads"])
    e_loss = _loss_err(eager["losses"], reference["losses"])
    out["eager"] = {"grads": e_grads, "loss": e_loss}
    out["rule"] = (
        f"compiled error <= {MULTIPLIER:g} x the eager twin's largest error so far + {FLOOR:g}, "
        f"both against the {ref_dtype} reference"
    )
    out["bounds"] = {
        "grads": [MULTIPLIER * e + FLOOR for e in envelope([e["err"] for e in e_grads])],
        "loss": [MULTIPLIER * e + FLOOR for e in envelope(e_loss)],
    }
    return out


def envelope(errors: list[float]) -> list[float]:
    """The largest error up to each step: the noise floor a later step is held to."""
    out: list[float] = []
    for err in errors:
        out.append(max(err, out[-1]) if out else err)
    return out


BLIND = 0.3  # the eager twin's own relative gradient error from which a bound of MULTIPLIER x it tells nothing


def blind(parity: dict[str, Any]) -> str | None:
    """Why the bound cannot tell a wrong compiled run from a right one, or None: when the eager twin's own
    gradients are this far from the reference (low precision at a tiny width), MULTIPLIER x that error admits
    gradients that share next to nothing with the reference."""
    eager = [e["err"] for e in (parity.get("eager") or {}).get("grads", []) if e.get("err") is not None]
    worst = max(eager, default=0.0)
    if worst < BLIND:
        return None
    return (
        f"the eager twin's own gradients differ from the reference by up to {worst:.2e} (relative), so the bound "
        f"({MULTIPLIER:g} x that) admits gradients that share little with it: parity is inconclusive here; rerun "
        "with the recipe's precision set to fp32 (--config-override) to judge it"
    )


def failures(parity: dict[str, Any]) -> list[str]:
    """Why the compiled twin's numbers are outside the bound (empty when inside, or when nothing was compared)."""
    out: list[str] = []
    if not parity.get("compiled"):
        return out
    if parity.get("count_mismatch"):
        out.append(f"the twins did not take the same steps: {parity['count_mismatch']}")
    bounds = parity.get("bounds") or {}
    for i, (row, bound) in enumerate(zip(parity["compiled"]["grads"], bounds.get("grads", []), strict=False)):
        if row["err"] > bound:
            eager = [e["err"] for e in parity.get("eager", {}).get("grads", [])]
            floor = _floor(eager, i)
            out.append(
                f"gradients differ at optimizer step {i}: {row['err']:.2e} > {bound:.2e}{floor} (worst: {row['worst']})"
            )
            break
    for i, (err, bound) in enumerate(zip(parity["compiled"]["loss"], bounds.get("loss", []), strict=False)):
        if err > bound:
            floor = _floor(parity.get("eager", {}).get("loss", []), i)
            out.append(f"loss differs at micro-step {i}: {err:.2e} > {bound:.2e}{floor}")
            break
    return out


def _floor(eager: list[float], i: int) -> str:
    """`; eager 1.2e-06, at most 3.3e-04 so far`: the eager twin's error there and the envelope the bound used."""
    if i >= len(eager):
        return ""
    most = envelope(eager[: i + 1])[-1]
    return f"; eager {eager[i]:.2e}" + (f", at most {most:.2e} so far" if most > eager[i] else "")
