"""A split as shards: written with their digests, read back memory-mapped a batch at a time."""

from __future__ import annotations

import hashlib

import numpy as np

from components.data.shards import MappedSplit, data_blocks, write_shard


def written(tmp_path, sizes: list[int]) -> tuple[MappedSplit, np.ndarray]:
    """Shards of ``sizes`` photos of 3×2×2 with distinct pixels, mapped, and the whole."""
    whole = np.arange(sum(sizes) * 12, dtype=np.int64).astype(np.uint8).reshape(-1, 3, 2, 2)
    labels = np.arange(sum(sizes)) % 3
    shards, start = [], 0
    for index, size in enumerate(sizes):
        record = write_shard(
            tmp_path, "train", index, whole[start : start + size], labels[start : start + size]
        )
        shards.append(np.load(tmp_path / record["images"], mmap_mode="r"))
        start += size
    return MappedSplit(shards, labels), whole


def test_a_batch_gathers_its_photos_from_every_shard_in_the_order_asked(tmp_path):
    mapped, whole = written(tmp_path, [4, 1, 5])
    index = np.array([9, 0, 4, 4, 7, 3])  # from the third, first and second shards, one twice
    assert np.array_equal(mapped.images(index), whole[index])
    assert np.array_equal(mapped.images(slice(2, 6)), whole[2:6])
    assert np.array_equal(mapped.images(), whole)


def test_a_subset_of_a_subset_holds_the_photos_it_names(tmp_path):
    mapped, whole = written(tmp_path, [3, 3, 3])
    picked = mapped.subset(np.array([8, 1, 5, 2]))
    again = picked.subset(np.array([3, 0]))
    assert len(again) == 2 and np.array_equal(again.images(), whole[[2, 8]])
    assert np.array_equal(again.labels, mapped.labels[[2, 8]])
    assert again.nbytes == 2 * 12


def test_a_shard_record_holds_its_files_digests_and_its_count(tmp_path):
    mapped, whole = written(tmp_path, [6])
    record = write_shard(tmp_path, "val", 0, whole, np.zeros(len(whole), np.int64))
    for kind in ("images", "labels"):
        content = (tmp_path / record[kind]).read_bytes()
        assert record[f"{kind}_sha256"] == hashlib.sha256(content).hexdigest()
    assert record["count"] == 6
    assert b"".join(data_blocks(tmp_path / record["images"])) == whole.tobytes()
