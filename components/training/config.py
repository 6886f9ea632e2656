"""The train step's one schema: its flags, pipeline parameters and MLflow params."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.core.names import DEFAULT_EXPERIMENT, RUNTIME_HELP, RUNTIMES
from components.core.schema import LOCAL, PER_RUN, check_seed, setting
from components.networks.backbones import BACKBONES
from components.networks.registry import MODEL_NAMES

S3_PREFIX = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?")  # a valid bucket name
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
SCHEDULES = ("constant", "onecycle")


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on.

    The recipe fields define the result and are logged as MLflow params; settings and
    local fields say where and how this attempt runs.
    """

    data: str = setting(help="directory written by the preprocess step", role=LOCAL)
    output: str = setting(help="directory for model.pt, checkpoint.pt, history.json", role=LOCAL)
    # the recipe
    model: str = setting(
        "tutorial_cnn", 'the net (docs/reference.md, "The nets")', choices=MODEL_NAMES
    )
    epochs: int = setting(10, "passes over the train split")
    batch_size: int = setting(100, "images per optimiser step, over all processes")
    lr: float = setting(0.001, "peak learning rate")
    weight_decay: float = setting(0.0, "AdamW weight decay")
    schedule: str = setting("constant", "learning-rate schedule", choices=SCHEDULES)
    augment: bool = setting(True, "random flips (and crops for all nets but tutorial_cnn)")
    min_crop_area: float = setting(
        1.0,
        "below 1: random resized crops, each keeping this share of the image or more "
        "(aspect 3:4 to 4:3), instead of shifted crops",
    )
    label_smoothing: float = setting(0.0, "share of each label's weight spread over both classes")
    start_size: int = setting(
        0,
        "progressive resizing: the first epoch trains on photos downscaled to this side, "
        "growing in steps of 8 pixels to the data's side by the last; 0: every epoch at it",
    )
    cutmix: float = setting(
        0.0,
        "share of batches trained with CutMix: a random box of each image replaced by the "
        "same box of another, the labels weighted by area",
    )
    frozen_blocks: int = setting(
        0,
        "pretrained nets: how many of the backbone's blocks ("
        + ", ".join(f"{name} {backbone.blocks}" for name, backbone in BACKBONES.items())
        + "), from the stem on, keep their pretrained weights and batch-norm statistics; "
        "0: all learn",
    )
    frozen_statistics: bool = setting(
        False,
        "pretrained nets: every batch-norm layer keeps its pretrained statistics, in "
        "training too, while its scale and shift learn (a short fine-tune's batches then "
        "normalise as the pretrained net does)",
    )
    cached_views: int = setting(
        0,
        "with frozen blocks: compute their output once per train photo, in 1 view (the "
        "photo) or 2 (it and its mirror image, one drawn each epoch), and train the rest "
        "of the net on it every epoch (no crops or CutMix then); the val split's once too; "
        "0: the frozen blocks run every epoch",
    )
    memory_budget_mb: int = setting(
        0,
        "MiB of photos held whole in memory (on a GPU, in its memory), the val split's "
        "first, then the train split's; a split past what is left is read from its shards "
        "a batch at a time; 0: a quarter of this process's memory limit",
        role=PER_RUN,
    )
    train_photos: int = setting(
        0, "train on this many of the train split's photos, picked at random by the seed; 0: all"
    )
    probe_photos: int = setting(
        0,
        "pretrained nets: before training, fit the classifier alone as a logistic "
        "regression on the pooled features of this many train photos (a linear probe), so "
        "that fine-tuning starts from a head that tells the classes apart; 0: a random head",
    )
    mirror_average: bool = setting(
        False,
        "predict (validation, test, the logged model) with the mean of each image's and its "
        "mirror image's class probabilities",
    )
    shift_average: bool = setting(
        False,
        "predict also with four copies of each image shifted 2 pixels diagonally, averaging "
        "the class probabilities of all five (ten views with mirror_average)",
    )
    amp: bool = setting(
        True, "bf16 autocast in training: on CUDA, and on CPUs with AMX or AVX512-BF16"
    )
    compile: bool = setting(
        False,
        "torch.compile the net: faster epochs after a minute or so of compiling",
        role=PER_RUN,
    )
    validate_every: int = setting(
        1,
        "score the val split after every Nth epoch and after the last (on a CPU, ten views "
        "of each val photo cost about half an epoch)",
        role=PER_RUN,
    )
    seed: int = setting(0, "seed of the initial weights, the order and the augmentation")
    # per run
    experiment: str = setting(DEFAULT_EXPERIMENT, "MLflow experiment", role=PER_RUN)
    recipe_name: str = setting(
        "",
        "the preset or recipe file these settings came from, which the MLflow run's name "
        "leads with (--preset sets it); empty: the net's name",
        role=PER_RUN,
    )
    device: str = setting("auto", "auto, cpu, cuda or cuda:N", role=LOCAL)
    runtime: str = setting(
        "auto",
        f"what scores the val split each epoch: {RUNTIME_HELP}",
        choices=RUNTIMES,
        role=LOCAL,
    )
    int8: bool = setting(
        False,
        "also write model.int8.onnx, the ONNX graph quantised to int8 (calibrated on 512 "
        "train photos), where it loses at most 0.2 points of val accuracy; served by "
        "default on CPUs with int8 dot products (VNNI)",
        role=PER_RUN,
    )
    resume: bool = setting(
        False, "continue from the newest checkpoint and its MLflow run", role=LOCAL
    )
    overwrite: bool = setting(
        False,
        "train afresh into an output that holds a trained model or a checkpoint: they are "
        "replaced once this run writes its first checkpoint (without it, or --resume, such "
        "an output is refused and left as it is)",
        role=LOCAL,
    )
    dry_run: bool = setting(False, "one batch of one epoch: a quick smoke test", role=LOCAL)
    checkpoint_uri: str | None = setting(
        None,
        "durable copy of each checkpoint: s3://BUCKET/PREFIX or a directory (the MLflow "
        "run's artifacts always hold one)",
        role=LOCAL,
    )
    mlflow_run_id: str | None = setting(None, "log into this existing MLflow run", role=LOCAL)
    kfp_run_id: str | None = setting(
        None, "tag the run with this Kubeflow Pipelines run id", role=LOCAL
    )
    pipeline_name: str | None = setting(None, "tag the run with this pipeline name", role=LOCAL)
    parent_run_id: str | None = setting(
        None, "nest the run under this MLflow run (a sweep's parent)", role=LOCAL
    )
    combination: str | None = setting(
        None, "the recipe settings of a sweep's child, as JSON: tagged, to resume by", role=LOCAL
    )
    trial: str | None = setting(
        None,
        "the search trial this run is (a Katib trial's name): tagged, to find it by",
        role=LOCAL,
    )
    metrics_stdout: bool = setting(
        False,
        "print each epoch's metrics on stdout as name=value lines, as Katib's StdOut "
        "metrics collector reads them",
        role=LOCAL,
    )

    def __post_init__(self) -> None:
        if self.model not in MODEL_NAMES:
            raise ValueError(
                f"unknown model {self.model!r}; expected one of: {', '.join(MODEL_NAMES)}"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"unknown schedule {self.schedule!r}; expected one of: {', '.join(SCHEDULES)}"
            )
        if self.epochs < 1 or self.batch_size < 1 or not 0 < self.lr < float("inf"):
            raise ValueError(
                f"expected epochs >= 1, batch size >= 1 and a finite lr > 0, found "
                f"{self.epochs}, {self.batch_size} and {self.lr}"
            )
        if not (0 < self.min_crop_area <= 1 and 0 <= self.label_smoothing < 1):
            raise ValueError(
                "expected 0 < min crop area <= 1 and 0 <= label smoothing < 1, found "
                f"{self.min_crop_area} and {self.label_smoothing}"
            )
        if self.validate_every < 1:
            raise ValueError(f"expected validate every >= 1 epochs, found {self.validate_every}")
        if self.start_size and self.start_size < 16:
            raise ValueError(f"expected a start size of 0 or at least 16, found {self.start_size}")
        most = BACKBONES[self.model].blocks if self.model in BACKBONES else 0
        if not 0 <= self.frozen_blocks <= most:
            raise ValueError(
                f"expected 0 to {most} frozen blocks for {self.model} (none but for a "
                f"pretrained net: {', '.join(BACKBONES)}), found {self.frozen_blocks}"
            )
        pretrained_only = {
            "frozen_statistics": self.frozen_statistics,
            "probe_photos": self.probe_photos,
        }
        asked = [name for name, value in pretrained_only.items() if value]
        if asked and self.model not in BACKBONES:
            raise ValueError(
                f"expected {' and '.join(asked)} with a pretrained net "
                f"({', '.join(BACKBONES)}), found {self.model}, which has no pretrained "
                "features or statistics"
            )
        if self.probe_photos < 0:
            raise ValueError(f"expected probe photos >= 0 (0: none), found {self.probe_photos}")
        self._check_cached_views()
        if self.train_photos < 0:
            raise ValueError(f"expected train photos >= 0 (0: all), found {self.train_photos}")
        if not 0 <= self.cutmix <= 1:
            raise ValueError(f"expected a CutMix share from 0 to 1, found {self.cutmix}")
        check_checkpoint_uri(self.checkpoint_uri, "checkpoint_uri")
        check_seed(self.seed, "seed")
        if not 0 <= self.weight_decay < float("inf"):
            raise ValueError(f"expected a finite weight decay >= 0, found {self.weight_decay}")

    def _check_cached_views(self) -> None:
        """Cached features fit a recipe whose frozen blocks see each photo unchanged."""
        if self.cached_views not in (0, 1, 2):
            raise ValueError(
                f"expected 0, 1 or 2 cached views (none, the photo, it and its mirror "
                f"image), found {self.cached_views}"
            )
        pixel_changes = {
            "cutmix": self.cutmix,
            "min_crop_area": self.min_crop_area != 1,
            "start_size": self.start_size,
        }
        changed = [name for name, value in pixel_changes.items() if value]
        if self.cached_views and (not self.frozen_blocks or changed):
            found = ", ".join(changed) if changed else "frozen_blocks 0"
            raise ValueError(
                "expected cached views with frozen blocks and none of cutmix, "
                f"min_crop_area below 1 or start_size (they change the pixels every epoch), "
                f"found {found}"
            )


def check_checkpoint_uri(uri: str | None, name: str) -> None:
    """Refuse, before any work, a checkpoint location that is neither S3 nor a folder path.

    Raises:
        ValueError: ``uri`` has another scheme (``file://``, ``http://``), a malformed
            S3 one (``s3:/bucket``) or a bucket name S3 would refuse.
    """
    if not uri or S3_PREFIX.fullmatch(uri) or not URI_SCHEME.match(uri):
        return
    raise ValueError(
        f"expected {name} as s3://BUCKET/PREFIX (a valid bucket name) or a folder path, "
        f"found {uri!r}"
    )
