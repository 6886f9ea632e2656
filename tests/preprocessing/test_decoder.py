"""The processes that hash and decode photos: in order, pixels in the shard's array."""

from __future__ import annotations

import hashlib

import numpy as np

from components.data.images import decode_file
from components.preprocessing.config import PreprocessConfig
from components.preprocessing.decoder import Decoder
from tests.support.helpers import write_jpeg


def test_forked_workers_hash_and_decode_in_order_into_the_shared_array(tmp_path):
    files = [tmp_path / f"{i}.jpg" for i in range(9)]
    for i, file in enumerate(files):
        write_jpeg(file, seed=i)
    (tmp_path / "empty.jpg").write_bytes(b"")
    files.insert(4, tmp_path / "empty.jpg")
    cfg = PreprocessConfig(input=str(tmp_path), output="", image_size=12, channels=3, workers=2)
    with Decoder(cfg, len(files)) as decoder:
        digests = list(decoder.digests(files))
        decoded = list(decoder.decode(files))
        buffer = decoder.buffer.copy()
    assert digests[4].sha256 is None and digests[4].reason == "empty file (0 bytes)"
    for i, file in enumerate(files):
        if i == 4:
            continue
        assert digests[i].sha256 == hashlib.sha256(file.read_bytes()).hexdigest()
        assert decoded[i].sha256 == digests[i].sha256
        expected = decode_file(file, 12, 3).pixels
        assert np.array_equal(buffer[i] if decoded[i].pixels is None else decoded[i].pixels,
                              expected)  # fmt: skip
