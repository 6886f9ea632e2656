"""KFP's own MLflow tracking (KFP >= 2.17): the run KFP made for this task, checked before
it is written into, and the experiment a step logs into.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from components.tracking import store
from components.tracking.store import REGISTRY_ABSENT, tracking_uri, use_experiment
from components.tracking.tags import (
    COMBINATION_TAG,
    KFP_PIPELINE_RUN_TAG,
    KFP_RUN_ID_TAG,
    OUTPUT_TAG,
    PARENT_TAG,
    SEARCH_TAG,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KfpTask:
    """What KFP's own MLflow tracking (KFP >= 2.17) sets on a task's container: the task's
    nested run, made by KFP's driver under the pipeline run's parent run, and its
    experiment and workspace."""

    run_id: str
    experiment_id: str
    workspace: str | None


def kfp_task() -> KfpTask | None:
    """KFP's run for this task, where KFP's MLflow integration made one; else None.

    KFP's driver sets ``MLFLOW_RUN_ID`` with ``MLFLOW_EXPERIMENT_ID``; MLflow itself sets
    only the experiment (``mlflow.set_experiment`` exports it to child processes), so the
    pair tells KFP's run from a process's own choice of experiment.
    """
    run_id, experiment_id = os.environ.get("MLFLOW_RUN_ID"), os.environ.get("MLFLOW_EXPERIMENT_ID")
    if not (run_id and experiment_id):
        return None
    return KfpTask(run_id, experiment_id, os.environ.get("MLFLOW_WORKSPACE") or None)


def pipeline_experiment(name: str) -> str:
    """The experiment's name a pipeline step uses: KFP's, where KFP's MLflow integration
    made this task's run (KFP puts a pipeline run's runs in the experiment named at run
    creation, else ``Default``), else ``name``."""
    task = kfp_task()
    if task is None:
        return name
    found = store.client().get_experiment(task.experiment_id).name
    if found != name:
        log.info("KFP tracks this run in MLflow experiment %r; logging there, not %r", found, name)
    return found


def experiment_id(name: str) -> str:
    """The id of the experiment a step logs into, made active: KFP's, where KFP's MLflow
    integration made this task's run (``MLFLOW_EXPERIMENT_ID``), else ``name``'s (created
    where missing); the two never disagree."""
    task = kfp_task()
    if task is None:
        return use_experiment(name)
    mlflow.set_tracking_uri(tracking_uri())
    return mlflow.set_experiment(experiment_id=task.experiment_id).experiment_id


def check_kfp_task_run(run_id: str, tags: dict[str, str]) -> None:
    """Refuse ``$MLFLOW_RUN_ID`` unless it is the run KFP's MLflow tracking made for this
    task: in ``$MLFLOW_EXPERIMENT_ID`` (both set together), nested under a KFP pipeline
    run's parent (at any depth: a loop's iterations nest under the loop's run), and still
    RUNNING, or this task's own earlier attempt (FAILED or KILLED, with ``tags``' KFP run
    and combination) on a retry. A leftover variable would write into another run.

    Raises:
        ValueError: any other run, in one line, before anything is written.
    """
    experiment = os.environ.get("MLFLOW_EXPERIMENT_ID")
    refused = f"refusing MLFLOW_RUN_ID={run_id[:64]!r}: expected the run KFP made for this task"
    if not experiment:
        raise ValueError(
            f"{refused}, which KFP sets with MLFLOW_EXPERIMENT_ID, found no "
            "MLFLOW_EXPERIMENT_ID; unset MLFLOW_RUN_ID to start a run of this step's own"
        )
    client = store.client()
    run = _existing_run(client, run_id, refused)
    own = {k: tags[k] for k in (KFP_RUN_ID_TAG, COMBINATION_TAG) if k in tags}
    retried = (
        run.info.status in ("FAILED", "KILLED")
        and KFP_RUN_ID_TAG in own
        and all(run.data.tags.get(k) == v for k, v in own.items())
    )
    problems = [
        f"experiment {run.info.experiment_id}, not MLFLOW_EXPERIMENT_ID={experiment[:64]}"
        if run.info.experiment_id != experiment
        else "",
        f"a {run.info.status} run" if run.info.status != "RUNNING" and not retried else "",
        "" if _under_kfp_parent(client, run) else "not nested under a KFP pipeline run",
    ]
    found = "; ".join(problem for problem in problems if problem)
    if found:
        raise ValueError(
            f"{refused} (RUNNING, in MLFLOW_EXPERIMENT_ID, nested under a KFP pipeline run), "
            f"found {found}; unset MLFLOW_RUN_ID and MLFLOW_EXPERIMENT_ID to start a run of "
            "this step's own"
        )


def check_given_run(run_id: str, experiment: str, output: str) -> None:
    """Refuse a run named by ``--mlflow-run-id`` (not KFP's variable, which
    ``check_kfp_task_run`` checks) unless a training may write into it: open (RUNNING), or
    an attempt of this very output that stopped (FAILED or KILLED); in ``experiment``; and
    never one whose training wrote another output. A finished run is another training's
    record: metrics, checkpoints and a model would be added to it.

    Raises:
        ValueError: any other run, in one line, before anything is written.
    """
    refused = f"refusing --mlflow-run-id {run_id[:64]!r}"
    client = store.client()
    run = _existing_run(client, run_id, refused)
    written = run.data.tags.get(OUTPUT_TAG)
    mine = written == os.path.abspath(output)
    wanted = client.get_experiment_by_name(experiment)
    problems = [
        f"a {run.info.status} run"
        if run.info.status == "FINISHED" or (run.info.status != "RUNNING" and not mine)
        else "",
        f"a run of experiment {run.info.experiment_id}, not {experiment!r}"
        if wanted is None or run.info.experiment_id != wanted.experiment_id
        else "",
        f"a run that trained into {written[:200]}" if written and not mine else "",
        "a parent of other runs (a search's or a pipeline run's)"
        if _is_parent(client, run)
        else "",
    ]
    found = "; ".join(problem for problem in problems if problem)
    if found:
        raise ValueError(
            f"{refused}: expected an open run of experiment {experiment!r} (or this output's "
            f"own stopped attempt), found {found}; leave the flag out to start a run"
        )


def _is_parent(client: MlflowClient, run: Any) -> bool:
    """Whether ``run`` heads others: a search's parent, KFP's run of a pipeline run, or
    any run another names as its parent; its record is theirs, no training's."""
    tags = run.data.tags
    if tags.get(SEARCH_TAG) or tags.get(KFP_PIPELINE_RUN_TAG):
        return True
    children = client.search_runs(
        [run.info.experiment_id],
        f"tags.`{PARENT_TAG}` = '{run.info.run_id}'",
        max_results=1,
    )
    return bool(children)


def _existing_run(client: MlflowClient, run_id: str, refused: str) -> Any:
    """The run ``run_id``; where the store has none, ``refused`` in one line."""
    try:
        return client.get_run(run_id)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            raise ValueError(f"{refused}: found no such run at {tracking_uri()}") from None
        raise


def _under_kfp_parent(client: MlflowClient, run: Any, depth: int = 3) -> bool:
    """Whether ``run`` nests, within ``depth`` levels, under a run KFP made for a
    pipeline run (tagged ``kfp.pipeline_run_id``)."""
    for _ in range(depth):
        parent = run.data.tags.get(PARENT_TAG)
        if not parent:
            return False
        run = client.get_run(parent)
        if run.data.tags.get(KFP_PIPELINE_RUN_TAG):
            return True
    return False
