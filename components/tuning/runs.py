"""Every search in MLflow, whichever runs its trials: a parent run, a child run per trial,
the best marked.

A search's trials are a grid's combinations (the KFP sweep), Katib's trials (the search
on the cluster) or Optuna's (``tune --local``). Each trial is the train step's own run,
nested under the parent, with its params and per-epoch metrics. Whatever ran them, the
trials come back as ``Trial``s and ``close_search`` judges them alike: stopped-early ones
are marked, the best finished one is chosen on validation and tagged, and the parent
records the outcome. Where KFP tracks the pipeline run in MLflow, KFP's runs are the
parents: no second tree grows beside them.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict
from typing import Any, NamedTuple

from components.tracking import kfp_tracking, run_log, store
from components.tracking.tags import (
    BEST_TAG,
    COMBINATION_TAG,
    GRID_SEARCH,
    KFP_PIPELINE_TAG,
    KFP_RUN_ID_TAG,
    PARENT_TAG,
    SEARCH_TAG,
    STOPPED_EARLY_TAG,
)
from components.tracking.ui import compare_url, ui_address
from components.tuning.config import TuneConfig
from components.tuning.report import OBJECTIVE
from components.tuning.search_space import Dimension

log = logging.getLogger(__name__)

SPACE_FILE = "search_space.json"  # a Katib or Optuna search's record: the space it searched
GRID_FILE = "sweep_grid.json"  # a grid's record: every combination, whole


class Trial(NamedTuple):
    """One trial as its search ended it: its name, its MLflow run, whether it was stopped."""

    name: str
    run_id: str
    stopped_early: bool = False


class Best(NamedTuple):
    """The best finished trial, its accuracies, and where to compare every trial."""

    name: str
    run_id: str
    val_accuracy: float
    test_accuracy: float
    compare_url: str


def open_search(
    experiment: str,
    kind: str,
    name: str,
    params: dict[str, object],
    record: tuple[str, dict[str, Any]],
    tags: dict[str, str],
) -> str:
    """The search's parent run, named ``name`` (where this makes it), tagged with its
    ``kind`` and holding its ``params`` and its ``record`` (a JSON artifact: the grid, or
    the space searched); its id.

    Where KFP tracks the pipeline run in MLflow, KFP's run is the parent: for a grid the
    pipeline run's (KFP nests each iteration's tasks under it), else the search task's.
    """
    tags = {**tags, SEARCH_TAG: kind}
    task = kfp_tracking.kfp_task()
    if task:
        grid_parent = run_log.run_tag(task.run_id, PARENT_TAG) if kind == GRID_SEARCH else None
        run_id = grid_parent or task.run_id
        run_log.set_run_tags(run_id, tags)
    else:
        run_id = run_log.create_run(experiment, run_name=name, tags=tags)
    file_name, content = record
    run_log.log_json_into(run_id, content, file_name)  # whole: a param is cut at 6,000 characters
    run_log.log_params_into(run_id, params)
    return run_id


def open_space_search(
    experiment: str,
    kind: str,
    name: str,
    tune: TuneConfig,
    space: tuple[Dimension, ...],
    tags: dict[str, str],
) -> str:
    """``open_search`` for a search of ``space``: its settings as ``tune_*`` params, the
    space as its record."""
    params = {f"tune_{key}": value for key, value in asdict(tune).items()}
    dimensions = [
        {key: value for key, value in asdict(d).items() if value not in (None, ())} for d in space
    ]
    record = (SPACE_FILE, {"dimensions": dimensions})
    return open_search(experiment, kind, f"search {name}", params, record, tags)


def open_grid(experiment: str, combinations: list[str], kfp_run_id: str, pipeline_name: str) -> str:
    """``open_search`` for a grid: every combination whole as its record, its axes and size
    as params, tagged with the KFP run that sweeps it."""
    names = sorted({name for combination in combinations for name in json.loads(combination)})
    return open_search(
        experiment,
        GRID_SEARCH,
        f"sweep {' '.join(names)} ({len(combinations)} runs)",
        {"sweep_axes": " ".join(names), "sweep_size": len(combinations)},
        (GRID_FILE, {"combinations": [json.loads(c) for c in combinations]}),
        {KFP_RUN_ID_TAG: kfp_run_id, KFP_PIPELINE_TAG: pipeline_name},
    )


def grid_trials(child_run_ids: list[str]) -> list[Trial]:
    """A grid's children as trials, each named by the combination it trained."""
    return [
        Trial(run_log.run_tag(run_id, COMBINATION_TAG) or run_id, run_id)
        for run_id in child_run_ids
    ]


def close_search(parent_run_id: str, trials: list[Trial]) -> Best:
    """Mark each trial stopped early, and the best finished one; record the outcome on the
    parent and end it (unless KFP made it: KFP ends its own runs). The best.

    The best is the finished trial with the highest last-epoch validation accuracy (the
    model it wrote is that epoch's; ties go to the larger run id); a trial stopped early
    wrote none. Test accuracy plays no part: it is reported, never tuned on.

    Raises:
        ValueError: no trial finished.
    """
    for trial in trials:
        if trial.stopped_early:
            run_log.finish_run(trial.run_id, {}, {STOPPED_EARLY_TAG: "true"}, "KILLED")
    finished = [trial for trial in trials if not trial.stopped_early]
    if not trials:
        raise ValueError("expected at least one trial, found none")
    if not finished:
        raise ValueError(f"expected at least one finished trial, found {len(trials)} stopped early")
    best_id, val_accuracy = run_log.best_run([trial.run_id for trial in finished], OBJECTIVE)
    (best,) = [trial for trial in finished if trial.run_id == best_id]
    test_accuracy = run_log.run_metrics(best_id).get("test_accuracy", float("nan"))
    run_log.set_run_tags(best_id, {BEST_TAG: "true"})
    outcome = {
        f"best_{OBJECTIVE}": val_accuracy,
        "trials_finished": len(finished),
        "trials_stopped_early": len(trials) - len(finished),
    }
    if not math.isnan(test_accuracy):  # a grid's children are evaluated; a search's not yet
        outcome["best_test_accuracy"] = test_accuracy
    run_log.finish_run(
        parent_run_id,
        metrics=outcome,
        tags={"search.best_run_id": best_id, "search.best_trial": best.name},
        status=None if kfp_tracking.kfp_task() else "FINISHED",
    )
    run_ids = [trial.run_id for trial in trials]
    url = compare_url(ui_address(store.tracking_uri()), run_log.experiment_of(best_id), run_ids)
    log.info("best of %d trials: %s (%s %.4f)", len(trials), best.name, OBJECTIVE, val_accuracy)
    return Best(best.name, best_id, val_accuracy, test_accuracy, url)
