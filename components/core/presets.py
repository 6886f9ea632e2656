"""Named settings along the trade-off: pick speed or accuracy by name.

Each preset is one set of settings by field name: the image shape, the training recipe
and the registration threshold (set below what the preset measured on the 23,000-photo
set, docs/BENCHMARKS.md, so that its documented run registers a model). A step takes the
ones its schema has, the pipeline all of them; a flag or pipeline parameter given
explicitly still wins.
"""

import argparse

from components.core.schema import pick

PRESETS: dict[str, dict[str, object]] = {
    # the tutorial's photos: grey 50×50, a net of its net's cost with batch norm (five
    # convs), flips and crops, a one-cycle schedule, the cpu preset's regularisation,
    # batches of 50, predictions averaged over mirrored and shifted views; 30 epochs, three
    # times the tutorial's 10, the val split scored every 5th: ten views of it cost half an
    # epoch (each chosen on validation: BENCHMARKS.md)
    "tutorial": {
        "image_size": 50,
        "channels": 1,
        "model": "five_conv_cnn",
        "epochs": 30,
        "batch_size": 50,
        "lr": 0.004,
        "weight_decay": 0.05,
        "schedule": "onecycle",
        "label_smoothing": 0.1,
        "mirror_average": True,
        "shift_average": True,
        "validate_every": 5,
        "min_accuracy": 0.88,
    },
    # 2 CPU cores, a train task within 15 minutes: RGB 96×96 through stem16_residual_cnn's
    # stride-2 stem for 30 epochs, with stronger weight decay, label smoothing, CutMix on
    # half the batches and predictions averaged over ten views, scored on val after the
    # last epoch only (ten views of val cost most of an epoch); the recipe searched on a GPU
    # at 50×50, the net, size, length, CutMix and views chosen on validation
    # (docs/BENCHMARKS.md)
    "cpu": {
        "image_size": 96,
        "channels": 3,
        "model": "stem16_residual_cnn",
        "epochs": 30,
        "batch_size": 100,
        "lr": 0.004,
        "weight_decay": 0.05,
        "schedule": "onecycle",
        "label_smoothing": 0.1,
        "cutmix": 0.5,
        "mirror_average": True,
        "shift_average": True,
        "validate_every": 30,
        "min_accuracy": 0.93,
    },
    # ImageNet-pretrained EfficientNet-Lite0 (weights from an installed package,
    # components.networks.pretrained) on RGB 192×192 photos: its first 16 blocks keep their
    # weights, the head conv and the classifier learn for 3 epochs, flips and crops,
    # predictions averaged over each photo and its mirror image (docs/BENCHMARKS.md)
    "pretrained": {
        "image_size": 192,
        "channels": 3,
        "model": "efficientnet_lite0",
        "frozen_blocks": 16,
        "epochs": 3,
        "batch_size": 64,
        "lr": 0.001,
        "weight_decay": 0.05,
        "schedule": "onecycle",
        "label_smoothing": 0.1,
        "mirror_average": True,
        "validate_every": 3,
        "min_accuracy": 0.97,
    },
    # accuracy first, for a GPU node: the pretrained preset's EfficientNet-Lite0 fine-tuned
    # whole at its native 224×224, random resized crops, label smoothing, mirrored views;
    # not yet measured on a GPU, so its gate is the pretrained preset's
    "accurate": {
        "image_size": 224,
        "channels": 3,
        "model": "efficientnet_lite0",
        "frozen_blocks": 0,
        "epochs": 10,
        "batch_size": 128,
        "lr": 0.0005,
        "weight_decay": 0.05,
        "schedule": "onecycle",
        "min_crop_area": 0.25,
        "label_smoothing": 0.1,
        "mirror_average": True,
        "min_accuracy": 0.97,
    },
}


def preset_values(name: str) -> dict[str, object]:
    """The settings of preset ``name``, by field name: pipeline parameters as they are."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of: {', '.join(PRESETS)}")
    return dict(PRESETS[name])


def apply_preset(parser: argparse.ArgumentParser, argv: list[str] | None, step: type) -> None:
    """Make ``--preset NAME`` in ``argv`` set ``parser``'s defaults for ``step``'s schema."""
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=None,
        help="named settings, overridden by explicit flags: "
        + "; ".join(f"{name}: {pick(step, values)}" for name, values in PRESETS.items()),
    )
    known, _ = parser.parse_known_args(argv)
    if known.preset:
        parser.set_defaults(**pick(step, preset_values(known.preset)))
