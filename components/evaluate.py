"""Evaluate step: a trained model on a held-out split -> metrics, plots, MLflow.

python -m components.evaluate --model DIR --data DIR --output DIR [--split test]
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import torch

from components import metrics as scoring
from components import plots, tracking
from components.atomic import write_json
from components.batches import DeviceSplit
from components.data import read_meta
from components.inference import predict_logits
from components.logs import setup_logging
from components.models import load_classifier
from components.runtime import pick_device

log = logging.getLogger(__name__)


def evaluate(
    model_dir: Path,
    data_dir: Path,
    output_dir: Path,
    *,
    split: str = "test",
    mlflow_run_id: str | None = None,
    experiment: str = "dogs-vs-cats",
    device: str = "auto",
) -> dict:
    """Score the model on ``split``; write metrics.json, roc.json and PNGs; log them to MLflow.

    The MLflow run is ``mlflow_run_id``, else the one the train step recorded beside
    the model; with neither, nothing is logged to MLflow.
    """
    model_dir, data_dir, output_dir = Path(model_dir), Path(data_dir), Path(output_dir)
    run_id = mlflow_run_id or _recorded_run_id(model_dir)
    if run_id:
        tracking.check_server()
    model, spec = load_classifier(model_dir)
    _check_inputs_fit(spec, read_meta(data_dir), data_dir)
    target = pick_device(device)
    data = DeviceSplit.load(data_dir, split, target)
    scores = torch.softmax(predict_logits(model.to(target), data), dim=1)[:, 1].cpu().numpy()
    labels = data.labels.cpu().numpy()
    report = _write_report(output_dir, spec["classes"], data.images.cpu().numpy(), labels, scores)
    if run_id:
        _log_to_mlflow(run_id, experiment, split, report, output_dir)
    else:
        log.warning("no MLflow run id given or recorded in %s; metrics not logged", model_dir)
    log.info("%s: %s", split, json.dumps(report["metrics"]))
    return report


def _check_inputs_fit(spec: dict, meta: dict, data_dir: Path) -> None:
    wanted = (spec["channels"], spec["image_size"])
    found = (meta["channels"], meta["image_size"])
    if wanted != found:
        raise ValueError(
            f"the model expects {wanted[0]}×{wanted[1]}×{wanted[1]} images, the data in "
            f"{data_dir} holds {found[0]}×{found[1]}×{found[1]}; preprocess with "
            f"--channels {wanted[0]} --image-size {wanted[1]}"
        )


def _write_report(output_dir: Path, classes, images, labels, scores) -> dict:
    output_dir.mkdir(parents=True, exist_ok=True)
    matrix = scoring.confusion_matrix(labels, (scores >= 0.5).astype(np.int64))
    report = {
        "metrics": scoring.classification_metrics(labels, scores),
        "confusion_matrix": matrix,
        "classes": classes,
        "count": int(len(labels)),
    }
    write_json(output_dir / "metrics.json", report)
    write_json(output_dir / "roc.json", scoring.roc_curve(labels, scores))
    plots.confusion_matrix_png(matrix, classes, output_dir / "confusion_matrix.png")
    plots.misclassified_png(images, labels, scores, classes, output_dir / "misclassified.png")
    return report


def _recorded_run_id(model_dir: Path) -> str | None:
    path = model_dir / "mlflow_run_id"
    return path.read_text().strip() if path.is_file() else None


def _log_to_mlflow(run_id: str, experiment: str, split: str, report: dict, output: Path) -> None:
    with tracking.start_run(experiment, run_id=run_id):
        tracking.log_metrics({f"{split}_{k}": v for k, v in report["metrics"].items()})
        for name in ("metrics.json", "roc.json", "confusion_matrix.png", "misclassified.png"):
            tracking.log_artifact(output / name, f"evaluation/{split}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.evaluate", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--model", required=True, type=Path, help="directory written by the train step"
    )
    parser.add_argument(
        "--data", required=True, type=Path, help="directory written by the preprocess step"
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help="directory for metrics.json, roc.json and the PNGs",
    )
    parser.add_argument(
        "--split", default="test", choices=("train", "val", "test"), help="(default: test)"
    )
    parser.add_argument(
        "--mlflow-run-id",
        default=None,
        help="MLflow run to log into (default: the one in MODEL/mlflow_run_id)",
    )
    parser.add_argument(
        "--experiment", default="dogs-vs-cats", help="MLflow experiment (default: dogs-vs-cats)"
    )
    parser.add_argument(
        "--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)"
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging()
    evaluate(
        args.model,
        args.data,
        args.output,
        split=args.split,
        mlflow_run_id=args.mlflow_run_id,
        experiment=args.experiment,
        device=args.device,
    )


if __name__ == "__main__":
    main()
