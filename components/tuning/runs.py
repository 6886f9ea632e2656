"""Sweeps and searches in MLflow: a parent run for each, a child run per combination or
trial, the best marked.

Each child is the train step's own run (nested under the parent), with its params and
per-epoch metrics; what the sweep or search decided about it (stopped early, best) is
added here, so MLflow's compare view of the children shows it. Where KFP tracks the
pipeline run in MLflow, KFP's runs are the parents: no second tree grows beside them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Any, NamedTuple

from components.core.search_space import Dimension
from components.tracking import kfp_tracking, run_log, store
from components.tracking.tags import KFP_PIPELINE_TAG, KFP_RUN_ID_TAG, PARENT_TAG, SWEEP_PARENT_TAG
from components.tuning.config import TuneConfig
from components.tuning.grid import BEST_TAG, compare_url, ui_address
from components.tuning.report import OBJECTIVE

log = logging.getLogger(__name__)

SPACE_FILE = "search_space.json"
GRID_FILE = "sweep_grid.json"
TUNE_PARENT_TAG = "tune.parent"  # "true" on a search's parent run
STOPPED_EARLY_TAG = "tune.stopped_early"  # "true" on a trial the median rule stopped
TUNE_BEST_TAG = "tune.best"  # "true" on the search's best trial


class Trial(NamedTuple):
    """One trial as the search ended it: its MLflow run, and whether it was stopped early."""

    name: str
    run_id: str
    stopped_early: bool


def start_search(
    experiment: str, name: str, tune: TuneConfig, space: tuple[Dimension, ...], tags: dict[str, Any]
) -> str:
    """The search's parent run, holding its settings and search space; its id.

    Where KFP tracks the pipeline run in MLflow, the search task's own run is the parent.
    """
    tags = {**tags, TUNE_PARENT_TAG: "true"}
    task = kfp_tracking.kfp_task()
    if task:
        run_id = task.run_id
        run_log.set_run_tags(run_id, tags)
    else:
        run_id = run_log.create_run(experiment, run_name=f"search {name}", tags=tags)
    run_log.log_params_into(run_id, {f"tune_{key}": value for key, value in asdict(tune).items()})
    run_log.log_json_into(run_id, {"dimensions": [_described(d) for d in space]}, SPACE_FILE)
    return run_id


def finish_search(parent_run_id: str, trials: list[Trial]) -> Trial:
    """Mark each trial stopped early, and the best finished one; end the parent (unless KFP
    made it). The best.

    The best is the finished trial with the highest last-epoch validation accuracy (the
    model it wrote is that epoch's); a trial stopped early wrote none.

    Raises:
        ValueError: no trial finished.
    """
    for trial in trials:
        if trial.stopped_early:
            run_log.finish_run(trial.run_id, {}, {STOPPED_EARLY_TAG: "true"}, "KILLED")
    finished = [trial for trial in trials if not trial.stopped_early]
    if not finished:
        raise ValueError(f"expected at least one finished trial, found {len(trials)} stopped")
    best_id, score = run_log.best_run([trial.run_id for trial in finished], OBJECTIVE)
    (best,) = [trial for trial in finished if trial.run_id == best_id]
    run_log.set_run_tags(best.run_id, {TUNE_BEST_TAG: "true"})
    run_log.finish_run(
        parent_run_id,
        metrics={
            f"best_{OBJECTIVE}": score,
            "trials_finished": len(finished),
            "trials_stopped_early": len(trials) - len(finished),
        },
        tags={"tune.best_run_id": best.run_id, "tune.best_trial": best.name},
        status=None if kfp_tracking.kfp_task() else "FINISHED",
    )
    log.info("best of %d trials: %s (%s %.4f)", len(trials), best.name, OBJECTIVE, score)
    return best


class Best(NamedTuple):
    """The child with the best validation accuracy, and where to compare all children."""

    run_id: str
    val_accuracy: float
    test_accuracy: float
    compare_url: str


def start_sweep(experiment: str, grid: list[str], kfp_run_id: str, pipeline_name: str) -> str:
    """The sweep's parent run, tagged with the KFP run and holding the grid; its id.

    Where KFP tracks the pipeline run in MLflow, its parent run is the sweep's: KFP nests
    each iteration's tasks under it, and no second tree grows beside it.
    """
    names = sorted({name for combination in grid for name in json.loads(combination)})
    tags = {
        KFP_RUN_ID_TAG: kfp_run_id,
        KFP_PIPELINE_TAG: pipeline_name,
        SWEEP_PARENT_TAG: "true",
    }
    task = kfp_tracking.kfp_task()
    if task:
        run_id = run_log.run_tag(task.run_id, PARENT_TAG) or task.run_id
        run_log.set_run_tags(run_id, tags)
    else:
        name = f"sweep {' '.join(names)} ({len(grid)} runs)"
        run_id = run_log.create_run(experiment, run_name=name, tags=tags)
    # the grid whole as an artifact (a param is cut at 6,000 characters), its shape as params
    run_log.log_json_into(run_id, {"combinations": [json.loads(c) for c in grid]}, GRID_FILE)
    run_log.log_params_into(run_id, {"sweep_axes": " ".join(names), "sweep_size": len(grid)})
    return run_id


def finish_sweep(parent_run_id: str, child_run_ids: list[str]) -> Best:
    """Mark the child with the best validation accuracy, on it and on the parent; end the
    parent, unless KFP made it (KFP ends the pipeline run's runs).

    Test accuracy plays no part in the choice: it is reported, never tuned on.
    """
    if not child_run_ids:
        raise ValueError("expected at least one child run, found none: the grid was empty")
    best, val_accuracy = run_log.best_run(child_run_ids, "val_accuracy")
    test_accuracy = run_log.run_metrics(best).get("test_accuracy", float("nan"))
    run_log.set_run_tags(best, {BEST_TAG: "true"})
    run_log.finish_run(
        parent_run_id,
        metrics={"best_val_accuracy": val_accuracy, "best_test_accuracy": test_accuracy},
        tags={"sweep.best_run_id": best},
        status=None if kfp_tracking.kfp_task() else "FINISHED",
    )
    url = compare_url(ui_address(store.tracking_uri()), run_log.experiment_of(best), child_run_ids)
    log.info("best of %d: %s (val_accuracy %.4f)", len(child_run_ids), best, val_accuracy)
    return Best(best, val_accuracy, test_accuracy, url)


def _described(dimension: Dimension) -> dict[str, Any]:
    return {key: value for key, value in asdict(dimension).items() if value not in (None, ())}
