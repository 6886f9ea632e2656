"""The data contract between steps: meta.json and the .npy arrays, checked on every read."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import shutil

import numpy as np
import pytest

from components.data.arrays import load_split, read_meta, save_split, split_file_sha256
from tests.support.helpers import plant_shard_file


@pytest.fixture
def arrays(sample_arrays, tmp_path):
    """A copy of the sample's arrays (grey 40×40) to tamper with."""
    return shutil.copytree(sample_arrays, tmp_path / "arrays")


def rewrite_meta(directory, **changes) -> None:
    meta = json.loads((directory / "meta.json").read_text())
    (directory / "meta.json").write_text(json.dumps({**meta, **changes}))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"image_size": 100_000}, "image_size from 8 to 512, found 100000"),
        ({"image_size": "40"}, "image_size from 8 to 512, found '40'"),
        ({"channels": 2}, "channels 1 or 3, found 2"),
        ({"channels": 3}, r"mean: one number in \[0, 1\] per channel, found \[0\.\d+\]"),
        ({"classes": ["cat"]}, "2 to 100 classes in classes, found 1: cat"),
        ({"classes": ["cat", "../dog"]}, r"printable characters without / or \\, found '../dog'"),
        ({"classes": ["cat", "cat"]}, r"distinct class names in classes, found \['cat'\] twice"),
        ({"std": [0.0]}, r"std: one number in \(0, 1\] per channel, found \[0\.0\]"),
        ({"mean": [float("nan")]}, r"mean: .* found \[nan\]"),
        ({"mean": None}, "mean: .* found None"),
        ({"counts": {"train": {"cat": 1}}}, "expected the count of each class in each split"),
    ],
)
def test_a_meta_json_outside_the_contract_is_refused_naming_the_field(arrays, changes, message):
    rewrite_meta(arrays, **changes)
    with pytest.raises(ValueError, match=message) as raised:
        read_meta(arrays)
    assert str(arrays / "meta.json") in str(raised.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{oops", "expected JSON written by the preprocess step in .*, found text that is not"),
        ("[1, 2]", "expected a mapping of image fields in .*, found list"),
        ('{"classes": ["cat", "dog"]}', "expected channels, image_size, mean, std in .*"),
    ],
)
def test_a_meta_json_that_is_not_the_preprocess_steps_is_refused(arrays, text, message):
    (arrays / "meta.json").write_text(text)
    with pytest.raises(ValueError, match=message):
        read_meta(arrays)


def test_arrays_of_another_shape_than_meta_json_says_are_refused(arrays):
    rewrite_meta(arrays, image_size=64)  # the arrays hold 40×40
    with pytest.raises(ValueError, match=r"expected uint8 \d+×1×64×64 in .*train_images_00000"):
        load_split(arrays, "train")


def test_a_npy_header_that_claims_more_than_the_file_holds_is_refused_unallocated(arrays):
    # a few bytes claiming 26 GB: read naively, an allocation of that size
    handle = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        handle, {"descr": "|u1", "fortran_order": False, "shape": (100_000, 1, 512, 512)}
    )
    plant_shard_file(arrays, "val_images_00000.npy", handle.getvalue() + bytes(1000))
    with pytest.raises(ValueError, match="cannot read .*val_images_00000.npy as a .npy array"):
        load_split(arrays, "val")


@pytest.mark.parametrize(
    "content",
    [pickle.dumps({"evil": 1}), b"neither an array nor a pickle"],
    ids=["a pickle", "text"],
)
def test_a_file_that_is_not_a_plain_array_is_refused_not_unpickled(arrays, content):
    plant_shard_file(arrays, "val_labels_00000.npy", content)
    with pytest.raises(ValueError, match="refusing .*val_labels_00000.npy: numpy reads it as"):
        load_split(arrays, "val")


def test_an_npz_archive_in_place_of_an_array_is_refused(arrays):
    handle = io.BytesIO()
    np.savez(handle, labels=np.zeros(200, np.int64))
    plant_shard_file(arrays, "val_labels_00000.npy", handle.getvalue())
    with pytest.raises(ValueError, match="expected one .npy array in .*, found a .npz archive"):
        load_split(arrays, "val")


