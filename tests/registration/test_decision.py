"""Registration: a model is registered only when its test accuracy reaches the minimum."""

from __future__ import annotations

import logging

import pytest
from mlflow.tracking import MlflowClient

from components import register
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate


def test_a_model_below_the_minimum_is_not_registered_and_the_run_says_why(
    sample_arrays, tmp_path, mlflow_store, capsys
):
    from components.training import session
    from components.training.config import TrainConfig

    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1, dry_run=True)
    )
    MlflowClient(mlflow_store).log_metric(result.run_id, "test_accuracy", 0.61)  # as evaluate
    register.main(
        [
            *("--mlflow-run-id", result.run_id),
            *("--min-accuracy", "0.9", "--registered-model-name", "pets"),
        ]
    )
    reason = capsys.readouterr().out.strip()
    assert reason == "not registered: test accuracy 0.6100 < minimum 0.9000"
    client = MlflowClient(mlflow_store)
    assert client.get_run(result.run_id).data.tags["quality_gate"] == reason
    assert client.search_registered_models() == []


def test_a_model_at_the_minimum_is_registered_by_its_logged_model_id(
    sample_arrays, tmp_path, mlflow_store, caplog
):
    from components.training import session
    from components.training.config import TrainConfig

    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1, dry_run=True)
    )
    MlflowClient(mlflow_store).log_metric(result.run_id, "test_accuracy", 0.9)  # as evaluate
    with caplog.at_level(logging.WARNING):
        decision = register_if_accurate(
            RegisterConfig(mlflow_run_id=result.run_id, test_accuracy=0.9)
        )
    assert decision.registered and decision.version == "1"
    client = MlflowClient(mlflow_store)
    version = client.get_model_version_by_alias("dogs-vs-cats", "candidate")
    assert version.source == result.model_uri  # models:/m-…, the logged model itself
    assert version.run_id == result.run_id
    assert "registering model based on" not in caplog.text  # MLflow's runs:/ fallback


def test_a_test_accuracy_the_run_does_not_hold_is_refused_and_nothing_registered(
    sample_arrays, tmp_path, mlflow_store
):
    from components.training import session
    from components.training.config import TrainConfig

    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1, dry_run=True)
    )
    argv = ["--mlflow-run-id", result.run_id, "--test-accuracy", "0.91"]
    with pytest.raises(SystemExit, match="^error: expected a test_accuracy metric in MLflow run"):
        register.main(argv)  # not evaluated yet
    client = MlflowClient(mlflow_store)
    client.log_metric(result.run_id, "test_accuracy", 0.58)
    refused = "by a test accuracy of 0.91: the run's own, from the evaluate step, is 0.58"
    with pytest.raises(SystemExit, match=refused):
        register.main(argv)  # the README's own example, talked up from 0.58
    assert client.search_registered_models() == []
    assert "quality_gate" not in client.get_run(result.run_id).data.tags
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=result.run_id, test_accuracy=0.58, min_accuracy=0.5)
    )
    assert decision.registered  # the run's own number, given, is only checked


def test_a_tracking_server_that_does_not_answer_is_one_line_at_once(monkeypatch):
    import time

    from components.core.tracking import TrackingUnavailableError
    from tests.servers import free_port

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(TrackingUnavailableError, match="unreachable"):
        register_if_accurate(RegisterConfig(mlflow_run_id="abc", min_accuracy=0.5))
    assert time.monotonic() - started < 10  # MLflow's own retries would take a minute
