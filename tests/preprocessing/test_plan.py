"""The preprocess plan: files hashed once, the split drawn, shards cut, read back checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.preprocessing.config import PreprocessConfig
from components.preprocessing.decoder import Decoder
from components.preprocessing.plan import make_plan, read_plan, write_plan
from tests.support.helpers import write_jpeg


@pytest.fixture
def planned(tmp_path):
    root = tmp_path / "in"
    for i in range(30):
        write_jpeg(root / "train" / f"cat.{i}.jpg", seed=i)
        write_jpeg(root / "train" / f"dog.{i}.jpg", seed=100 + i)
    (root / "train" / "cat.999.jpg").write_bytes((root / "train" / "cat.3.jpg").read_bytes())
    cfg = PreprocessConfig(input=str(root), output=str(tmp_path / "out"), image_size=8, workers=1)
    with Decoder(cfg, 1) as decoder:
        return make_plan(cfg, decoder, slices=3), root


def test_a_plan_holds_each_file_once_split_and_cut_into_shards(planned):
    plan, _ = planned
    assert len(plan.files) == 60 and plan.duplicates_removed == 1
    copied = plan.digests[plan.files.index("train/cat.3.jpg")]
    assert plan.copies == {copied: ["train/cat.999.jpg"]}
    rows = sorted(row for split in plan.splits.values() for row in split)
    assert rows == list(range(60))  # each file in one split
    plan.per_shard = 5
    assert [len(shard) for shard in plan.shards("train")] == [5] * 9 + [3]
    assert plan.config["image_size"] == 8 and plan.slices == 3


def test_a_plan_read_back_is_the_plan_written(planned, tmp_path):
    plan, _ = planned
    write_plan(plan, tmp_path)
    assert read_plan(tmp_path) == plan


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "train/../../x.jpg", ""])
def test_a_planned_file_outside_the_input_is_refused(planned, name):
    plan, root = planned
    with pytest.raises(ValueError, match="expected files under .* in the plan"):
        plan.file(root, name)


@pytest.mark.parametrize("text", ["{oops", "[]", '{"classes": []}'])
def test_a_plan_that_is_not_one_is_refused(tmp_path, text):
    (tmp_path / "plan.json").write_text(text)
    with pytest.raises(ValueError, match="expected plan.json of the preprocess plan step"):
        read_plan(tmp_path)


def test_a_plan_without_the_three_splits_is_refused(planned, tmp_path):
    plan, _ = planned
    write_plan(plan, tmp_path)
    fields = json.loads((tmp_path / "plan.json").read_text())
    del fields["splits"]["test"]
    Path(tmp_path / "plan.json").write_text(json.dumps(fields))
    with pytest.raises(ValueError, match="expected a split, a shard size and slices"):
        read_plan(tmp_path)
