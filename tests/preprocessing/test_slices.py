"""A slice of the plan's shards: only its own shard numbers, and a record read back checked."""

from __future__ import annotations

import pytest

from components.preprocessing.config import PreprocessConfig
from components.preprocessing.decoder import Decoder
from components.preprocessing.plan import make_plan
from components.preprocessing.slices import decode_slice, read_slice, write_slice
from tests.support.helpers import write_jpeg


def test_a_slice_writes_its_own_shards_and_leaves_out_a_test_photo_that_does_not_decode(tmp_path):
    root = tmp_path / "in"
    for i in range(40):
        write_jpeg(root / "train" / f"cat.{i}.jpg", seed=i)
        write_jpeg(root / "train" / f"dog.{i}.jpg", seed=100 + i)
    cfg = PreprocessConfig(input=str(root), output=str(tmp_path / "o"), image_size=8, workers=1)
    with Decoder(cfg, 20) as decoder:
        plan = make_plan(cfg, decoder, slices=2)
        plan.per_shard = 20
        broken = plan.files[plan.splits["test"][0]]  # truncated after it was hashed
        (root / broken).write_bytes((root / broken).read_bytes()[:100])
        out = tmp_path / "slice1"
        out.mkdir()
        second = decode_slice(plan, 1, root, out, decoder)
        out0 = tmp_path / "slice0"
        out0.mkdir()
        first = decode_slice(plan, 0, root, out0, decoder)
    assert [s.number for s in second.shards["train"]] == [1, 3]  # 64 train photos: 4 shards
    assert [s.number for s in first.shards["train"]] == [0, 2]
    assert sorted(p.name for p in out.glob("train_images_*")) == [
        "train_images_00001.npy",
        "train_images_00003.npy",
    ]
    (test,) = first.shards["test"]  # the test share: one shard, slice 0's
    planned = [plan.files[row] for row in plan.splits["test"]]
    assert test.files == planned[1:]  # left out, not replaced: test holds its share alone
    (skipped,) = first.skipped
    assert skipped["file"] == broken and "truncated" in skipped["reason"]
    train_files = {f for s in first.shards["train"] + second.shards["train"] for f in s.files}
    assert len(train_files) == len(plan.splits["train"])  # no train photo taken as a spare
    write_slice(first, out0)
    assert read_slice(out0) == first


def test_a_slice_record_that_is_not_one_is_refused(tmp_path):
    (tmp_path / "slice.json").write_text('{"shards": {"train": [{"number": 1}]}}')
    with pytest.raises(ValueError, match="expected slice.json of a preprocess slice step"):
        read_slice(tmp_path)
