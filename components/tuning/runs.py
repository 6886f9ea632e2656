"""A search in MLflow: a parent run for it, a child run per trial, the best marked.

Each trial's child is the train step's own run (nested by ``--parent-run-id``, tagged
with its trial by ``--trial``), with its params and per-epoch metrics; what the search
decided about it (stopped early, best) is added here, so MLflow's compare view of the
children shows the search.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any, NamedTuple

from components.core import tracking
from components.core.search_space import Dimension
from components.tuning.config import TuneConfig
from components.tuning.report import OBJECTIVE

log = logging.getLogger(__name__)

SPACE_FILE = "search_space.json"


class Trial(NamedTuple):
    """One trial as the search ended it: its MLflow run, and whether it was stopped early."""

    name: str
    run_id: str
    stopped_early: bool


def start_parent(
    experiment: str, name: str, tune: TuneConfig, space: tuple[Dimension, ...], tags: dict[str, Any]
) -> str:
    """The search's parent run, holding its settings and search space; its id.

    Where KFP tracks the pipeline run in MLflow, the search task's own run is the parent.
    """
    tags = {**tags, tracking.TUNE_PARENT_TAG: "true"}
    task = tracking.kfp_task()
    if task:
        run_id = task.run_id
        tracking.set_run_tags(run_id, tags)
    else:
        run_id = tracking.create_run(experiment, run_name=f"search {name}", tags=tags)
    tracking.log_params_into(run_id, {f"tune_{key}": value for key, value in asdict(tune).items()})
    tracking.log_json_into(run_id, {"dimensions": [_described(d) for d in space]}, SPACE_FILE)
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
            tracking.finish_run(trial.run_id, {}, {tracking.STOPPED_EARLY_TAG: "true"}, "KILLED")
    finished = [trial for trial in trials if not trial.stopped_early]
    if not finished:
        raise ValueError(f"expected at least one finished trial, found {len(trials)} stopped")
    best_id, score = tracking.best_run([trial.run_id for trial in finished], OBJECTIVE)
    (best,) = [trial for trial in finished if trial.run_id == best_id]
    tracking.set_run_tags(best.run_id, {tracking.TUNE_BEST_TAG: "true"})
    tracking.finish_run(
        parent_run_id,
        metrics={
            f"best_{OBJECTIVE}": score,
            "trials_finished": len(finished),
            "trials_stopped_early": len(trials) - len(finished),
        },
        tags={"tune.best_run_id": best.run_id, "tune.best_trial": best.name},
        status=None if tracking.kfp_task() else "FINISHED",
    )
    log.info("best of %d trials: %s (%s %.4f)", len(trials), best.name, OBJECTIVE, score)
    return best


def _described(dimension: Dimension) -> dict[str, Any]:
    return {key: value for key, value in asdict(dimension).items() if value not in (None, ())}
