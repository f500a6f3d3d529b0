"""Which batches the rehearsal's twins train on, decided the same way in every twin and rank.

- `own`: the recipe's data path as it is (its data is on this machine, or it makes its own);
- `rows`: the recipe's data path with only its row source replaced (`rows.py`);
- `batches`: synthetic batches shaped by the stage config (`batches.py`), for a data path that cannot be fed
  here: planned so (the reason comes from the plan), or found so at run time: the rows carried images and the
  first batches the recipe's loader made carried none (its data code dropped every image), in which case the
  vision tower would never run and the rehearsal would rehearse a text-only model.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from typing import Any

from model_compile.runtime.rehearsal.inputs import rows
from model_compile.runtime.rehearsal.inputs.batches import SyntheticBatches, describe_plan
from model_compile.runtime.rehearsal.inputs.seen import Observed
from model_compile.runtime.rehearsal.record import NotHere

PEEK = 2  # batches looked at before the twins decide that the recipe's loader feeds the model what it needs


_VISUAL = re.compile(r"pixel|image|video|frame", re.I)  # pixel_values, pixel_values_videos, video_grid_thw, images


def _has_images(batch: Any) -> bool:
    """Whether a batch carries any visual input: a non-empty tensor under a key that names pixels, images, videos
    or frames, at any depth of dicts and lists (a recipe's own key names included)."""
    import torch

    def visual(value: Any, named: bool) -> bool:
        if isinstance(value, torch.Tensor):
            return named and value.numel() > 0
        if isinstance(value, dict):
            return any(visual(v, named or bool(_VISUAL.search(str(k)))) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return any(visual(v, named) for v in value)
        return False

    return isinstance(batch, dict) and visual(batch, False)


def _raised_in(exc: BaseException) -> dict[str, Any]:
    """What raised in the recipe's data path (for the parent: a sibling library's own error is the environment's)."""
    from model_compile.runtime.rehearsal.blame import raised_in

    try:
        return raised_in(exc, os.getcwd())
    except Exception:  # noqa: BLE001 - the evidence is missing, the fallback is not
        return {}


def _where(exc: BaseException) -> str:
    """`file:line` of the innermost frame outside installed packages (the recipe's or its engine's code)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "site-packages" not in f.filename and "model_compile" not in f.filename]
    chosen = own or list(frames)
    if not chosen:
        return "?"
    last = chosen[-1]
    path = last.filename
    root = os.getcwd().rstrip("/") + "/"
    return f"{path[len(root) :] if path.startswith(root) else path}:{last.lineno}"


class _Replay:
    """The peeked batches first, then the rest of the loader's iterator; a new iteration starts the loader anew."""

    def __init__(self, loader: Any, peeked: list[Any], rest: Any) -> None:
        self.loader, self.peeked, self.rest, self.used = loader, peeked, rest, False

    def __iter__(self) -> Any:
        if not self.used:
            self.used = True
            return itertools.chain(self.peeked, self.rest)
        return iter(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def _vision_tower(model_dir: str | None) -> bool | None:
    """Whether the stand-in's config (written beside its tiny checkpoint) has a vision tower; None not written yet."""
    path = os.path.join(model_dir or "", "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return isinstance(json.load(handle).get("vision_config"), dict)
    except (OSError, ValueError, AttributeError):
        return None


def _config(model_dir: str) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(model_dir, trust_remote_code=True)  # a stand-in of remote code holds its code


class _Deferred(SyntheticBatches):
    """Synthetic batches shaped by a model whose stand-in is made when the recipe loads it (after its data path
    ran): the config is read at the first batch."""

    def __init__(self, model_dir: str, plan: dict[str, Any], seed: int) -> None:  # noqa: D107 - read at __iter__
        self._later = (model_dir, plan, seed)

    def __iter__(self) -> Any:
        if not hasattr(self, "config"):
            model_dir, plan, seed = self._later
            if not os.path.isfile(os.path.join(model_dir, "config.json")):
                raise NotHere(
                    f"synthetic batches need the model's config, and no stand-in of it was made ({model_dir})"
                )
            SyntheticBatches.__init__(self, _config(model_dir), plan, seed)
        return SyntheticBatches.__iter__(self)


class Feed:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.data = dict(spec.get("data") or {})
        self.mode = self.data.get("mode", "own")
        self.facts: dict[str, Any] = {"mode": self.mode, "reason": self.data.get("reason", "")}

    def _synthetic(self, reason: str, failure: str | None = None) -> SyntheticBatches:
        plan = self.data["batches"]
        rank = int(os.environ.get("RANK", "0"))
        self.mode = "batches"
        self.facts.update(mode="batches", reason=reason, batches=describe_plan(plan), failure=failure)
        if os.path.isfile(os.path.join(self.data["model_dir"], "config.json")):
            return SyntheticBatches(_config(self.data["model_dir"]), plan, seed=1000 + rank)
        return _Deferred(self.data["model_dir"], plan, seed=1000 + rank)

    def train_loader(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        """The engine's train loader: the recipe's own whenever it runs here. Where the plan found the stage's
        data missing and its row source not replaceable (`batches`), the recipe's loader is still tried first
        (it may make its own data); synthetic batches stand in only when it fails, and the reason says how."""
        if self.mode != "batches":
            return self.loader(original(*args, **kwargs))
        try:
            loader = original(*args, **kwargs)
            iterator = iter(loader)
            peeked = [next(iterator) for _ in range(PEEK)]
        except Exception as exc:  # noqa: BLE001 - said in the reason; the model still gets batches to train on
            failure = f"{_where(exc)}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            self.facts["raised_in"] = _raised_in(exc)
            if not self.data.get("stand_in") and not os.path.isfile(
                os.path.join(self.data.get("model_dir") or "", "config.json")
            ):
                raise NotHere(
                    f"{self.data.get('reason')}; the recipe's data path failed without it ({failure}), and the "
                    "model is the recipe's own, so no config shapes synthetic batches: supply the stage's data"
                ) from exc
            synthetic = self._synthetic(
                f"{self.data.get('reason')}; the recipe's data path failed without it ({failure})", failure
            )
            return Observed(synthetic, self.facts.setdefault("seen", {}), "tool")
        self.mode = "own"
        self.facts.update(
            mode="own", reason="the stage's data files are not here, and the recipe's data path ran without them"
        )
        return Observed(_Replay(loader, peeked, iterator), self.facts.setdefault("seen", {}), "recipe")

    def loader(self, loader: Any) -> Any:
        """What the engine's train loader is replaced with (itself, unless the data path cannot feed it), seen
        through `Observed`: the batches it hands over are described in the record."""
        chosen = self._loader(loader)
        if chosen is None:
            return None
        source = "tool" if isinstance(chosen, SyntheticBatches) else "recipe"
        return Observed(chosen, self.facts.setdefault("seen", {}), source)

    def _loader(self, loader: Any) -> Any:
        if self.mode == "batches":
            return self._synthetic(self.data.get("reason", "planned"))
        if self.mode != "rows" or loader is None:
            return loader
        try:
            iterator = iter(loader)
            peeked = [next(iterator) for _ in range(PEEK)]
        except Exception as exc:  # noqa: BLE001 - said in the reason; the model still gets batches to train on
            failure = f"{_where(exc)}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            self.facts["starved"] = "yielded no batch" in failure  # it dropped every row (the parent says why)
            self.facts["raised_in"] = _raised_in(exc)
            return self._synthetic(
                f"the recipe's data path failed on the rehearsal's synthetic rows ({failure}); the real run may fail "
                "there too, with the real data and processor in this environment",
                failure,
            )
        tower = _vision_tower(self.data.get("model_dir"))
        if rows.STATE["images"] and not any(_has_images(b) for b in peeked) and not tower:
            # a text model (or one not known yet) reads the rows' text: its batches are the recipe's own
            self.facts["images_unused"] = "the rows' images were not in the batches the recipe's data path made: " + (
                "the model has no vision tower" if tower is False else "the model is known only once built"
            )
        elif rows.STATE["images"] and not any(_has_images(b) for b in peeked):
            read, images = rows.STATE["read"], rows.STATE["images"]
            self.facts["starved"] = True
            return self._synthetic(
                f"the recipe's data path dropped every image: {read} synthetic rows read ({images} images in them) "
                f"made {PEEK} batches with no image, on which its vision tower would never run (each rank's log in "
                "the rehearsal's logs folder says how its data code dropped them); the real run may drop them too, "
                "with the real processor in this environment"
            )
        return _Replay(loader, peeked, iterator)
