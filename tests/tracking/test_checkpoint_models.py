"""Checkpoints as MLflow 3 logged models (``checkpoint_models.log_epoch``), in a SQLite store."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from components.core.identity import sha256_of_bytes
from components.tracking import checkpoint_models, run_log


def test_a_run_keeps_its_two_newest_checkpoints_and_its_best(mlflow_store, tmp_path):
    checkpoint = tmp_path / "checkpoint.pt"
    with run_log.start_run("checkpoints") as run_id:
        for epoch, accuracy in enumerate([0.9, 0.5, 0.6, 0.7, 0.6], start=1):
            state = b"state after epoch %d" % epoch
            checkpoint.write_bytes(state)
            model_id = checkpoint_models.log_epoch(
                {"val_accuracy": accuracy}, epoch, sha256_of_bytes(state)
            )
            checkpoint_models.log_checkpoint(model_id, checkpoint, epoch)
    client = MlflowClient(mlflow_store)
    experiment = client.get_run(run_id).info.experiment_id
    kept = client.search_logged_models(
        [experiment],
        filter_string="name = 'checkpoint'",
        order_by=[{"field_name": "metrics.val_accuracy", "ascending": False}],
    )
    assert [int(m.tags["epoch"]) for m in kept] == [1, 4, 5]  # the best first, as ranked
    # the pruned ones' files are gone from the store too
    stored = (tmp_path / "mlartifacts").rglob("checkpoint.pt")  # beside the database
    files = sorted(path.parent.parent.name for path in stored)
    assert files == sorted(m.model_id for m in kept)
    fetched = checkpoint_models.download_checkpoint(run_id, tmp_path / "fetched")
    assert fetched is not None and fetched.read_bytes() == b"state after epoch 5"
    # the run's own history keeps every epoch, pruned checkpoints' included
    history = client.get_metric_history(run_id, "val_accuracy")
    assert [(m.step, m.value) for m in history] == [
        (1, 0.9),
        (2, 0.5),
        (3, 0.6),
        (4, 0.7),
        (5, 0.6),
    ]


def test_an_epoch_whose_checkpoint_was_never_written_is_not_resumed_from(mlflow_store, tmp_path):
    """Stopped between the epoch's metrics and its checkpoint: the run's record of the
    epoch stays, and the resume takes the checkpoint before it."""
    checkpoint = tmp_path / "checkpoint.pt"
    with run_log.start_run("checkpoints") as run_id:
        checkpoint.write_bytes(b"state after epoch 1")
        first = checkpoint_models.log_epoch(
            {"val_accuracy": 0.6}, 1, sha256_of_bytes(b"state after epoch 1")
        )
        checkpoint_models.log_checkpoint(first, checkpoint, 1)
        checkpoint_models.log_epoch({"val_accuracy": 0.7}, 2, "2" * 64)  # the pod lost here
    fetched = checkpoint_models.download_checkpoint(run_id, tmp_path / "fetched")
    assert fetched is not None and fetched.read_bytes() == b"state after epoch 1"
    # each checkpoint's digest is on record: the one written, the one never written
    assert checkpoint_models.checkpoint_recorded(run_id, 1, sha256_of_bytes(b"state after epoch 1"))
    assert checkpoint_models.checkpoint_recorded(run_id, 2, "2" * 64)
    assert not checkpoint_models.checkpoint_recorded(
        run_id, 2, sha256_of_bytes(b"state after epoch 1")
    )


def test_a_checkpoint_whose_epoch_tag_is_forged_is_passed_over(mlflow_store, tmp_path):
    """A checkpoint model tagged epoch='abc' (by hand, in the store) is no checkpoint."""
    checkpoint = tmp_path / "checkpoint.pt"
    checkpoint.write_bytes(b"state after epoch 1")
    with run_log.start_run("checkpoints") as run_id:
        model_id = checkpoint_models.log_epoch({"val_accuracy": 0.6}, 1, sha256_of_bytes(b"x"))
        checkpoint_models.log_checkpoint(model_id, checkpoint, 1)
    MlflowClient(mlflow_store).set_logged_model_tags(model_id, {"epoch": "abc"})
    assert checkpoint_models.download_checkpoint(run_id, tmp_path / "fetched") is None


def test_a_run_without_checkpoints_has_none_to_resume(mlflow_store, tmp_path):
    with run_log.start_run("checkpoints") as run_id:
        pass
    assert checkpoint_models.download_checkpoint(run_id, tmp_path / "fetched") is None
