"""The named recipes: each a whole road, from the photos' shape to the node it trains on.

Each preset is one set of settings by field name (``components.recipes.recipe`` checks
them against the schemas): the image shape, the training recipe, the registration
threshold (set below what the preset measured on the 23,000-photo set, docs/BENCHMARKS.md,
so that its documented run registers a model), and where it trains (``Placement``: the
hardware, node selector, toleration and resources). A step takes the ones its schema has,
the pipeline all of them; a flag or pipeline parameter given explicitly still wins.
"""

# The recipe a command takes without --preset, and the one a recipe file without
# ``preset:`` starts from: the schemas' own defaults, named
DEFAULT_PRESET = "baseline"
# compile and submit, without --preset: the spec a cluster runs trains on a GPU node
CLUSTER_PRESET = "accurate"
# how every command's help says so, in the same words
DEFAULTS_SAID = (
    f"without --preset: {DEFAULT_PRESET} (a step, run, sweep, tune, a recipe file without "
    f"preset:), {CLUSTER_PRESET} for compile and submit (a GPU node)"
)

# a CPU node's train pod: 2 cores (what the CPU presets were measured on), memory for the
# arrays and the batches (the cpu preset's train step peaks at 2.5 GB: BENCHMARKS.md), no
# GPU, no GPU node selector or toleration
ON_CPU: dict[str, object] = {
    "hardware": "cpu",
    "node_selector": "",
    "toleration_key": "",
    "cpu": "2",
    "memory": "8Gi",
    "shm_size": "1Gi",
}
# a GPU node's train pod: one GPU, 3 cores (limit 6) and 12 GiB on a small GPU node, on the
# nodes NVIDIA's GPU Operator labels, tolerating their taint
ON_GPU: dict[str, object] = {
    "hardware": "gpu",
    "node_selector": "nvidia.com/gpu.present=true",
    "toleration_key": "nvidia.com/gpu",
    "cpu": "3",
    "memory": "12Gi",
    "shm_size": "2Gi",
}

# each preset's purpose, in one line: what --help shows
PURPOSES: dict[str, str] = {
    "baseline": "the classic tutorial's recipe: its net, grey 50x50, 10 epochs (CPU node)",
    "tutorial": "the tutorial's grey 50x50 photos, a better net and recipe (CPU node)",
    "cpu": "RGB 96x96 from scratch, within 15 minutes of 2 cores (CPU node)",
    "pretrained": "ImageNet EfficientNet-Lite2, accuracy first, on 2 cores (CPU node)",
    "few-photos": "EfficientNet-Lite2 for a few hundred photos: probe, then fine-tune (CPU node)",
    "accurate": "ImageNet EfficientNet-Lite0 fine-tuned whole (GPU node)",
}

PRESETS: dict[str, dict[str, object]] = {
    # the step schemas' own defaults, named: the classic tutorial's recipe (its net, grey
    # 50×50, 10 epochs) and its gate; what a step and a local run take without --preset
    "baseline": {
        "image_size": 50,
        "channels": 1,
        "model": "tutorial_cnn",
        "frozen_blocks": 0,
        "frozen_statistics": False,
        "probe_photos": 0,
        "cached_views": 0,
        "train_photos": 0,
        "int8": False,
        "epochs": 10,
        "batch_size": 100,
        "lr": 0.001,
        "weight_decay": 0.0,
        "schedule": "constant",
        "min_crop_area": 1.0,
        "label_smoothing": 0.0,
        "cutmix": 0.0,
        "mirror_average": False,
        "shift_average": False,
        "validate_every": 1,
        "min_accuracy": 0.85,
        **ON_CPU,
    },
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
        **ON_CPU,
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
        **ON_CPU,
    },
    # 2 CPU cores, a train task within 15 minutes, accuracy first: ImageNet-pretrained
    # EfficientNet-Lite2 (weights from an installed package, components.networks.pretrained)
    # at its native 260×260, its first 20 of 21 blocks frozen and their output computed
    # once for 4,000 train photos and their mirror images (cached_views); the last block,
    # the head conv and the classifier learn for 5 epochs on them, predictions averaged
    # over each photo and its mirror image; the net, frozen blocks, photos and epochs
    # chosen on validation (docs/BENCHMARKS.md); its int8 graph, kept where it scores val
    # within 0.2 points of float32, is what CPUs with VNNI serve, at over twice the speed
    "pretrained": {
        "image_size": 260,
        "channels": 3,
        "model": "efficientnet_lite2",
        "frozen_blocks": 20,
        "cached_views": 2,
        "train_photos": 4000,
        "int8": True,
        "epochs": 5,
        "batch_size": 64,
        "lr": 0.001,
        "weight_decay": 0.05,
        "schedule": "onecycle",
        "label_smoothing": 0.1,
        "mirror_average": True,
        "min_accuracy": 0.98,
        **ON_CPU,
    },
    # a few hundred photos a set, on 2 CPU cores: the same Lite2 at 260×260, its classifier
    # first fitted as a linear probe on the frozen net's pooled features (in seconds), then
    # its last 9 of 21 blocks fine-tuned from there on random resized crops and mirror
    # images for 15 epochs in batches of 32, every batch norm keeping its pretrained
    # statistics; where the `pretrained` preset's head, started at random, learns too little
    # before the last block fits 400 photos whole (the recipe against the probe, on the val
    # photos of five flower classes split three ways: docs/BENCHMARKS.md); a gate that 50
    # test photos can show
    "few-photos": {
        "image_size": 260,
        "channels": 3,
        "model": "efficientnet_lite2",
        "frozen_blocks": 12,
        "frozen_statistics": True,
        "probe_photos": 4000,
        "train_photos": 4000,
        "int8": True,
        "epochs": 15,
        "batch_size": 32,
        "lr": 0.0003,
        "weight_decay": 0.05,
        "schedule": "onecycle",
        "min_crop_area": 0.35,
        "label_smoothing": 0.1,
        "mirror_average": True,
        "min_accuracy": 0.75,
        **ON_CPU,
    },
    # accuracy first, for a GPU node: ImageNet-pretrained EfficientNet-Lite0 fine-tuned
    # whole at its native 224×224, random resized crops, label smoothing, mirrored views;
    # not yet measured on a GPU: its gate is set below what one epoch of it scored on 2 CPU
    # cores (docs/BENCHMARKS.md)
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
        "min_accuracy": 0.98,
        **ON_GPU,
    },
}
