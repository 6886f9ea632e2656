"""Scoring a trained model on a split: metrics.json, roc.json, PNGs, and the MLflow run.

The logic behind ``python -m components.evaluate``; it imports MLflow, which the command
line loads only once its flags are parsed. On a CPU the model is scored by ONNX Runtime
and torch is not loaded; it loads only for the torch runtime, or to ask whether a GPU
is there where NVIDIA's driver is.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from mlflow.data.meta_dataset import MetaDataset

from components.core import cuda
from components.core.atomic import atomic_directory, check_replaceable, write_json
from components.core.identity import sha256_of
from components.core.names import (
    INT8_FILE,
    INT8_RUNTIME,
    ONNX_FILE,
    RUN_ID_FILE,
    TEST_PHOTOS_DIR,
    WEIGHTS_FILE,
)
from components.data.arrays import (
    open_split,
    photo_shape,
    photos_sha256,
    read_meta,
    shards_digest,
    split_file_sha256,
)
from components.data.classes import metric_keys
from components.data.kept_photos import replace_batch_with_kept_photos
from components.data.shards import MappedSplit
from components.evaluation import metrics as scoring
from components.evaluation import plots, source_check
from components.evaluation.config import EvaluateConfig
from components.scoring.loading import Record, folder_record, load_scorer
from components.scoring.scorers import class_probabilities, pick_runtime, score_batches
from components.tracking import logged_models, run_log, store
from components.tracking.tags import EVALUATION_DIGEST_TAG, TEST_PHOTOS_PARAM, TEST_SPLIT_PARAM

Logits = Callable[[np.ndarray], np.ndarray]  # uint8 N×C×S×S images to float N×K logits

log = logging.getLogger(__name__)


def evaluate(cfg: EvaluateConfig) -> dict[str, Any]:
    """Score the model on a split; write metrics.json, roc.json and PNGs; log them to MLflow.

    On a CPU, ``--runtime auto`` scores every graph the model may be served by: its
    float32 graph, and its int8 graph where it has one (its report in ``int8/`` of the
    output, its figures logged as ``{split}_int8_*``): the gate judges both.

    Args:
        cfg: the model directory (the train step's output), the data (the preprocess step's), the
            output for the report files, the split, device and MLflow run; the MLflow run
            defaults to the one the train step recorded beside the model, and with
            neither nothing is logged.

    Returns:
        The report of the first graph scored (the float32 one, where both are): metrics,
        confusion matrix and ROC points.
    """
    model_dir, data_dir, output_dir = Path(cfg.model_dir), Path(cfg.data), Path(cfg.output)
    check_replaceable(output_dir, "evaluate")  # at once, not after the scoring
    run_id = cfg.mlflow_run_id or _recorded_run_id(model_dir)
    runtimes = _runtimes_to_score(cfg, model_dir)
    if not (model_dir / WEIGHTS_FILE).is_file():
        raise FileNotFoundError(
            f"expected {WEIGHTS_FILE} from the train step at {model_dir}, found none"
        )
    model_id, record = _run_model(run_id) if run_id else (None, None)
    record = record or folder_record(model_dir)
    checked = {  # before anything is read
        runtime: record.check(model_dir, [WEIGHTS_FILE, _scored_file(runtime)])
        for runtime in runtimes
    }
    meta = read_meta(data_dir)
    mapped = open_split(data_dir, cfg.split)
    labels = mapped.labels
    # what was scored: these arrays, and which photos they hold at any size; the gate
    # compares models by them, so they must be the test split the training recorded
    split = split_file_sha256(data_dir, cfg.split)
    claimed = meta.get("photos_sha256", {}).get(cfg.split)
    listing = None
    if run_id and cfg.split == "test":
        params = run_log.run_params(run_id)
        _check_trained_beside(run_id, params, split, claimed, labels, meta, data_dir)
        listing = source_check.listing_run(cfg.source_listing, params, run_id)
    models = [_model(model_dir, runtime, cfg.device) for runtime in runtimes]
    for takes, _ in models:
        _check_model_fits(takes, meta, data_dir)
    kept = cfg.split == "test" and (data_dir / TEST_PHOTOS_DIR).is_dir()
    scored_logits, read = _scored(data_dir, mapped, [logits for _, logits in models], kept)
    photos = photos_sha256(read) if kept else None
    if kept and photos != claimed:
        raise ValueError(
            f"expected the photos kept in {data_dir / TEST_PHOTOS_DIR} to be the ones "
            f"{data_dir / 'meta.json'} names (photos sha256 {str(claimed)[:12]}…), found "
            f"{str(photos)[:12]}…"
        )
    source = None
    if listing and kept:
        source = source_check.check_against_source(listing, meta, read, data_dir)
    elif cfg.split == "test":
        log.warning(
            "the test split is not checked against a source listing (no download step "
            "recorded one for these photos): the gate will not compare this model with "
            "the version that holds its alias"
        )
    classes = meta["classes"]
    scored_graphs = []
    for runtime, logits in zip(runtimes, scored_logits, strict=True):
        scored = _scored_file(runtime)
        probabilities = class_probabilities(logits)
        scoring_record = {
            "model_id": model_id,
            "scored": scored,
            "sha256": checked[runtime],
            "split_sha256": split,
            "photos": photos,
            "source_listing": source,
        }
        report = _report(classes, labels, probabilities, scoring_record)
        figures = _figures(classes, _PhotosOnDisk(mapped), labels, probabilities)
        scored_graphs.append((report, probabilities, figures))
        log.info("%s (%s): %s", cfg.split, scored, json.dumps(report["metrics"]))
    folders = _write_reports(output_dir, labels, scored_graphs)
    if run_id and model_id:  # the run, and its model is the one scored
        for runtime, folder, (report, _, figures) in zip(
            runtimes, folders, scored_graphs, strict=True
        ):
            _log_report(run_id, cfg.split, runtime, report, data_dir, folder, figures)
    else:
        log.warning("no MLflow run id given or recorded in %s; metrics not logged", model_dir)
    return scored_graphs[0][0]


def _dataset(data_dir: Path, split: str) -> MetaDataset:
    """The split as the MLflow dataset its metrics are linked to."""
    meta = read_meta(data_dir)
    return run_log.split_dataset(split, data_dir, shards_digest(meta, split), photo_shape(meta))


def _runtimes_to_score(cfg: EvaluateConfig, model_dir: Path) -> list[str]:
    """The runtimes ``cfg`` scores the model by: the one asked for, and with ``auto`` on
    a CPU the float32 graph's and, where the model has one, the int8 graph's.

    Raises:
        FileNotFoundError: onnx-int8 asked for, and the model has no int8 graph.
    """
    runtime = pick_runtime(cfg.runtime, _device_type(cfg.device))
    has_int8 = (model_dir / INT8_FILE).is_file()
    if runtime == INT8_RUNTIME and not has_int8:
        raise FileNotFoundError(
            f"expected {INT8_FILE} in {model_dir} for --runtime {INT8_RUNTIME} (train with "
            "--int8), found none"
        )
    if cfg.runtime == "auto" and runtime == "onnx" and has_int8:
        return ["onnx", INT8_RUNTIME]
    return [runtime]


def _scored_file(runtime: str) -> str:
    """The model file a runtime scores."""
    return {"torch": WEIGHTS_FILE, INT8_RUNTIME: INT8_FILE}.get(runtime, ONNX_FILE)


def _log_report(
    run_id: str,
    split: str,
    runtime: str,
    report: dict[str, Any],
    data_dir: Path,
    folder: Path,
    figures: dict[str, Figure],
) -> None:
    """Log a report into the finished training run without reopening it (its status stays
    FINISHED whatever stops this step), and its digest into the tracking store, which
    the gate checks the report against; the int8 graph's figures apart (``{split}_int8``)."""
    prefix = f"{split}_int8" if runtime == INT8_RUNTIME else split
    run_log.log_evaluation_into(
        run_id,
        split,
        report["metrics"],
        report["model_id"],
        _dataset(data_dir, split),
        prefix=prefix,  # fmt: skip
    )
    written = [folder / name for name in ("metrics.json", "roc.json", *figures)]
    run_log.log_artifacts_into(run_id, written, f"evaluation/{prefix}")
    digest = sha256_of(folder / "metrics.json")
    run_log.set_run_tags(run_id, {EVALUATION_DIGEST_TAG.format(prefix=prefix): digest})


