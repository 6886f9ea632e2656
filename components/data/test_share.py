"""Which photos are test photos, and the check that a test split holds them all.

A photo is a test photo when its sha256, read as a point in [0, 1), falls below the test
fraction: its own bytes decide, not a seed and not whoever writes the arrays. A class
with no such photo gives its photo of the lowest point, so that every class is tested.
Every run on one source shares its test photos, whatever its split seed (the seed only
moves photos between train and val), and no run trains on a photo whose point is below
its test fraction, whatever its source. The download step lists every file it extracted
with its sha256 (the source listing) and records the listing in the tracking store;
evaluate then checks that a test split is the source's test share: each of its photos,
none added, none left out but those that do not decode.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from components.data.images import MAX_FILE_BYTES, decode_bytes
from components.data.kept_photos import read_kept

POINT_DIGITS = 15  # hex digits of a sha256 read as its point: 60 bits, exact in a float
LISTING_BYTES_A_FILE = 400  # a listing's entry at the most: a sha256 and a long name


def share_point(sha256: str) -> float:
    """Where a photo falls in [0, 1): the first 60 bits of its sha256, as a fraction."""
    return int(sha256[:POINT_DIGITS], 16) / float(16**POINT_DIGITS)


def in_test_share(sha256: str, fraction: float) -> bool:
    """Whether the photo of this sha256 is below ``fraction``: a test photo of any source
    at that fraction."""
    return share_point(sha256) < fraction


def choose_test_photos(digests: list[str], labels: list[int], fraction: float) -> list[bool]:
    """Which of the photos (distinct sha256s, with their labels) are test photos: those
    below ``fraction`` and, in a class with none, its photo of the lowest point."""
    points = [share_point(digest) for digest in digests]
    chosen = [point < fraction for point in points]
    if fraction <= 0:
        return chosen
    lowest: dict[int, int] = {}
    for i, label in enumerate(labels):
        if label not in lowest or points[i] < points[lowest[label]]:
            lowest[label] = i
    tested = {label for label, test in zip(labels, chosen, strict=True) if test}
    for label, i in lowest.items():
        chosen[i] = chosen[i] or label not in tested
    return chosen


@dataclass(frozen=True)
class SourceListing:
    """Every file a download extracted: its name under the output folder, its sha256 and
    its size in bytes."""

    files: dict[str, str]
    sizes: dict[str, int]

    def to_bytes(self) -> bytes:
        entries = {name: [digest, self.sizes[name]] for name, digest in self.files.items()}
        return json.dumps(entries, sort_keys=True, indent=0).encode()

    def sha256(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()

    @classmethod
    def from_bytes(cls, data: bytes) -> SourceListing:
        """The listing ``to_bytes`` wrote.

        Raises:
            ValueError: it is not one.
        """
        try:
            entries = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"expected a source listing as JSON, found {err}") from None
        if not (isinstance(entries, dict) and all(map(_is_entry, entries.values()))):
            raise ValueError("expected a source listing of file names, sha256s and sizes")
        return cls(
            {name: digest for name, (digest, _) in entries.items()},
            {name: size for name, (_, size) in entries.items()},
        )


def _is_entry(entry: object) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], str)
        and len(entry[0]) == 64
        and type(entry[1]) is int
    )


def list_source(folder: Path, leave_out: Iterable[str] = ()) -> SourceListing:
    """Every regular file under ``folder`` (links are not followed) but ``leave_out``,
    by its name under ``folder``, with its sha256, read a block at a time."""
    folder, files, sizes = Path(folder), {}, {}
    left = set(leave_out)
    for parent, _, names in os.walk(folder):
        for name in names:
            path = Path(parent) / name
            relative = path.relative_to(folder).as_posix()
            if relative in left or not path.is_file() or path.is_symlink():
                continue
            with path.open("rb") as handle:
                files[relative] = hashlib.file_digest(handle, "sha256").hexdigest()
                sizes[relative] = os.fstat(handle.fileno()).st_size
    return SourceListing(files, sizes)


def source_test_share(
    listing: SourceListing, label_of: Callable[[str], int | None], fraction: float
) -> dict[str, int]:
    """The source's test photos, by sha256, with their labels, as preprocess splits them
    (``test_share``): of the files of a class (``label_of`` a listed name; None: not a
    photo of a class) that preprocess reads (a photo's size at most), but for files
    identical to one of another class."""
    labels: dict[str, set[int]] = {}
    for name, digest in listing.files.items():
        label = label_of(name)
        if label is not None and listing.sizes[name] <= MAX_FILE_BYTES:
            labels.setdefault(digest, set()).add(label)
    photos = {digest: found.pop() for digest, found in labels.items() if len(found) == 1}
    chosen = choose_test_photos(list(photos), list(photos.values()), fraction)
    return {d: label for (d, label), test in zip(photos.items(), chosen, strict=True) if test}


def check_test_split(
    share: dict[str, int],
    kept: list[tuple[str, int]],
    listing: SourceListing,
    left_out: dict[str, Path],
    fraction: float,
) -> None:
    """Refuse a test split (``kept``: its photos' sha256s and labels) that is not the
    source's test ``share``: a photo from elsewhere or under another label, or one of the
    share's missing unless preprocess left it out rightly (``left_out``: the files it
    kept of those it did not decode, by their listed names):
    the bytes of a photo that does not decode.

    Raises:
        ValueError: naming a photo that breaks the rule, and how many do.
    """
    foreign = [(i, d) for i, (d, label) in enumerate(kept) if share.get(d) != label]
    if foreign:
        position, digest = foreign[0]
        found = "under another label" if digest in share else "outside the test share"
        raise ValueError(
            f"expected a test split of the source's test photos only (a photo is one when "
            f"its sha256 falls in the lowest {fraction:g} of the range), found {len(foreign)} "
            f"others, such as test photo {position:05d} (sha256 {digest[:12]}…) {found}"
        )
    names: dict[str, list[str]] = {}
    for name, digest in listing.files.items():
        names.setdefault(digest, []).append(name)
    held = {digest for digest, _ in kept}
    unexplained = [
        digest
        for digest in share
        if digest not in held
        and not any(_does_not_decode(left_out.get(name), digest) for name in names[digest])
    ]
    if unexplained:
        example = names[unexplained[0]][0]
        raise ValueError(
            f"expected every photo of the source's test share in the test split, found "
            f"{len(unexplained)} of its {len(share)} missing, such as {example!r:.200} "
            f"(sha256 {unexplained[0][:12]}…), and not left out for failing to decode"
        )


def _does_not_decode(file: Path | None, digest: str) -> bool:
    """Whether ``file`` is a kept file (``read_kept``'s bounds) holding the bytes of
    ``digest``, and they do not decode, as preprocess found."""
    if file is None:
        return False
    try:
        data = read_kept(file)
    except ValueError:
        return False
    if hashlib.sha256(data).hexdigest() != digest:
        return False
    try:
        decode_bytes(data, 32, 1)
    except ValueError:
        return True
    return False
