"""Test photos chosen by their own bytes, and a test split checked against its source's
listing: none added, none under another label, none left out but photos that do not
decode."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from components.data.layout import find_labelled_files, label_of_name
from components.data.test_share import (
    SourceListing,
    check_test_split,
    choose_test_photos,
    in_test_share,
    list_source,
    share_point,
    source_test_share,
)
from tests.support.helpers import write_jpeg


def jpeg(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), (seed % 256, seed // 256 % 256, 7)).save(buffer, "JPEG")
    return buffer.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_of(tmp_path, per_class=60):
    """A folder-per-class source with its listing, and its labels by listed name."""
    root = tmp_path / "raw"
    for label, name in enumerate(("ants", "bees")):
        for i in range(per_class):
            (root / "bugs" / name).mkdir(parents=True, exist_ok=True)
            (root / "bugs" / name / f"{i}.jpg").write_bytes(jpeg(1000 * label + i))
    (root / "bugs/LICENSE.txt").write_text("CC BY 2.0")
    found = find_labelled_files(root)
    listing = list_source(root)

    def label_of(name):
        return label_of_name(name, found.layout, list(found.classes), list(found.folders))

    return root, listing, label_of


def test_a_photos_point_is_its_sha256_and_the_share_its_points_below_the_fraction():
    low, high = "0" * 15 + "f" * 49, "e" + "0" * 63
    assert share_point(low) == 0.0 and 0.87 < share_point(high) < 0.88
    assert in_test_share(low, 0.1) and not in_test_share(high, 0.1)
    assert choose_test_photos([low, high], [0, 0], 0.1) == [True, False]


def test_a_class_with_no_photo_below_the_fraction_gives_its_lowest():
    digests = ["e" + "0" * 63, "c" + "0" * 63, "0" * 64, "d" + "0" * 63]
    assert choose_test_photos(digests, [0, 0, 1, 1], 0.1) == [False, True, True, False]
    assert choose_test_photos(digests, [0, 0, 1, 1], 0.0) == [False] * 4  # no test split at all


def test_the_share_is_the_same_for_any_source_that_holds_the_photo(tmp_path):
    """A photo below the fraction is a test photo of every source, so no run at that
    fraction trains on it."""
    _, listing, label_of = source_of(tmp_path)
    whole = source_test_share(listing, label_of, 0.2)
    half = SourceListing(
        {n: d for n, d in listing.files.items() if n.endswith(("0.jpg", "2.jpg", "4.jpg"))},
        listing.sizes,
    )
    part = source_test_share(half, label_of, 0.2)
    assert part and all(whole[d] == label for d, label in part.items() if in_test_share(d, 0.2))
    assert 6 <= len(whole) <= 40  # about a fifth of 120
    assert all(label_of(n) is None for n in listing.files if n.endswith("LICENSE.txt"))


def test_a_listing_reads_back_as_written_and_refuses_what_is_not_one(tmp_path):
    _, listing, _ = source_of(tmp_path, per_class=3)
    assert SourceListing.from_bytes(listing.to_bytes()) == listing
    assert listing.sizes["bugs/LICENSE.txt"] == len("CC BY 2.0")
    for bad in (b"[1]", b'{"a": ["ab", 3]}', b'{"a": ["' + b"0" * 64 + b'", "3"]}', b"\xff"):
        with pytest.raises(ValueError, match="expected a source listing"):
            SourceListing.from_bytes(bad)


def test_files_under_two_classes_and_files_larger_than_a_photo_are_in_no_share(tmp_path):
    listing = SourceListing(
        {"a/x.jpg": "0" * 64, "b/x.jpg": "0" * 64, "a/big.jpg": "1" * 64, "a/y.jpg": "2" * 64},
        {"a/x.jpg": 9, "b/x.jpg": 9, "a/big.jpg": 65 * 2**20, "a/y.jpg": 9},
    )
    share = source_test_share(listing, lambda name: "ab".index(name[0]), 0.5)
    assert share == {"2" * 64: 0}  # the one photo of a left, its class's lowest


def split_of(share):
    return [(d, label) for d, label in share.items()]


def test_the_source_share_passes_and_a_cherry_picked_subset_is_refused(tmp_path):
    _, listing, label_of = source_of(tmp_path)
    share = source_test_share(listing, label_of, 0.2)
    check_test_split(share, split_of(share), listing, {}, 0.2)
    kept = split_of(share)[:-3]  # three photos a model gets wrong, dropped
    with pytest.raises(ValueError, match=r"found 3 of its \d+ missing, such as 'bugs/"):
        check_test_split(share, kept, listing, {}, 0.2)


def test_a_photo_from_outside_the_share_or_under_another_label_is_refused(tmp_path):
    _, listing, label_of = source_of(tmp_path)
    share = source_test_share(listing, label_of, 0.2)
    outside = next(d for d in listing.files.values() if d not in share)
    with pytest.raises(ValueError, match="found 1 others, such as test photo 00.* outside"):
        check_test_split(share, [*split_of(share), (outside, 0)], listing, {}, 0.2)
    flipped = [
        (d, 1 - label) if i == 0 else (d, label) for i, (d, label) in enumerate(share.items())
    ]
    with pytest.raises(ValueError, match="test photo 00000 .* under another label"):
        check_test_split(share, flipped, listing, {}, 0.2)


def test_a_missing_photo_passes_only_when_its_kept_bytes_do_not_decode(tmp_path):
    root, listing, label_of = source_of(tmp_path)
    missing = next(n for n, d in listing.files.items() if label_of(n) is not None and d in
                   source_test_share(listing, label_of, 0.2))  # fmt: skip
    (root / missing).write_bytes(b"\xff\xd8 truncated")  # broken in the source
    listing = list_source(root)
    share = source_test_share(listing, label_of, 1.0)  # every photo a test photo
    kept = [(d, label) for d, label in share.items() if d != listing.files[missing]]
    check_test_split(share, kept, listing, {missing: root / missing}, 1.0)
    planted = tmp_path / "planted"
    write_jpeg(planted, seed=3)  # a photo that decodes, in the broken one's place
    with pytest.raises(ValueError, match="found 1 of its .* missing"):
        check_test_split(share, kept, listing, {missing: planted}, 1.0)
    (tmp_path / "link").symlink_to(root / missing)
    with pytest.raises(ValueError, match="found 1 of its .* missing"):
        check_test_split(share, kept, listing, {missing: tmp_path / "link"}, 1.0)
    assert digest((root / missing).read_bytes()) == listing.files[missing]