def test_a_split_without_a_class_is_refused_naming_the_class(arrays):
    """A test split of dogs alone would let any always-dog net score 1.0 at the gate."""
    images, labels = load_split(arrays, "test")
    dogs = labels == 1
    meta = json.loads((arrays / "meta.json").read_text())
    meta["shards"]["test"] = save_split(arrays, "test", images[dogs], labels[dogs])
    meta["counts"]["test"] = {"cat": 0, "dog": int(dogs.sum())}
    (arrays / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="every class in the test split .*found none of cat:"):
        load_split(arrays, "test")


def test_a_split_saved_by_rows_holds_those_rows_in_their_order(tmp_path):
    images = np.arange(7 * 3 * 2 * 2, dtype=np.uint8).reshape(7, 3, 2, 2)
    labels = np.array([0, 1, 0, 1, 1, 0, 1])
    rows = np.array([5, 0, 3, 6])
    shards = save_split(tmp_path, "val", images, labels, rows, shard_photos=3)  # 3, then 1
    assert [shard["count"] for shard in shards] == [3, 1]
    saved = np.concatenate([np.load(tmp_path / shard["images"]) for shard in shards])
    assert np.array_equal(saved, images[rows]) and saved.dtype == np.uint8
    saved_labels = np.concatenate([np.load(tmp_path / shard["labels"]) for shard in shards])
    assert np.array_equal(saved_labels, labels[rows])
    for shard in shards:
        assert (
            shard["images_sha256"]
            == hashlib.sha256((tmp_path / shard["images"]).read_bytes()).hexdigest()
        )


def test_a_shard_changed_since_preprocess_is_refused_naming_it(arrays):
    path = arrays / "val_images_00000.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # one bit of one pixel
    path.write_bytes(bytes(data))
    with pytest.raises(
        ValueError,
        match=r"expected .*val_images_00000.npy with the sha256 "
        r"meta.json records .* changed since the preprocess step wrote it",
    ):
        load_split(arrays, "val")


@pytest.mark.parametrize(
    "shard, message",
    [
        (
            {"images": "../../etc/passwd"},
            "expected shard 0 of the val split .* as images val_images_00000.npy",
        ),
        ({"count": 5}, "expected the val split's shards .* to hold its \\d+ photos"),
        ({"images_sha256": "x" * 64}, "both files' sha256"),
    ],
)
def test_a_shard_listed_outside_the_contract_is_refused(arrays, shard, message):
    meta = json.loads((arrays / "meta.json").read_text())
    meta["shards"]["val"][0].update(shard)
    (arrays / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=message):
        read_meta(arrays)


def test_a_shard_file_larger_than_its_count_is_refused_before_it_is_read(arrays):
    path = arrays / "val_images_00000.npy"
    with open(path, "r+b") as handle:  # a sparse tail of a terabyte: nothing to read in it
        handle.truncate(path.stat().st_size + 2**40)
    with pytest.raises(ValueError, match=r"val_images_00000.npy to hold the \d+ bytes meta.json"):
        load_split(arrays, "val")


def test_a_splits_digest_counts_every_byte_whatever_its_shards(arrays, tmp_path):
    images, labels = load_split(arrays, "train")
    header = f"{images.dtype}{images.shape}{labels.dtype}{labels.shape}".encode()
    whole = hashlib.sha256(header + images.tobytes() + labels.tobytes()).hexdigest()
    assert split_file_sha256(arrays, "train") == whole
    meta = json.loads((arrays / "meta.json").read_text())
    for old in arrays.glob("train_*.npy"):
        old.unlink()
    meta["shards"]["train"] = save_split(arrays, "train", images, labels, shard_photos=77)
    (arrays / "meta.json").write_text(json.dumps(meta))
    assert len(meta["shards"]["train"]) > 2 and split_file_sha256(arrays, "train") == whole
    images[0, 0, 0, 0] ^= 1
    meta["shards"]["train"] = save_split(arrays, "train", images, labels, shard_photos=77)
    (arrays / "meta.json").write_text(json.dumps(meta))
    assert split_file_sha256(arrays, "train") != whole