BATCH = 256  # photos read, checked and scored at a time


def _scored(
    data_dir: Path, mapped: MappedSplit, scorers: list[Logits], kept: bool
) -> tuple[list[np.ndarray], list[tuple[str, int]]]:
    """Each scorer's logits for the split's photos, read a batch at a time; with ``kept``,
    each batch's arrays replaced first by the photo files preprocess kept beside them
    (each must decode to its array's pixels), so that the photos themselves are scored,
    and their sha256s and labels: which photos were scored, at any size."""
    outputs: list[list[np.ndarray]] = [[] for _ in scorers]
    read: list[tuple[str, int]] = []
    for start in range(0, len(mapped), BATCH):
        images = mapped.images(slice(start, start + BATCH))
        if kept:
            labels = mapped.labels[start : start + BATCH]
            read += replace_batch_with_kept_photos(data_dir, images, labels, start)
        for output, scorer in zip(outputs, scorers, strict=True):
            output.append(scorer(images))
    return [np.concatenate(output) for output in outputs], read


class _PhotosOnDisk:
    """A split's photos by position, each read from its shard when asked for."""

    def __init__(self, mapped: MappedSplit):
        self.mapped = mapped

    def __getitem__(self, index: int) -> np.ndarray:
        photo: np.ndarray = self.mapped.images(np.array([index]))[0]
        return photo


