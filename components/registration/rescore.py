"""The alias's holder scored again on the challenger's test photos: champion and
challenger then stand on the same photos, whatever split each was evaluated on first.

The preprocess step keeps the test split's photo files (``test_photos/``, in the order of
``test_labels.npy``). They are checked against the photos digest the challenger's training
recorded before any is decoded, then decoded by the function preprocess uses at the size
and channels the holder's own spec says, a batch at a time, and scored by the holder's
ONNX graph, fetched from the registry and checked against the tracking store's record.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from components.data.arrays import load_split, photos_sha256
from components.data.kept_photos import decoded, kept_files, read_kept

log = logging.getLogger(__name__)

BATCH = 64  # photos decoded and scored at once: memory bounded whatever the split's size


@dataclass(frozen=True)
class Rescored:
    """The holder's accuracy on the challenger's test photos, how many, and their digest."""

    accuracy: float
    count: int
    photos: str


def score_holder(model_uri: str, data_dir: Path, photos: str) -> Rescored:
    """Score the registered model ``model_uri`` on the test photos kept in ``data_dir``.

    Each file is read once: hashed, decoded and scored from the same bytes; the result
    stands only if their sha256s and labels give the digest ``photos``.

    Args:
        model_uri: the holder, as ``models:/NAME/VERSION``.
        data_dir: the preprocess step's output the challenger was tested on.
        photos: the photos digest the challenger's training recorded of its test split.

    Raises:
        FileNotFoundError: ``data_dir`` keeps no test photos (an older preprocess output).
        ValueError: the photos kept are not the ones ``photos`` names, or one does not
            decode.
    """
    from components.scoring.loading import load_scorer
    from components.scoring.scorers import class_probabilities, score_batches

    _, labels = load_split(Path(data_dir), "test")
    files = kept_files(Path(data_dir), len(labels))
    holder = load_scorer(model_uri, "onnx")
    read, correct = [], 0
    for start in range(0, len(files), BATCH):
        batch = [(file, read_kept(file)) for file in files[start : start + BATCH]]
        truth = labels[start : start + BATCH]
        read += [
            (hashlib.sha256(data).hexdigest(), int(label))
            for (_, data), label in zip(batch, truth, strict=True)
        ]
        pixels = np.stack(
            [decoded(data, file, holder.image_size, holder.channels) for file, data in batch]
        )
        dogs = class_probabilities(score_batches(holder.scorer, pixels))[:, 1] >= 0.5
        correct += int((dogs == truth.astype(bool)).sum())
    found = photos_sha256(read)
    if found != photos:
        raise ValueError(
            f"expected the test photos in {files[0].parent} to be the ones the training "
            f"recorded (photos sha256 {photos[:12]}…), found {found[:12]}…"
        )
    log.info("%s scored again on %d test photos: %d right", model_uri, len(files), correct)
    return Rescored(correct / len(files), len(files), photos)
