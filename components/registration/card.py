"""The registered version's model card: a description and tags that say what the model
is, what it was trained and judged on, and which run made it, on the registry's page."""

from __future__ import annotations

import json
from typing import Any

from components.core import schema
from components.core.names import INT8_FILE, ONNX_FILE, WEIGHTS_FILE
from components.data.arrays import SPLITS
from components.data.classes import metric_keys
from components.registration.challenge import TEST_DIGEST_TAG, TEST_PHOTOS_TAG, TEST_SHARE_TAG
from components.tracking.tags import CLASSES_TAG, SOURCE_LISTING_TAG
from components.training.config import TrainConfig

# the recipe a card states: every setting of the train step's that defines the result
RECIPE = tuple(field.name for field in schema.fields_of(TrainConfig, schema.RECIPE))
DATA = ("image_size", "channels", "split_seed")
# what a run records of the pretrained weights it started from (components.networks.pretrained)
BACKBONE = ("backbone", "backbone_package", "backbone_version", "backbone_license",
            "backbone_sha256", "backbone_trained_on", "backbone_dropout",
            "backbone_crop_fraction", "backbone_interpolation")  # fmt: skip
# the files that can answer for a model: the train step's weights, the MLflow model's
# torch program, and the float and int8 graphs
ANSWERING = (WEIGHTS_FILE, "data/model.pt2", ONNX_FILE, INT8_FILE)


def model_card(
    run_id: str,
    report: dict[str, Any],
    params: dict[str, str],
    digests: dict[str, str],
    files: dict[str, str],
) -> tuple[str, dict[str, str]]:
    """(description, tags) for the version the gate registers from ``run_id``.

    Args:
        run_id: the training run.
        report: the evaluate step's report on the test split (metrics, count, the file
            scored).
        params: the run's MLflow params (the recipe and the data's shape).
        digests: the run's input datasets' digests by name (``train-split``, ``test-split``).
        files: the digests the tracking store records for the model's files.
    """
    answering = {name: files[name] for name in ANSWERING if name in files}
    scored = report["scored"]
    metrics = report["metrics"]
    classes = report["classes"]
    recipe = {key: params[key] for key in RECIPE if key in params}
    shape = f"{params.get('channels', '?')}×{params.get('image_size', '?')}²"
    description = (
        f"Classifier of {len(classes)} classes ({recipe.get('model', '?')}, {shape} pixels): "
        f"test accuracy {metrics['accuracy']:.4f} on {report['count']} held-out photos "
        f"({_figures_by_class(metrics, classes)}), measured by the evaluate step on "
        f"{scored} (sha256 {files[scored][:12]}…). "
        f"{_counts_sentence(params, classes)} Trained by MLflow run {run_id}: "
        + ", ".join(f"{key}={value}" for key, value in recipe.items())
        + ". Files that answer, by sha256: "
        + ", ".join(f"{name} {digest[:12]}…" for name, digest in answering.items())
        + " (every loader checks them)."
        + _pretrained_sentence(params)
    )
    tags = {
        "mlflow_run_id": run_id,
        "model_id": report["model_id"],
        "scored": scored,
        **{f"sha256.{name}": digest for name, digest in answering.items()},
        CLASSES_TAG: json.dumps(classes, ensure_ascii=False),
        "test_accuracy": f"{metrics['accuracy']:.4f}",
        "test_macro_f1": f"{metrics['macro_f1']:.4f}",
        **({"test_roc_auc": f"{metrics['roc_auc']:.4f}"} if "roc_auc" in metrics else {}),
        "test_count": str(report["count"]),
        **{f"recipe.{key}": str(value) for key, value in recipe.items()},
        **{f"data.{key}": params[key] for key in DATA if key in params},
        **{key.replace("_", ".", 1): params[key] for key in BACKBONE if key in params},
        **{f"data.{name}.digest": digest for name, digest in sorted(digests.items())},
        TEST_DIGEST_TAG: report["split_sha256"],
        **({TEST_PHOTOS_TAG: report["photos"]} if report.get("photos") else {}),
        **_source_tags(report.get("source_listing")),
    }
    return description, tags


def _source_tags(source: object) -> dict[str, str]:
    """What the card records of the check of the test split against its source's listing:
    the listing's sha256 and the test share's fraction (the model trained on no photo in
    it); nothing where it was not checked."""
    if not isinstance(source, dict):
        return {}
    return {SOURCE_LISTING_TAG: str(source["sha256"]), TEST_SHARE_TAG: str(source["test_fraction"])}


def _figures_by_class(metrics: dict[str, float], classes: list[str]) -> str:
    """Each class's recall, the macro F1 and, for two classes, the ROC AUC: ``cat
    0.9800, dog 0.9900; macro F1 0.9850; ROC AUC 0.9990``."""
    recalls = ", ".join(
        f"{name} {metrics[f'{key}_recall']:.4f}"
        for name, key in zip(classes, metric_keys(classes), strict=True)
    )
    roc = f"; ROC AUC {metrics['roc_auc']:.4f}" if "roc_auc" in metrics else ""
    return f"recall by class: {recalls}; macro F1 {metrics['macro_f1']:.4f}{roc}"


def _counts_sentence(params: dict[str, str], classes: list[str]) -> str:
    """The photos of each class in each split, as the training run recorded them."""
    keys = metric_keys(classes)
    splits = [
        f"{split} " + ", ".join(f"{params.get(f'data_{split}_{key}', '?')} {key}" for key in keys)
        for split in SPLITS
    ]
    return f"Photos by class: {'; '.join(splits)}."


def _pretrained_sentence(params: dict[str, str]) -> str:
    """What the card says of the pretrained weights the net started from, if any."""
    if "backbone" not in params:
        return " Trained from scratch on these photos alone."
    return (
        f" Started from {params['backbone']}'s pretrained weights, which saw "
        f"{params.get('backbone_trained_on', '?')}: package {params.get('backbone_package')} "
        f"{params.get('backbone_version')} ({params.get('backbone_license')} license), "
        f"sha256 {params.get('backbone_sha256')}. Its source trained it with dropout "
        f"{params.get('backbone_dropout')} and scores photos resized "
        f"{params.get('backbone_interpolation')} and centre-cropped to "
        f"{params.get('backbone_crop_fraction')} of their side."
    )