def _check_trained_beside(
    run_id: str,
    params: dict[str, str],
    split: str,
    photos: str | None,
    labels: np.ndarray,
    meta: dict[str, Any],
    data_dir: Path,
) -> None:
    """Refuse a test split other than the one the training run recorded (its arrays'
    sha256 and its photos'): a split edited or cherry-picked after training would let
    the gate judge the model, or compare it with another, on photos it was never meant for.

    Raises:
        ValueError: the arrays or the photos digest differ from the run's record.
    """
    recorded, recorded_photos = params.get(TEST_SPLIT_PARAM), params.get(TEST_PHOTOS_PARAM)
    if recorded == split and recorded_photos == photos:
        return
    classes = meta["classes"]
    keys = metric_keys(classes)
    expected = ", ".join(f"{params.get(f'data_test_{key}', '?')} {key}" for key in keys)
    found = ", ".join(
        f"{count} {key}"
        for key, count in zip(keys, np.bincount(labels, minlength=len(keys)), strict=True)
    )
    raise ValueError(
        f"refusing to score MLflow run {run_id}'s model on the test split in {data_dir}: "
        f"expected the split its training recorded (arrays sha256 {str(recorded)[:12]}…, "
        f"photos {str(recorded_photos)[:12]}…, {expected}), found arrays sha256 {split[:12]}…, "
        f"photos {str(photos)[:12]}…, {found[:300]}; evaluate on the arrays the "
        "model was trained beside"
    )


def _device_type(name: str) -> str:
    """The type of device ``--device name`` scores on: "cpu" without loading torch where
    no NVIDIA driver is (``auto``) or the CPU is asked for; else torch's answer."""
    if name == "cpu" or (name == "auto" and not cuda.driver_present()):
        return "cpu"
    from components.training.runtime import pick_device

    return pick_device(name).type


def _model(
    model_dir: Path, runtime: str, device_name: str
) -> tuple[tuple[int, int, list[str]], Logits]:
    """The photos the model takes (channels, side), the classes it answers, and its
    logits: ONNX Runtime for an ONNX runtime, else the weights in torch on ``device_name``."""
    if runtime != "torch":
        loaded = load_scorer(str(model_dir), runtime)
        takes = (loaded.channels, loaded.image_size, list(loaded.classes))
        return takes, functools.partial(score_batches, loaded.scorer)
    import torch

    from components.networks.models import load_classifier
    from components.training.batches import DeviceSplit
    from components.training.inference import predict_logits
    from components.training.runtime import pick_device

    device = pick_device(device_name)
    model, spec = load_classifier(model_dir)
    model.to(device)

    def logits(images: np.ndarray) -> np.ndarray:
        pixels = torch.from_numpy(images).to(device)
        no_labels = torch.zeros(len(images), dtype=torch.int64, device=device)  # not read
        return predict_logits(model, DeviceSplit(pixels, no_labels)).float().cpu().numpy()

    return (spec["channels"], spec["image_size"], spec["classes"]), logits


