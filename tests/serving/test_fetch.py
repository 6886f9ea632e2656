"""``components.fetch_model``: what it refuses before any request (its fetch through a real
tracking server, and the server loading the folder, are in test_registry.py)."""

from __future__ import annotations

import pytest

from components import fetch_model


@pytest.mark.parametrize(
    "source",
    [
        "runs:/abc/model",
        "models:/name",
        "models:/name/0",
        "s3://bucket/model",
        "/etc",
        "models:/a/1\n",
    ],
)
def test_fetch_takes_only_a_registered_models_version_or_alias(source, tmp_path):
    with pytest.raises(SystemExit, match="expected a registered model as models:/NAME/VERSION"):
        fetch_model.main([source, str(tmp_path / "models")])
    assert not (tmp_path / "models").exists()


def test_a_folder_that_holds_files_is_not_fetched_into(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # never asked
    (tmp_path / "models").mkdir()
    (tmp_path / "models/keep.txt").write_text("not ours")
    with pytest.raises(SystemExit, match="expected an empty folder to fetch"):
        fetch_model.main(["models:/name/1", str(tmp_path / "models")])
    assert (tmp_path / "models/keep.txt").read_text() == "not ours"
