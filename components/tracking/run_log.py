"""A step's MLflow run: started or re-attached, its params, metrics, tags and inputs, read back.

Runs line up column for column in the MLflow UI because every step logs through these few
functions, under the same names every time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.tracking.fluent import _create_dataset_input
from mlflow.types.schema import Schema, TensorSpec

from components.core.file_size import files_written_at_most
from components.tracking import store
from components.tracking.kfp_tracking import check_kfp_task_run, experiment_id, kfp_task
from components.tracking.store import logs_system_metrics, tracking_uri

log = logging.getLogger(__name__)


@contextlib.contextmanager
def start_run(
    experiment: str,
    *,
    run_id: str | None = None,
    run_name: str | None = None,
    tags: dict[str, str] | None = None,
) -> Iterator[str]:
    """Create or re-attach to a run; yield its id. ``$MLFLOW_RUN_ID`` is honoured.

    A run is named ``run_name`` and the first six characters of its id, so that runs of
    one recipe differ; re-attached by ``run_id``, resumed to more epochs, its name says
    so. A run injected through ``$MLFLOW_RUN_ID`` (KFP's task run) keeps the name
    its creator gave it: KFP finds a retried task's run by it.

    On an exception the run ends FAILED, so a resumed attempt can pick it up again; on
    Ctrl-C (``KeyboardInterrupt``) it ends KILLED.
    """
    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    injected = os.environ.get("MLFLOW_RUN_ID") or None
    run_id = run_id or injected  # given here, MLflow leaves the variable for the children
    if run_id and run_id == injected:
        check_kfp_task_run(injected, tags or {})  # before anything is written into it
    if run_id:  # an existing run: its own experiment is the active one
        active = MlflowClient(uri).get_run(run_id).info.experiment_id
        mlflow.set_experiment(experiment_id=active)
    else:
        active = experiment_id(experiment)
    with mlflow.start_run(
        run_id=run_id,
        experiment_id=active,
        run_name=None if run_id else run_name,
        log_system_metrics=logs_system_metrics(),
    ) as run:
        named = f"{run_name} {run.info.run_id[:6]}"  # two runs of one recipe told apart
        if run_name is not None and run.info.run_id != injected and run.info.run_name != named:
            # new, or resumed to a longer recipe: the runs table shows what the run trains
            mlflow.set_tag("mlflow.runName", named)
        if tags:
            mlflow.set_tags(tags)
        log.info("MLflow run %s in experiment %s at %s", run.info.run_id, active, uri)
        try:
            yield run.info.run_id
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where the step makes it one
            mlflow.end_run("KILLED")
            raise


def log_params_into(run_id: str, params: dict[str, object]) -> None:
    """Log ``params`` into a run that is not this process's active run."""
    client = store.client()
    for key, value in params.items():
        client.log_param(run_id, key, value)


def log_json_into(run_id: str, payload: dict[str, Any], name: str) -> None:
    """Log ``payload`` as the JSON artifact ``name`` of a run that is not this process's."""
    store.client().log_dict(run_id, payload, name)


def log_params(params: dict[str, object]) -> None:
    mlflow.log_params({key: str(value) for key, value in params.items()})


def log_artifact(path: Path, artifact_path: str | None = None) -> None:
    mlflow.log_artifact(str(path), artifact_path)


def log_metric(key: str, value: float) -> None:
    mlflow.log_metric(key, value)


def find_run_by_tags(experiment: str, tags: dict[str, str]) -> str | None:
    """The newest run of ``experiment`` (KFP's, under its MLflow tracking) carrying every
    one of ``tags``, or None."""
    mlflow.set_tracking_uri(tracking_uri())
    task = kfp_task()
    found = mlflow.search_runs(
        experiment_ids=[task.experiment_id] if task else None,
        experiment_names=None if task else [experiment],
        filter_string=" AND ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items()),
        order_by=["start_time DESC"],
        max_results=1,
        output_format="list",
    )
    return found[0].info.run_id if found else None


def log_source_input(source: dict[str, Any]) -> None:
    """Log the archive the photos came from (the download step's record: its URI, sha256
    and size) as an input of the active run, in context ``source``."""
    with warnings.catch_warnings():  # MLflow warns that a local path reads two ways
        warnings.simplefilter("ignore", UserWarning)
        origin = resolve_dataset_source(str(source["source"]))
    digest = str(source.get("sha256") or "unknown")[:8]
    # MLflow documents MetaDataset to be made so; its stubs leave `profile` abstract
    dataset = MetaDataset(origin, name="petimages-archive", digest=digest)  # type: ignore[abstract]
    mlflow.log_input(dataset, context="source", tags={"bytes": str(source.get("bytes"))})


def split_dataset(split: str, directory: Path, digest: str, shape: tuple[int, ...]) -> MetaDataset:
    """One split of the preprocessed data as an MLflow dataset named ``SPLIT-split``: the
    arrays' folder, their schema (``shape``: one photo's C×H×W), and ``digest`` (of its
    shards' recorded sha256s: a photo changed anywhere changes it), no photo read."""
    with warnings.catch_warnings():  # MLflow warns that a local path reads two ways
        warnings.simplefilter("ignore", UserWarning)
        origin = resolve_dataset_source(str(Path(directory).absolute()))
    schema = Schema(
        [
            TensorSpec(np.dtype(np.uint8), (-1, *shape), "images"),
            TensorSpec(np.dtype(np.int64), (-1,), "labels"),
        ]
    )
    # MLflow documents MetaDataset to be made so; its stubs leave `profile` abstract
    return MetaDataset(origin, name=f"{split}-split", digest=digest[:16], schema=schema)  # type: ignore[abstract]


def log_split_input(context: str, dataset: MetaDataset, photos: int) -> None:
    """Log a split (``split_dataset``) as an input of the active run, in ``context``, with
    its photo count."""
    mlflow.log_input(dataset, context=context, tags={"photos": str(photos)})


def log_evaluation_into(
    run_id: str,
    split: str,
    metrics: dict[str, float],
    model_id: str,
    dataset: MetaDataset,
    prefix: str | None = None,
) -> None:
    """Log an evaluation's metrics into a finished run without reopening it (its status
    stays as its training left it, whatever stops this process), named ``prefix`` (the
    split's name by default) ``_accuracy`` and so on, linked to the logged model they were
    measured on and to the split's data (an MLflow dataset with its digest)."""
    client = store.client()
    entry = _create_dataset_input(dataset, split)  # as mlflow.log_input makes it
    client.log_inputs(run_id, [entry] if entry else None)
    now = int(time.time() * 1000)
    client.log_batch(
        run_id,
        [
            Metric(
                f"{prefix or split}_{key}", value, now, 0, model_id, dataset.name, dataset.digest
            )
            for key, value in metrics.items()
        ],
    )


def log_artifacts_into(run_id: str, paths: list[Path], artifact_path: str) -> None:
    """Log files as artifacts of a run that is not this process's, leaving its status."""
    client = store.client()
    for path in paths:
        client.log_artifact(run_id, str(path), artifact_path)


def load_run_bytes(run_id: str, path: str, most_bytes: int) -> bytes | None:
    """The bytes of the run's artifact at ``path``, or None where it has none.

    Raises:
        ValueError: the artifact store lists it larger than ``most_bytes`` (it is not
            downloaded), or it grows past that as it arrives.
    """
    client = store.client()
    folder, _, name = path.rpartition("/")
    listed = {Path(a.path).name: a for a in client.list_artifacts(run_id, folder or None)}
    if name not in listed:
        return None
    size = listed[name].file_size or 0
    if size > most_bytes or listed[name].is_dir:
        raise ValueError(
            f"expected {path} in MLflow run {run_id} to be a file of at most {most_bytes} "
            f"bytes, found {'a folder' if listed[name].is_dir else f'{size} bytes'}; not "
            "downloaded"
        )
    with tempfile.TemporaryDirectory() as scratch:
        # a store that lists a smaller size than it serves is stopped as the bytes arrive
        with files_written_at_most(most_bytes, f"{path} in MLflow run {run_id}", Path(scratch)):
            local = client.download_artifacts(run_id, path, scratch)
        return Path(local).read_bytes()


def run_status(run_id: str) -> str:
    return str(store.client().get_run(run_id).info.status)


def run_params(run_id: str) -> dict[str, str]:
    return dict(store.client().get_run(run_id).data.params)


def input_digests(run_id: str) -> dict[str, str]:
    """The digest of each dataset the run logged as an input, by the dataset's name."""
    inputs = store.client().get_run(run_id).inputs
    return {d.dataset.name: d.dataset.digest for d in (inputs.dataset_inputs if inputs else [])}


def create_run(experiment: str, run_name: str, tags: dict[str, str]) -> str:
    """A new run, left open for others to fill and end (a sweep's parent); its id."""
    mlflow.set_tracking_uri(tracking_uri())
    client = store.client()
    run = client.create_run(experiment_id(experiment), run_name=run_name, tags=tags)
    return str(run.info.run_id)


def finish_run(
    run_id: str, metrics: dict[str, float], tags: dict[str, str], status: str | None = "FINISHED"
) -> None:
    """Log ``metrics`` and ``tags`` into a run and end it with ``status`` (or KILLED,
    FAILED); ``None`` leaves it to its owner (KFP ends the runs it made)."""
    log_metrics_into(run_id, metrics)
    client = store.client()
    for key, text in tags.items():
        client.set_tag(run_id, key, text)
    if status:
        client.set_terminated(run_id, status)


def log_metrics_into(run_id: str, metrics: dict[str, float]) -> None:
    """Log ``metrics`` into a run that is not this process's, leaving its status."""
    client = store.client()
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)


