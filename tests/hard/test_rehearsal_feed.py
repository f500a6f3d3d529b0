"""Which batches the twins train on: the recipe's loader as it is, or synthetic batches with the reason why."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from model_compile.runtime.rehearsal.inputs import feed, rows


@pytest.fixture
def reasons(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(feed.Feed, "_synthetic", lambda self, reason, failure=None: seen.append(reason) or "synthetic")
    monkeypatch.setattr(rows, "STATE", {"read": 12, "images": 9, "batches": 2})
    return seen


def _rows_feed(model_dir: Any = None) -> feed.Feed:
    data = {"mode": "rows", "reason": "the stage's data is not here", "model_dir": str(model_dir or "")}
    return feed.Feed({"data": data})


def _stand_in(tmp_path: Any, vision: bool) -> Any:
    import json

    config = {"model_type": "qwen3_vl", "vision_config": {"depth": 2}} if vision else {"model_type": "qwen3"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def _batch(images: bool) -> dict[str, Any]:
    out = {"input_ids": torch.ones(1, 8, dtype=torch.long)}
    if images:
        out["pixel_values"] = torch.ones(16, 3)
    return out


def test_a_loader_that_dropped_every_image_gives_way_to_synthetic_batches_and_says_why(
    reasons: list[str], tmp_path: Any
) -> None:
    fed = _rows_feed(_stand_in(tmp_path, vision=True))
    assert fed._loader([_batch(False), _batch(False), _batch(False)]) == "synthetic"
    (reason,) = reasons
    assert "dropped every image: 12 synthetic rows read (9 images in them)" in reason
    assert "logs folder" in reason and "the real run may drop them too" in reason


def test_a_loader_whose_batches_carry_images_is_the_recipes_own_and_replays_what_was_peeked(
    reasons: list[str],
) -> None:
    batches = [_batch(True), _batch(False), _batch(True)]
    fed = _rows_feed().loader(batches)
    assert reasons == []
    assert [("pixel_values" in b) for b in fed] == [True, False, True]  # nothing lost to the peek
    assert len(list(fed)) == 3  # a second pass starts the loader anew


def test_a_loader_that_raises_is_named_by_where_it_failed(reasons: list[str]) -> None:
    def broken() -> Any:
        raise ValueError("Image processor must expose a positive integer min pixel budget.")
        yield  # a generator

    class Loader:
        def __iter__(self) -> Any:
            return broken()

    assert _rows_feed()._loader(Loader()) == "synthetic"
    (reason,) = reasons
    assert "failed on the rehearsal's synthetic rows" in reason
    assert "ValueError: Image processor must expose a positive integer min pixel budget." in reason
    assert "test_rehearsal_feed.py:" in reason  # the innermost frame outside installed packages


def test_the_batches_handed_over_are_described_and_pass_unchanged(reasons: list[str]) -> None:
    """The engine's loader is seen through: keys, dtypes, shapes, the source and the samples of each batch."""
    packed = {
        "input_ids": torch.ones(1, 8, dtype=torch.long),
        "pack_segment_ids": torch.tensor([[1, 1, 2, 2, 2, 3, 0, 0]]),
    }
    fed = feed.Feed({"data": {"mode": "own"}})
    batches = list(fed.loader([packed, _batch(True)]))
    assert batches[0] is packed and len(batches) == 2
    seen = fed.facts["seen"]
    assert seen["batches"] == {"recipe": 2} and seen["most_in_a_row"] == 3 and seen["counted_by"] == "pack_segment_ids"
    assert seen["described"][0]["keys"] == {"input_ids": "int64 [1, 8]", "pack_segment_ids": "int64 [1, 8]"}
    assert seen["keys"] == {"input_ids": "int64", "pack_segment_ids": "int64", "pixel_values": "float32"}


def test_a_planned_substitution_tries_the_recipes_own_loader_first(reasons: list[str]) -> None:
    fed = feed.Feed({"data": {"mode": "batches", "reason": "the stage's data is not here (data.path: x)"}})
    own = fed.train_loader(lambda *_: [_batch(False), _batch(False), _batch(False)], "train")
    assert reasons == [] and fed.mode == "own" and len(list(own)) == 3  # it makes its own data: used as it is

    def missing(*_: Any) -> Any:
        raise FileNotFoundError("x")

    fed = feed.Feed({"data": {"mode": "batches", "reason": "the stage's data is not here (data.path: x)"}})
    with pytest.raises(feed.NotHere, match="no config shapes synthetic batches"):  # nothing to shape them from
        fed.train_loader(missing, "train")


def test_samples_in_a_pack_come_from_the_collators_counts_before_segment_ids_that_say_nothing() -> None:
    from model_compile.runtime.rehearsal.inputs.seen import samples

    stream = {"input_ids": torch.ones(1, 6, dtype=torch.long), "pack_segment_ids": torch.ones(1, 6, dtype=torch.long)}
    assert samples(stream) == (1, 1, 1, "one sample a row (no packing metadata)")  # attention not isolated
    stream["source_sample_num"] = torch.tensor([3])
    assert samples(stream) == (1, 3, 3, "source_sample_num")
    restarts = {
        "input_ids": torch.ones(2, 4, dtype=torch.long),
        "position_ids": torch.tensor([[0, 1, 0, 1], [0, 1, 2, 3]]),
    }
    assert samples(restarts) == (2, 3, 2, "position_ids restarting at 0")


def test_visual_inputs_are_found_under_any_key_that_names_them() -> None:
    """A recipe's own key (`pixel_values_videos`, nested media) counts as images; an empty tensor does not."""
    import torch

    from model_compile.runtime.rehearsal.inputs.feed import _has_images

    ids = torch.ones(1, 8, dtype=torch.long)
    assert _has_images({"input_ids": ids, "pixel_values_videos": torch.ones(196, 3, 16, 16)})
    assert _has_images({"input_ids": ids, "media": {"video_frames": [torch.ones(2, 3, 8, 8)]}})
    assert not _has_images({"input_ids": ids, "pixel_values": torch.ones(0, 3)})
    assert not _has_images({"input_ids": ids, "labels": ids})


@pytest.mark.parametrize("vision", [False, None])
def test_a_text_model_or_one_not_built_yet_keeps_the_recipes_batches_without_images(
    reasons: list[str], tmp_path: Any, vision: bool | None
) -> None:
    """qwen3 (text only) was told its data path dropped every image 'on which its vision tower would never run'
    and trained on synthetic batches instead of the recipe's own."""
    fed = _rows_feed(_stand_in(tmp_path, vision=False) if vision is False else tmp_path / "not-written")
    batches = fed.loader([_batch(False), _batch(False), _batch(False)])
    assert reasons == [] and len(list(batches)) == 3
    said = "the model has no vision tower" if vision is False else "the model is known only once built"
    assert fed.facts["images_unused"].endswith(said)
