"""The test split's kept photo files: bound to the arrays by their pixels, to the photos
digest by their bytes; anything else in their place is refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from components.core.names import TEST_PHOTOS_DIR
from components.data.arrays import load_split
from components.data.kept_photos import replace_with_kept_photos


@pytest.fixture
def arrays(sample_arrays, tmp_path):
    return shutil.copytree(sample_arrays, tmp_path / "arrays")


def test_the_kept_photos_are_the_arrays_and_give_the_recorded_digest(arrays):
    images, labels = load_split(arrays, "test")
    claimed = json.loads((arrays / "meta.json").read_text())["photos_sha256"]["test"]
    assert replace_with_kept_photos(arrays, images, labels) == claimed


def test_another_photo_in_a_places_file_is_refused_by_its_pixels(arrays):
    images, labels = load_split(arrays, "test")
    kept = arrays / TEST_PHOTOS_DIR
    (kept / "00000").write_bytes((kept / "00001").read_bytes())
    with pytest.raises(ValueError, match="00000 to be the photo of its place in the test arrays"):
        replace_with_kept_photos(arrays, images, labels)


@pytest.mark.parametrize("kind", ["gone", "link", "folder"])
def test_a_kept_photo_that_is_no_regular_file_is_refused(arrays, kind):
    images, labels = load_split(arrays, "test")
    photo = arrays / TEST_PHOTOS_DIR / "00003"
    photo.unlink()
    if kind == "link":
        photo.symlink_to(arrays / TEST_PHOTOS_DIR / "00004")
    elif kind == "folder":
        photo.mkdir()
    with pytest.raises(ValueError, match="00003 to be a kept test photo"):
        replace_with_kept_photos(arrays, images, labels)


def test_arrays_without_kept_photos_say_to_preprocess_again(arrays):
    images, labels = load_split(arrays, "test")
    shutil.rmtree(arrays / TEST_PHOTOS_DIR)
    with pytest.raises(FileNotFoundError, match="preprocess the photos again"):
        replace_with_kept_photos(arrays, images, labels)


def test_arrays_nudged_within_the_tolerance_are_replaced_by_the_photos_themselves(arrays):
    """Each test array moved a grey level or two toward its label passes the check: so
    what is scored is each kept photo decoded again, not the array."""
    images, labels = load_split(arrays, "test")
    honest = images.copy()
    nudged = np.clip(
        images.astype(np.int16) + np.where(labels == 1, 2, -2)[:, None, None, None], 0, 255
    )
    images[:] = nudged.astype(np.uint8)
    claimed = json.loads((arrays / "meta.json").read_text())["photos_sha256"]["test"]
    assert not np.array_equal(images, honest)
    assert replace_with_kept_photos(arrays, images, labels) == claimed  # within the tolerance
    assert np.array_equal(images, honest)
