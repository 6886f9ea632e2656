"""A sweep's MLflow runs: the parent that holds the children, and the best child marked."""

from __future__ import annotations

import json
import logging
from typing import NamedTuple

from components.core import tracking
from pipeline.sweep import BEST_TAG, compare_url, ui_address

log = logging.getLogger(__name__)

GRID_FILE = "sweep_grid.json"


class Best(NamedTuple):
    """The child with the best validation accuracy, and where to compare all children."""

    run_id: str
    val_accuracy: float
    test_accuracy: float
    compare_url: str


def start_parent(experiment: str, grid: list[str], kfp_run_id: str, pipeline_name: str) -> str:
    """The sweep's parent run, tagged with the KFP run and holding the grid; its id.

    Where KFP tracks the pipeline run in MLflow, its parent run is the sweep's: KFP nests
    each iteration's tasks under it, and no second tree grows beside it.
    """
    names = sorted({name for combination in grid for name in json.loads(combination)})
    tags = {
        tracking.KFP_RUN_ID_TAG: kfp_run_id,
        tracking.KFP_PIPELINE_TAG: pipeline_name,
        tracking.SWEEP_PARENT_TAG: "true",
    }
    task = tracking.kfp_task()
    if task:
        run_id = tracking.run_tag(task.run_id, tracking.PARENT_TAG) or task.run_id
        tracking.set_run_tags(run_id, tags)
    else:
        name = f"sweep {' '.join(names)} ({len(grid)} runs)"
        run_id = tracking.create_run(experiment, run_name=name, tags=tags)
    # the grid whole as an artifact (a param is cut at 6,000 characters), its shape as params
    tracking.log_json_into(run_id, {"combinations": [json.loads(c) for c in grid]}, GRID_FILE)
    tracking.log_params_into(run_id, {"sweep_axes": " ".join(names), "sweep_size": len(grid)})
    return run_id


def mark_best(parent_run_id: str, child_run_ids: list[str]) -> Best:
    """Mark the child with the best validation accuracy, on it and on the parent; end the
    parent, unless KFP made it (KFP ends the pipeline run's runs).

    Test accuracy plays no part in the choice: it is reported, never tuned on.
    """
    if not child_run_ids:
        raise ValueError("expected at least one child run, found none: the grid was empty")
    best, val_accuracy = tracking.best_run(child_run_ids, "val_accuracy")
    test_accuracy = tracking.run_metrics(best).get("test_accuracy", float("nan"))
    tracking.set_run_tags(best, {BEST_TAG: "true"})
    tracking.finish_run(
        parent_run_id,
        metrics={"best_val_accuracy": val_accuracy, "best_test_accuracy": test_accuracy},
        tags={"sweep.best_run_id": best},
        status=None if tracking.kfp_task() else "FINISHED",
    )
    url = compare_url(
        ui_address(tracking.tracking_uri()), tracking.experiment_of(best), child_run_ids
    )
    log.info("best of %d: %s (val_accuracy %.4f)", len(child_run_ids), best, val_accuracy)
    return Best(best, val_accuracy, test_accuracy, url)
