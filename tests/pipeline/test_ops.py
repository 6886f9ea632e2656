"""The KFP components: inputs held to their schemas, and each body run as a plain function.

The KFP samples' pair: these call each component's Python function directly (with real
artifacts on local paths); ``tests/pipeline/test_local.py`` runs them on kfp.local.
"""

from __future__ import annotations

import json

import pytest
from kfp.dsl import Artifact, ClassificationMetrics, Dataset, Markdown, Metrics, Model
from mlflow.tracking import MlflowClient

from components.core import schema
from components.core.shutdown import skip_final_collection
from components.data.arrays import read_meta
from components.deploying.config import DeployConfig
from components.downloading.config import DownloadConfig
from components.evaluation.config import EvaluateConfig
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from pipeline import ops, train_ops
from tests.support.kfp_components import KFP_TYPES, parameter_inputs, train_inputs

STEP_OPS = [
    (ops.download_op, DownloadConfig),
    (ops.preprocess_op, PreprocessConfig),
    (ops.evaluate_op, EvaluateConfig),
    (ops.register_op, RegisterConfig),
    (ops.deploy_op, DeployConfig),
]


@pytest.mark.parametrize(("op", "step"), STEP_OPS, ids=lambda x: getattr(x, "name", ""))
def test_each_pipeline_field_of_a_step_is_an_input_of_its_own_type(op, step):
    inputs = parameter_inputs(op)
    for field in schema.fields_of(step, *schema.PIPELINE_ROLES):
        kind = schema.field_type(step, field)
        assert field.name in inputs, f"{op.name} lacks {field.name}"
        assert inputs[field.name] == KFP_TYPES[kind], f"{op.name}: {field.name}"


def exit_collection_skips() -> int:
    """How often this process has asked to skip the collection at exit (once suffices)."""
    calls = skip_final_collection.cache_info()
    return calls.hits + calls.misses


def test_registration_takes_no_alias_from_the_pipeline():
    assert "alias" not in parameter_inputs(ops.register_op)


def test_preflight_refuses_a_tracking_server_that_does_not_answer_and_an_empty_grid(
    mlflow_store,
):
    from components.tracking.store import TrackingUnavailableError
    from tests.support.servers import free_port

    ops.preflight_op.python_func(tracking_uri=mlflow_store)
    ops.preflight_op.python_func(tracking_uri=mlflow_store, grid=['{"lr": 0.01}'])
    with pytest.raises(TrackingUnavailableError, match="unreachable"):
        ops.preflight_op.python_func(tracking_uri=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ValueError, match="expected a grid of one or more combinations"):
        ops.preflight_op.python_func(tracking_uri=mlflow_store, grid=[])


def test_download_and_preprocess_bodies_write_their_artifacts(sample_zip, tmp_path, mlflow_store):
    raw = Dataset(name="dataset", uri=str(tmp_path / "raw"), metadata={})
    listing = ops.download_op.python_func(
        source=str(sample_zip), sha256="", experiment="e", tracking_uri=mlflow_store, dataset=raw
    )
    assert raw.metadata["file_count"] > 0 and len(raw.metadata["sha256"]) == 64
    recorded = MlflowClient(mlflow_store).get_run(listing).data.tags["data.source-listing.sha256"]
    assert recorded == json.loads((tmp_path / "raw/download.json").read_text())["listing"]
    arrays = Dataset(name="arrays", uri=str(tmp_path / "arrays"), metadata={})
    skips = exit_collection_skips()
    ops.preprocess_op.python_func(
        raw=raw,
        arrays=arrays,
        image_size=16,
        channels=1,
        val_fraction=0.1,
        test_fraction=0.1,
        split_seed=3,
        shard_mb=1,
    )
    meta = read_meta(tmp_path / "arrays")
    assert meta["image_size"] == 16 and meta["config"]["split_seed"] == 3
    assert arrays.metadata["kept"] == meta["kept"]
    # a task's process leaves its heap to the OS at exit, as the step's main does
    assert exit_collection_skips() == skips + 1


def test_train_evaluate_and_register_bodies_hand_the_run_on(small_arrays, tmp_path, mlflow_store):
    arrays = Dataset(name="arrays", uri=str(small_arrays), metadata={})
    trained = Model(name="trained_model", uri=str(tmp_path / "model"), metadata={})
    experiment = 'team\\test "quoted" ü'
    skips = exit_collection_skips()
    run_id = train_ops.train_op.python_func(
        arrays=arrays,
        trained_model=trained,
        gpus=1,
        tracking_uri=mlflow_store,
        checkpoint_root="",
        kfp_run_id="kfp-run-1",
        pipeline_name="dogs-vs-cats",
        **train_inputs(experiment=experiment),
    )
    assert trained.metadata["mlflow_run_id"] == run_id
    client = MlflowClient(mlflow_store)
    run = client.get_run(run_id)
    assert client.get_experiment(run.info.experiment_id).name == experiment
    assert run.data.tags["kfp.run_id"] == "kfp-run-1"
    assert exit_collection_skips() == skips + 1

    metrics = Metrics(name="metrics", uri=str(tmp_path / "metrics"), metadata={})
    report = Markdown(name="report", uri=str(tmp_path / "report.md"), metadata={})
    accuracy, same_run = ops.evaluate_op.python_func(
        arrays=arrays,
        model=trained,
        mlflow_run_id=run_id,
        tracking_uri=mlflow_store,
        experiment=experiment,
        source_listing="",  # these arrays' test split is a part of their source's share
        evaluation=Artifact(name="evaluation", uri=str(tmp_path / "eval"), metadata={}),
        metrics=metrics,
        classification=ClassificationMetrics(
            name="classification", uri=str(tmp_path / "classification"), metadata={}
        ),
        report=report,
    )
    assert same_run == run_id and metrics.metadata["accuracy"] == accuracy
    assert client.get_run(run_id).data.metrics["test_accuracy"] == pytest.approx(accuracy)
    assert run_id in (tmp_path / "report.md").read_text()
    assert exit_collection_skips() == skips + 2

    name = 'dogs "vs" cats, ü'  # a value a string template would have broken
    registered, took_alias, reason, version = ops.register_op.python_func(
        arrays=arrays,
        mlflow_run_id=run_id,
        test_accuracy=accuracy,
        tracking_uri=mlflow_store,
        min_accuracy=min(1.0, accuracy + 0.01),
        registered_model_name=name,
        force_alias=False,
    )
    assert not registered and not took_alias
    assert exit_collection_skips() == skips + 3
    assert reason.startswith("not registered: test accuracy")
    assert version == ""
    registered, took_alias, reason, version = ops.register_op.python_func(
        arrays=arrays,
        mlflow_run_id=run_id,
        test_accuracy=accuracy,
        tracking_uri=mlflow_store,
        min_accuracy=0.0,
        registered_model_name=name,
        force_alias=False,
    )
    assert registered and took_alias
    assert reason.startswith(f"registered {name} version 1 as @candidate")
    assert client.get_model_version_by_alias(name, "candidate").run_id == run_id
    assert version == "1"


