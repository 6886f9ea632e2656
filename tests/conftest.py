"""Shared fixtures: the real PetImages sample, extracted and preprocessed once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from components import download, preprocess

REPO = Path(__file__).resolve().parents[1]
SAMPLE_ZIP = Path(
    os.environ.get("PETIMAGES_SAMPLE", REPO.parent / "shared/data/petimages-sample.zip")
)


@pytest.fixture(scope="session")
def sample_zip() -> Path:
    if not SAMPLE_ZIP.is_file():
        pytest.skip(f"the PetImages sample is not at {SAMPLE_ZIP} (set PETIMAGES_SAMPLE)")
    return SAMPLE_ZIP


@pytest.fixture(scope="session")
def sample_images(sample_zip, tmp_path_factory) -> Path:
    """The sample archive, extracted by the download step."""
    target = tmp_path_factory.mktemp("sample") / "raw"
    download.fetch(str(sample_zip), target)
    return target


@pytest.fixture(scope="session")
def sample_arrays(sample_images, tmp_path_factory) -> Path:
    """The sample, preprocessed to grey 40×40 arrays (small, so training tests are quick)."""
    target = tmp_path_factory.mktemp("sample") / "arrays"
    cfg = preprocess.PreprocessConfig(image_size=40, channels=1, workers=2)
    preprocess.build_arrays(sample_images, target, cfg)
    return target


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch) -> str:
    """A fresh SQLite MLflow store in a temp dir, as ``MLFLOW_TRACKING_URI``; cwd moves there."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    return uri


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` skip, with the reason, where CUDA is not available."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA; none is available here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
