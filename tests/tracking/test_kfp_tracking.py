"""KFP's own MLflow tracking: only the run KFP made for this task is written into."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from components.tracking import kfp_tracking
from components.tracking.tags import KFP_PIPELINE_RUN_TAG, KFP_RUN_ID_TAG, PARENT_TAG


def test_only_the_run_kfp_made_for_this_task_is_taken_from_the_environment(
    mlflow_store, monkeypatch
):
    """KFP's driver makes a RUNNING run nested under the pipeline run's parent (a loop's
    iterations one level deeper), and on a retry reopens it; a run of this task's KFP run
    left FAILED is its own earlier attempt. Anything else named in ``MLFLOW_RUN_ID`` is
    refused before it is written to."""
    client = MlflowClient(mlflow_store)
    experiment = client.create_experiment("kfp-runs")
    pipeline_run = client.create_run(experiment, tags={KFP_PIPELINE_RUN_TAG: "k-1"})
    loop = client.create_run(experiment, tags={PARENT_TAG: pipeline_run.info.run_id})

    def task_run(parent: str, status: str, **tags: str) -> str:
        run = client.create_run(experiment, tags={PARENT_TAG: parent, **tags})
        if status != "RUNNING":
            client.set_terminated(run.info.run_id, status)
        return run.info.run_id

    own = {KFP_RUN_ID_TAG: "k-1"}
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment)
    taken = [
        task_run(pipeline_run.info.run_id, "RUNNING"),
        task_run(loop.info.run_id, "RUNNING"),  # a ParallelFor iteration's task
        task_run(pipeline_run.info.run_id, "FAILED", **own),  # its own earlier attempt
    ]
    for run_id in taken:
        kfp_tracking.check_kfp_task_run(run_id, own)
    refused = {
        task_run(pipeline_run.info.run_id, "FINISHED", **own): "found a FINISHED run",
        task_run(pipeline_run.info.run_id, "FAILED"): "found a FAILED run",
        client.create_run(experiment).info.run_id: "not nested under a KFP pipeline run",
    }
    for run_id, said in refused.items():
        with pytest.raises(ValueError, match=f"refusing MLFLOW_RUN_ID='{run_id}': .*{said}"):
            kfp_tracking.check_kfp_task_run(run_id, own)
    elsewhere = client.create_experiment("elsewhere")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", elsewhere)
    with pytest.raises(ValueError, match=f"experiment {experiment}, not MLFLOW_EXPERIMENT_ID="):
        kfp_tracking.check_kfp_task_run(taken[0], own)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID")
    with pytest.raises(ValueError, match="found no MLFLOW_EXPERIMENT_ID"):
        kfp_tracking.check_kfp_task_run(taken[0], own)
