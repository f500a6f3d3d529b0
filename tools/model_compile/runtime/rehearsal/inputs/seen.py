"""The batches the model really saw: what the train loader (the recipe's collator, or the tool's synthetic
stream) handed over, described without changing it.

`Observed` wraps the loader the engine iterates: every batch is counted by where it came from (`recipe` or
`tool`), the first ones are described key by key (dtype and shape of each tensor, the type of anything else),
and each batch's samples are counted from what the batch itself says (`pack_segment_ids`, the sequence
boundaries `cu_seqlens`, position ids that restart, or sample counts a collator adds), so the packing the
model saw is measured, whether the stage configures it or the engine hard-codes it. The facts go into the
record under `feed.seen`.
"""

from __future__ import annotations

from typing import Any

DESCRIBED = 3  # batches described key by key (the keys of all are collected)
COUNT_KEYS = ("source_sample_num", "num_source_samples")
BOUNDARY_KEYS = ("cu_seqlens", "cu_seq_lens_q", "cu_seqlens_q")


def describe(batch: Any) -> dict[str, str]:
    """{key: 'dtype shape'} of a batch (a tensor: its dtype and shape; anything else: its type)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return {"(tensor)": f"{str(batch.dtype).replace('torch.', '')} {list(batch.shape)}"}
    if isinstance(batch, (list, tuple)):
        return {f"[{i}]": next(iter(describe(item).values()), "?") for i, item in enumerate(batch[:8])}
    if not isinstance(batch, dict):
        return {"(batch)": type(batch).__name__}
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            out[str(key)] = f"{str(value.dtype).replace('torch.', '')} {list(value.shape)}"
        elif isinstance(value, (list, tuple)):
            out[str(key)] = f"{type(value).__name__} of {len(value)}"
        else:
            out[str(key)] = type(value).__name__
    return out


def samples(batch: Any) -> tuple[int, int, int, str] | None:
    """(rows, samples, most samples in one row, how counted) of one batch, or None when it says nothing countable."""
    import torch

    if isinstance(batch, (list, tuple)):
        first = next((b for b in batch if isinstance(b, torch.Tensor) and b.dim() >= 1), None)
        return (int(first.shape[0]),) * 2 + (1, "one sample a row (a tuple batch)") if first is not None else None
    if not isinstance(batch, dict):
        return None
    ids = next(
        (batch[k] for k in ("input_ids", "pixel_values", "labels") if isinstance(batch.get(k), torch.Tensor)), None
    )
    rows = int(ids.shape[0]) if ids is not None and ids.dim() >= 2 else 1
    # a collator's own counts first; then the boundaries the batch carries (a segment id or position that
    # restarts); segment ids that are all one (attention not isolated) say nothing of the samples in a pack
    for key in COUNT_KEYS:
        count = batch.get(key)
        if isinstance(count, torch.Tensor) and count.numel():
            return rows, int(count.sum()), int(count.max()), key
    seg = batch.get("pack_segment_ids")
    if isinstance(seg, torch.Tensor) and seg.dim() == 2:
        per_row = [int(torch.unique(r[r > 0]).numel()) for r in seg]
        if max(per_row, default=0) > 1:
            return rows, sum(per_row), max(per_row), "pack_segment_ids"
    for key in BOUNDARY_KEYS:
        cu = batch.get(key)
        if isinstance(cu, torch.Tensor) and cu.dim() == 1 and cu.numel() > 1:
            n = int(cu.numel()) - 1
            return rows, n, -(-n // max(rows, 1)), key
    pos = batch.get("position_ids")
    if isinstance(pos, torch.Tensor) and pos.dim() in (2, 3) and ids is not None:
        plane = pos[0] if pos.dim() == 3 else pos
        per_row = [int((r == 0).sum()) for r in plane]
        return rows, sum(per_row), max(per_row, default=0), "position_ids restarting at 0"
    if isinstance(batch.get("input_ids"), torch.Tensor):
        return rows, rows, 1, "one sample a row (no packing metadata)"
    return None


class Observed:
    """The loader as the engine sees it; batches pass through unchanged."""

    def __init__(self, loader: Any, facts: dict[str, Any], source: str) -> None:
        self._loader, self._facts, self._source = loader, facts, source
        facts.setdefault("batches", {})
        facts.setdefault("keys", {})
        facts.setdefault("described", [])
        facts.setdefault("samples", 0)
        facts.setdefault("rows", 0)
        facts.setdefault("most_in_a_row", 0)
        facts.setdefault("counted_by", "")

    def __new__(cls, loader: Any, *args: Any) -> Observed:
        # a loader with a length keeps it (len(), hasattr(loader, "__len__")); one without does not gain one
        sized = cls is Observed and hasattr(type(loader), "__len__")
        return super().__new__(_SizedObserved if sized else cls)

    def __iter__(self) -> _Iterator:
        return _Iterator(iter(self._loader), self)

    def __getattr__(self, name: str) -> Any:
        if name in ("_loader", "_facts", "_source"):  # not set yet (a copy being made): no forwarding loop
            raise AttributeError(name)
        return getattr(self._loader, name)

    def note(self, batch: Any) -> None:
        facts = self._facts
        facts["batches"][self._source] = facts["batches"].get(self._source, 0) + 1
        described = describe(batch)
        for key, what in described.items():
            facts["keys"].setdefault(key, what.split(" ", 1)[0])
        if len(facts["described"]) < DESCRIBED:
            facts["described"].append({"source": self._source, "keys": described})
        counted = samples(batch)
        if counted is not None:
            rows, n, most, how = counted
            facts["rows"] += rows
            facts["samples"] += n
            facts["most_in_a_row"] = max(facts["most_in_a_row"], most)
            facts["counted_by"] = facts["counted_by"] or how


class _SizedObserved(Observed):
    def __len__(self) -> int:
        return len(self._loader)


class _Iterator:
    def __init__(self, inner: Any, owner: Observed) -> None:
        self._inner, self._owner = inner, owner

    def __iter__(self) -> _Iterator:
        return self

    def __next__(self) -> Any:
        batch = next(self._inner)
        try:
            self._owner.note(batch)
        except Exception:  # noqa: BLE001, S110 - describing a batch never stops the recipe's run
            pass
        return batch

    def __getattr__(self, name: str) -> Any:
        if name in ("_inner", "_owner"):
            raise AttributeError(name)
        return getattr(self._inner, name)
