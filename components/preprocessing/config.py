"""The preprocess step's schema: how photos become arrays."""

from __future__ import annotations

from dataclasses import dataclass

from components.core.schema import LOCAL, PER_RUN, check_seed, setting
from components.data import images
from components.data.arrays import MAX_IMAGE_SIZE, MIN_IMAGE_SIZE


@dataclass(frozen=True)
class PreprocessConfig:
    """How images become arrays: the preprocess step's one schema."""

    input: str = setting(
        help="directory with a folder of photos per class (ROOT/CLASS/*.jpg), PetImages among them",
        role=LOCAL,
    )
    output: str = setting(
        help="directory for the arrays and meta.json; replaced whole on success", role=LOCAL
    )
    image_size: int = setting(50, "square side in pixels")
    channels: int = setting(1, "1 = grey, 3 = RGB", choices=(1, 3))
    val_fraction: float = setting(0.1, "share of each class held out for validation")
    test_fraction: float = setting(0.1, "share of each class held out for the test")
    split_seed: int = setting(0, "seed of the train/val/test split (training has its own seed)")
    shard_mb: int = setting(
        1024,
        "MiB of photos a shard of the arrays holds at the most: what preprocess holds in "
        "memory at once, and what training reads at a time where a split is not loaded whole",
        role=PER_RUN,
    )
    workers: int = setting(
        0,
        "decoding processes, at most one per core this process may use (its CPU limit); "
        "0: that many",
        role=LOCAL,
    )

    def __post_init__(self) -> None:
        if self.channels not in images.MODES:
            raise ValueError(f"expected channels 1 or 3, found {self.channels}")
        check_seed(self.split_seed, "split_seed")
        if self.shard_mb < 1:
            raise ValueError(f"expected a shard of 1 MiB or more, found {self.shard_mb}")
        if self.workers < 0:
            raise ValueError(f"expected 0 or more workers, found {self.workers}")
        if not MIN_IMAGE_SIZE <= self.image_size <= MAX_IMAGE_SIZE:
            raise ValueError(
                f"expected an image size from {MIN_IMAGE_SIZE} to {MAX_IMAGE_SIZE}, "
                f"found {self.image_size}"
            )
        fractions = (self.val_fraction, self.test_fraction)
        if not (min(fractions) >= 0 and sum(fractions) < 1):  # NaN fails too
            raise ValueError(
                "expected val and test fractions >= 0 that sum to less than 1, found "
                f"val={self.val_fraction}, test={self.test_fraction}"
            )
