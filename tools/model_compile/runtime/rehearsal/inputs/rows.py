"""Feeding the recipe's own data path without its data: only the row source is replaced.

When the stage's data files are not on this machine, the rows the recipe's source would read are replaced by
the rehearsal's synthetic rows (`assets.write_rows`), and everything after the source runs as the recipe
wrote it: its row guards, sample assembly and tokenisation, packer, model-input guard, collator and loader.

The one row source recognised is the `mvp_dataset` library's `Dataset.from_source` (the reference engine's
data kits and its recipe-local datasets call it): it is swapped, for this child process only, for a dataset
of the synthetic rows, sharded over data-parallel ranks as the library shards (by the context's slot) and
repeated when the recipe asks for resampling. A call whose path exists keeps the real source. Media ride in
the rows (image paths), so `resolve_ref` has nothing to resolve.
"""

from __future__ import annotations

import os
from typing import Any

from model_compile.runtime.rehearsal.inputs.assets import read_rows

SOURCE = "mvp_dataset.Dataset.from_source"
# rows read and images in them, per process; `batches` is set by the loop driver (micro-steps begun)
STATE: dict[str, int] = {"read": 0, "images": 0, "batches": 0}
# read this many times the synthetic rows without one batch reaching the model, the data path drops them all
STARVED = 20


class RowSourceUnavailable(Exception):
    """The recipe's row source is not one this module can replace."""


def install(rows_path: str) -> dict[str, Any]:
    """Swap the row source; returns a counter the record reads (calls replaced, paths asked for)."""
    try:
        import mvp_dataset
        from mvp_dataset.core.dataset import Dataset
    except ImportError as exc:
        raise RowSourceUnavailable(f"mvp_dataset does not import here ({exc})") from exc

    rows = read_rows(rows_path)
    seen: dict[str, Any] = {"replaced": 0, "paths": [], "kept": []}
    original = Dataset.from_source.__func__
    synthetic_cls = _synthetic_class(Dataset)

    def from_source(cls: Any, source_kind: Any, *args: Any, **kwargs: Any) -> Any:
        path = args[0] if args else kwargs.get("path") or kwargs.get("shards") or kwargs.get("dataset_path")
        if isinstance(path, str) and os.path.exists(path):
            seen["kept"].append(path)
            return original(cls, source_kind, *args, **kwargs)
        from mvp_dataset.core import RuntimeContext

        context = kwargs.get("context") or RuntimeContext.from_runtime()
        seen["replaced"] += 1
        seen["paths"].append(f"{source_kind}:{path}")
        return synthetic_cls(
            context=context,
            _source_kind="synthetic",
            _source=tuple(rows),
            _stages=(),
            _resample=bool(kwargs.get("resample", False)),
        )

    Dataset.from_source = classmethod(from_source)
    mvp_dataset.Dataset.from_source = Dataset.from_source
    return seen


def _synthetic_class(base: type) -> type:
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class SyntheticRows(base):
        """The rehearsal's rows in place of the recipe's source."""

        def _build_source_stream(self, *, context: Any) -> Any:
            return _RowIterator(self._source, context.slot, context.total_slots, self._resample)

        def _source_fingerprint(self) -> dict[str, object]:
            return {"kind": "model-compile-synthetic", "rows": len(self._source)}

        def resolve_ref(self, *args: Any, **kwargs: Any) -> Any:
            return self  # media are image paths in the rows: nothing to resolve

    return SyntheticRows


class _RowIterator:
    """Rows `slot, slot + total, ...`, cycled when resampling (the library's StatefulIterator protocol)."""

    def __init__(self, rows: tuple[dict[str, Any], ...], slot: int, total: int, resample: bool) -> None:
        self.rows = [r for i, r in enumerate(rows) if i % max(total, 1) == slot] or list(rows)
        self.resample = resample
        self.index = 0

    def __iter__(self) -> _RowIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        if self.index >= len(self.rows):
            if not self.resample:
                raise StopIteration
            self.index = 0
        row = self.rows[self.index]
        self.index += 1
        STATE["read"] += 1
        STATE["images"] += len(row.get("images") or [])
        if STATE["batches"] == 0 and STATE["read"] > STARVED * max(len(self.rows), 1):
            raise RuntimeError(
                f"the recipe's data path yielded no batch from {STATE['read']} synthetic rows "
                f"({STATE['images']} images in them): its data code dropped every one (see its log)"
            )
        return dict(row)

    def state_dict(self) -> dict[str, object]:
        return {"index": self.index}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.index = int(state.get("index", 0))  # type: ignore[call-overload]

    def fingerprint(self) -> str:
        return f"model-compile-synthetic:{len(self.rows)}"