def _check_model_fits(
    wanted: tuple[int, int, list[str]], meta: dict[str, Any], data_dir: Path
) -> None:
    """Refuse a model of other photos than the data's, or of other classes."""
    if wanted[2] != meta["classes"]:
        raise ValueError(
            f"the model answers the classes {', '.join(wanted[2])[:200]}, the data in "
            f"{data_dir} holds {', '.join(meta['classes'])[:200]}; evaluate it on photos of "
            "its own classes"
        )
    found = (meta["channels"], meta["image_size"])
    if wanted[:2] != found:
        raise ValueError(
            f"the model expects {wanted[0]}×{wanted[1]}×{wanted[1]} images, the data in "
            f"{data_dir} holds {found[0]}×{found[1]}×{found[1]}; preprocess with "
            f"--channels {wanted[0]} --image-size {wanted[1]}"
        )


def _run_model(run_id: str) -> tuple[str, Record]:
    """The id of the run's logged model and the digests the tracking store records for
    its files: an evaluation is logged only into the run whose model it scored.

    Raises:
        ModelIdentityError: the run's model records no digests.
    """
    store.check_server()
    model_id = logged_models.logged_model_id(run_id)
    where = f"MLflow run {run_id}'s model {model_id} (the tracking store)"
    return model_id, Record(logged_models.recorded_identity(model_id), where)


def _figures(
    classes: list[str], images: plots.Photos, labels: np.ndarray, probabilities: np.ndarray
) -> dict[str, Figure]:
    """The evaluation's figures by file name: a confusion matrix, the misclassified."""
    matrix = scoring.confusion_matrix(labels, probabilities.argmax(1), len(classes))
    wrong, _ = plots.misclassified_figure(images, labels, probabilities, classes)
    return {
        "confusion_matrix.png": plots.confusion_matrix_figure(matrix, classes),
        "misclassified.png": wrong,
    }


def _report(
    classes: list[str],
    labels: np.ndarray,
    probabilities: np.ndarray,
    scoring_record: dict[str, Any],
) -> dict[str, Any]:
    """A graph's report: ``scoring_record`` (the logged model's id, the file scored and the
    digests of the files read) with the metrics, and the positions of the photos it got
    wrong (the gate pairs them with another model's on the same photos); the gate
    registers a model only on an evaluation of its own files."""
    predicted = probabilities.argmax(1)
    return {
        **scoring_record,
        "metrics": scoring.classification_metrics(labels, probabilities, classes),
        "confusion_matrix": scoring.confusion_matrix(labels, predicted, len(classes)),
        "classes": classes,
        "count": int(len(labels)),
        "wrong": np.flatnonzero(predicted != labels).tolist(),
    }


def _write_reports(
    output_dir: Path,
    labels: np.ndarray,
    scored_graphs: list[tuple[dict[str, Any], np.ndarray, dict[str, Figure]]],
) -> list[Path]:
    """Each graph's report, ROC points and figures, written into ``output_dir`` whole (a
    folder this step wrote, or none): the first graph's there, a second's in ``int8/``.
    Returns the folder of each."""
    folders = [output_dir, output_dir / "int8"][: len(scored_graphs)]
    with atomic_directory(output_dir, "evaluate") as staging:
        for folder, (report, probabilities, figures) in zip(folders, scored_graphs, strict=True):
            written = staging / folder.relative_to(output_dir)
            written.mkdir(exist_ok=True)
            write_json(written / "metrics.json", report)
            write_json(written / "roc.json", scoring.roc_curve(labels, probabilities))
            for name, figure in figures.items():
                figure.savefig(written / name, dpi=100)
    return folders


def _recorded_run_id(model_dir: Path) -> str | None:
    path = model_dir / RUN_ID_FILE
    return path.read_text().strip() if path.is_file() else None