def test_sweep_bodies_open_the_parent_train_each_combination_and_mark_the_best(
    small_arrays, tmp_path, mlflow_store
):
    grid = [json.dumps({"lr": 0.003}), json.dumps({"lr": 0.0003})]
    parent = ops.sweep_parent_op.python_func(
        grid=grid,
        experiment="dogs-vs-cats",
        tracking_uri=mlflow_store,
        kfp_run_id="kfp-run-2",
        pipeline_name="dogs-vs-cats-sweep",
    )
    arrays = Dataset(name="arrays", uri=str(small_arrays), metadata={})
    children = [
        train_ops.train_op.python_func(
            arrays=arrays,
            trained_model=Model(name="m", uri=str(tmp_path / str(index)), metadata={}),
            gpus=1,
            tracking_uri=mlflow_store,
            checkpoint_root="",
            kfp_run_id="kfp-run-2",
            pipeline_name="dogs-vs-cats-sweep",
            combination=combination,
            **train_inputs(),
        )
        for index, combination in enumerate(grid)
    ]
    client = MlflowClient(mlflow_store)
    runs = [client.get_run(child) for child in children]
    assert [run.data.params["lr"] for run in runs] == ["0.003", "0.0003"]
    assert all(run.data.tags["mlflow.parentRunId"] == parent for run in runs)
    best, val_accuracy, _, compare = ops.sweep_best_op.python_func(
        parent_run_id=parent, child_run_ids=children, tracking_uri=mlflow_store
    )
    vals = {run.info.run_id: run.data.metrics["val_accuracy"] for run in runs}
    assert val_accuracy == max(vals.values()) == vals[best]
    assert client.get_run(parent).info.status == "FINISHED" and all(c in compare for c in children)


DEPLOY = dict(
    model_version="1",
    mlflow_run_id="run-1",
    registered_model_name="dogs-vs-cats",
    deployment_mode="Standard",
    canary_percent=100,
    image="registry.example/dogs-vs-cats@sha256:" + "a" * 64,
)


def test_deploy_does_nothing_unless_asked_and_the_gate_gave_the_alias(mlflow_store):
    off = ops.deploy_op.python_func(
        deploy=False, took_alias=True, tracking_uri=mlflow_store, **DEPLOY
    )
    assert off == ("", "not deployed: the run's deploy parameter is off")
    gate = ops.deploy_op.python_func(
        deploy=True, took_alias=False, tracking_uri=mlflow_store, **DEPLOY
    )
    assert gate == ("", "not deployed: the quality gate did not give the model the alias")


@pytest.mark.integration
def test_deploy_serves_the_registered_version_and_tags_its_url_on_the_run(
    running_server, monkeypatch
):
    from kubernetes import client as k8s

    from components.cluster import kube
    from components.tracking import run_log
    from tests.support.kube_api import FakeKServeApi

    # the model server in the pod loads through a tracking server, so the step takes one
    mlflow_store = running_server.url
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_store)
    run_id = run_log.create_run("dogs-vs-cats", run_name="trained", tags={})
    with FakeKServeApi(polls_to_settle=1) as api:  # Ready at the first read: no poll waits
        configuration = k8s.Configuration()
        configuration.host = api.url
        # the stand-in in place of the pod's in-cluster API and namespace (no cluster here)
        monkeypatch.setattr(kube, "in_cluster_client", lambda: k8s.ApiClient(configuration))
        monkeypatch.setattr(kube, "current_namespace", lambda: "team-a")
        url, reason = ops.deploy_op.python_func(
            deploy=True,
            took_alias=True,
            tracking_uri=mlflow_store,
            **{**DEPLOY, "mlflow_run_id": run_id},
        )
        ((kind, body),) = api.writes
    assert url == "http://dogs-vs-cats.team-a.example.com"
    assert reason == f"serving models:/dogs-vs-cats/1 at {url}"
    assert (
        kind == "create" and body["spec"]["predictor"]["containers"][0]["image"] == DEPLOY["image"]
    )
    tags = MlflowClient(mlflow_store).get_run(run_id).data.tags
    assert tags["serving.url"] == url and tags["serving.model_uri"] == "models:/dogs-vs-cats/1"
