"""Named settings along the trade-off: pick speed or accuracy by name.

Each preset sets the preprocess step's image shape, the train step's recipe and the
quality gate's threshold, set below what the preset measured on the 23,000-photo set
(docs/BENCHMARKS.md) so that its documented run registers a model; any flag or pipeline
parameter given explicitly still wins.
"""

PRESETS: dict[str, dict[str, dict]] = {
    # the tutorial's budget: grey 50×50, 10 epochs, no more CPU time than its loop; a net
    # of its cost with batch norm, flips and crops, a one-cycle schedule (docs/BENCHMARKS.md)
    "tutorial": {
        "preprocess": {"image_size": 50, "channels": 1},
        "train": {
            "model": "compact_cnn",
            "epochs": 10,
            "batch_size": 100,
            "lr": 0.004,
            "weight_decay": 0.0005,
            "schedule": "onecycle",
        },
        "register": {"min_accuracy": 0.85},
    },
    # at most 15 minutes of training on 2 CPU cores: RGB 50×50, the tutorial preset's net
    # for 17 epochs with stronger weight decay, label smoothing and mirror averaging; the
    # recipe searched on a GPU, then timed on the CPU (docs/BENCHMARKS.md)
    "cpu": {
        "preprocess": {"image_size": 50, "channels": 3},
        "train": {
            "model": "compact_cnn",
            "epochs": 17,
            "batch_size": 100,
            "lr": 0.004,
            "weight_decay": 0.05,
            "schedule": "onecycle",
            "label_smoothing": 0.1,
            "mirror_average": True,
        },
        "register": {"min_accuracy": 0.9},
    },
    # accuracy first, for a GPU: RGB 128×128, an untrained ResNet-18, flips and random
    # resized crops, label smoothing; the best of four recipes by val accuracy on an H100
    # (docs/BENCHMARKS.md), 71 s of training there
    "accurate": {
        "preprocess": {"image_size": 128, "channels": 3},
        "train": {
            "model": "resnet18",
            "epochs": 100,
            "batch_size": 256,
            "lr": 0.003,
            "weight_decay": 0.05,
            "schedule": "onecycle",
            "min_crop_area": 0.25,
            "label_smoothing": 0.1,
        },
        "register": {"min_accuracy": 0.93},
    },
}


def preset_values(name: str, step: str) -> dict:
    """The ``step`` (``preprocess``, ``train`` or ``register``) settings of preset ``name``."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of: {', '.join(PRESETS)}")
    return PRESETS[name][step]


def pipeline_arguments(name: str) -> dict:
    """Preset ``name`` as pipeline parameters: its image shape, recipe and gate."""
    steps = ("preprocess", "train", "register")
    return {key: value for step in steps for key, value in preset_values(name, step).items()}


def apply_preset(parser, argv: list[str] | None, step: str) -> None:
    """Make ``--preset NAME`` in ``argv`` set ``parser``'s defaults for ``step``."""
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=None,
        help="named settings, overridden by explicit flags: "
        + "; ".join(f"{n}: {v[step]}" for n, v in PRESETS.items()),
    )
    known, _ = parser.parse_known_args(argv)
    if known.preset:
        parser.set_defaults(**preset_values(known.preset, step))
