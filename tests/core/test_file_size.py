"""The bound on files written while a download runs: held by the kernel as bytes arrive."""

from __future__ import annotations

import resource

import pytest
from mlflow.entities import FileInfo
from mlflow.tracking import MlflowClient

from components.core.file_size import FileTooLargeError, files_written_at_most
from components.tracking import run_log


def test_a_file_written_past_the_bound_stops_there_and_the_limit_comes_back(tmp_path):
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    with pytest.raises(FileTooLargeError, match="expected the test file of at most 1000 bytes"):
        with files_written_at_most(1000, "the test file", tmp_path):
            (tmp_path / "big").write_bytes(b"x" * 5000)
    assert (tmp_path / "big").stat().st_size == 1000  # not a byte more reached the disk
    assert resource.getrlimit(resource.RLIMIT_FSIZE) == before
    with files_written_at_most(1000, "the test file", tmp_path):
        (tmp_path / "small").write_bytes(b"x" * 1000)
    (tmp_path / "other").mkdir()
    with pytest.raises(KeyError):  # other errors pass through as they are
        with files_written_at_most(1000, "the test file", tmp_path / "other"):
            raise KeyError("other")


def test_an_artifact_store_listing_no_size_cannot_bring_more_than_the_bound(
    mlflow_store, tmp_path, monkeypatch
):
    """A stand-in for a hostile artifact store: MLflow's own client whose listing leaves
    out every size, over a real SQLite store holding a 3 MB artifact."""
    client = MlflowClient(mlflow_store)
    run_id = client.create_run(client.create_experiment("sizes")).info.run_id
    (tmp_path / "metrics.json").write_bytes(b" " * 3_000_000)
    client.log_artifact(run_id, str(tmp_path / "metrics.json"), "evaluation")
    listing = MlflowClient.list_artifacts
    monkeypatch.setattr(
        MlflowClient,
        "list_artifacts",
        lambda self, *args: [FileInfo(f.path, f.is_dir, None) for f in listing(self, *args)],
    )
    with pytest.raises(FileTooLargeError, match="at most 1048576 bytes, found more as they"):
        run_log.load_run_bytes(run_id, "evaluation/metrics.json", 2**20)
