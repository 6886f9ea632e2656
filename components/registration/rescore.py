"""The alias's holder scored again on the challenger's test photos: champion and
challenger then stand on the same photos, whatever split each was evaluated on first.

The preprocess step keeps the test split's photo files (``test_photos/``, in the order of
``test_labels.npy``). They are checked against the photos digest the challenger's training
recorded before any is decoded, then decoded by the function preprocess uses at the size
and channels the holder's own spec says, a batch at a time, and scored by the holder's
ONNX graph, fetched from the registry and checked against the tracking store's record.
No photo is decoded before all of them are known to be the ones recorded.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from components.data.arrays import open_split, photos_sha256, read_meta
from components.data.kept_photos import decoded, kept_files, kept_sha256, read_kept
from components.data.test_share import in_test_share

log = logging.getLogger(__name__)

BATCH = 64  # photos decoded and scored at once: memory bounded whatever the split's size


@dataclass(frozen=True)
class Rescored:
    """The holder's accuracy on the challenger's test photos, how many, their digest, and
    the positions it got wrong (in the challenger's test order)."""

    accuracy: float
    count: int
    photos: str
    wrong: tuple[int, ...] = ()
    positions: tuple[int, ...] = ()  # the challenger's test photos it was scored on


def score_holder(
    model_uri: str, data_dir: Path, photos: str, share: float | None = None
) -> Rescored:
    """Score the registered model ``model_uri`` on the test photos kept in ``data_dir``
    (with ``share``: those of them in its own test share, the only ones it cannot have
    trained on).

    Every file is hashed first, a block at a time, and nothing is decoded unless their
    sha256s and labels give the digest ``photos`` and no photo is there twice (preprocess
    keeps one of each); then each is read again, one at a time, checked against its
    hash, decoded and scored a batch at a time: memory holds one photo's bytes and a batch
    of pixels, whatever the files are.

    Args:
        model_uri: the holder, as ``models:/NAME/VERSION``.
        data_dir: the preprocess step's output the challenger was tested on.
        photos: the photos digest the challenger's training recorded of its test split.
        share: the test fraction the holder's own test split was drawn with.

    Raises:
        FileNotFoundError: ``data_dir`` keeps no test photos (an older preprocess output).
        ValueError: the photos kept are not the ones ``photos`` names, one is there twice,
            changes while it is scored, or does not decode.
    """
    from components.scoring.loading import load_scorer
    from components.scoring.scorers import class_probabilities, score_batches

    labels = open_split(Path(data_dir), "test", verify=False).labels  # no photo read
    files = kept_files(Path(data_dir), len(labels))
    digests = [kept_sha256(file) for file in files]
    _check_photos(files, digests, labels, photos)
    holder = load_scorer(model_uri, "onnx")
    classes = read_meta(Path(data_dir))["classes"]
    if list(holder.classes) != classes:
        raise ValueError(
            f"expected {model_uri} to answer the test photos' classes "
            f"({', '.join(classes)[:200]}), found {', '.join(holder.classes)[:200]}"
        )
    positions = [
        i for i, digest in enumerate(digests) if share is None or in_test_share(digest, share)
    ]
    if not positions:
        raise ValueError(f"expected test photos in {model_uri}'s test share, found none")
    wrong: list[int] = []
    for start in range(0, len(positions), BATCH):
        batch = positions[start : start + BATCH]
        pixels = np.stack(
            [
                _decoded_as_hashed(files[i], digests[i], holder.image_size, holder.channels)
                for i in batch
            ]
        )
        guesses = class_probabilities(score_batches(holder.scorer, pixels)).argmax(1)
        wrong += [i for i, guess in zip(batch, guesses, strict=True) if guess != labels[i]]
    correct = len(positions) - len(wrong)
    log.info("%s scored again on %d test photos: %d right", model_uri, len(positions), correct)
    return Rescored(
        correct / len(positions), len(positions), photos, tuple(wrong), tuple(positions)
    )


def _check_photos(files: list[Path], digests: list[str], labels: np.ndarray, photos: str) -> None:
    """Refuse kept photos that are not the ones the training recorded, or a photo twice."""
    found = photos_sha256(zip(digests, (int(label) for label in labels), strict=True))
    if found != photos:
        raise ValueError(
            f"expected the test photos in {files[0].parent} to be the ones the training "
            f"recorded (photos sha256 {photos[:12]}…), found {found[:12]}…"
        )
    repeated = len(digests) - len(set(digests))
    if repeated:
        raise ValueError(
            f"expected {len(digests)} distinct test photos in {files[0].parent} (preprocess "
            f"keeps one of each), found {repeated} more copies of photos already there"
        )


def _decoded_as_hashed(file: Path, digest: str, size: int, channels: int) -> np.ndarray:
    """A kept photo's pixels, from bytes that still hash to ``digest``."""
    data = read_kept(file)
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"expected {file} to stay as it was hashed, found it changed")
    return decoded(data, file, size, channels)