def run_metrics(run_id: str) -> dict[str, float]:
    """The run's metrics, each at its latest step."""
    return dict(store.client().get_run(run_id).data.metrics)


def best_run(run_ids: list[str], metric: str) -> tuple[str, float]:
    """The run with the highest latest ``metric``, and that value; ties: the larger id,
    a stable choice."""
    scores = {run_id: run_metrics(run_id)[metric] for run_id in run_ids}
    best = max(run_ids, key=lambda run_id: (scores[run_id], run_id))
    return best, scores[best]


def experiment_of(run_id: str) -> str:
    """The id of the run's experiment."""
    return store.client().get_run(run_id).info.experiment_id


def run_identity(run_id: str) -> tuple[str, dict[str, str], dict[str, str]] | None:
    """The run's experiment name, tags and params; None when the store has no such run."""
    client = store.client()
    try:
        run = client.get_run(run_id)
    except MlflowException as err:
        if err.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
    experiment = client.get_experiment(run.info.experiment_id).name
    return experiment, dict(run.data.tags), dict(run.data.params)


def run_tag(run_id: str, key: str) -> str | None:
    """The value of the run's tag ``key``, or None."""
    return store.client().get_run(run_id).data.tags.get(key)


def set_run_tags(run_id: str, tags: dict[str, str]) -> None:
    client = store.client()
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
