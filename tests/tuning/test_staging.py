"""The Job that stages a hand-written search's arrays: valid, and its steps, run as it
runs them, write the arrays where the trials read them."""

from __future__ import annotations

import json

import kubernetes_validate

from components import download, preprocess
from components.recipes.recipe import recipe_values
from components.training.config import TrainConfig
from components.tuning.experiment import ExperimentTarget, trial_arguments
from components.tuning.staging import staging_job
from tests.test_manifests import K8S_VERSION


def target(**fields) -> ExperimentTarget:
    return ExperimentTarget(
        name="dogs-vs-cats-tune",
        image="ghcr.io/dogs-vs-cats/dogs-vs-cats:1",
        tracking_uri="http://mlflow:5000",
        namespace="team-a",
        **fields,
    )


def containers(job: dict) -> dict[str, dict]:
    pod = job["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*pod["initContainers"], *pod["containers"]]}


def test_the_job_is_valid_and_writes_the_arrays_the_trials_read():
    values = {"source": "s3://pets/kagglecatsanddogs.zip", **recipe_values("cpu")}
    job = staging_job(target(), values)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    steps = containers(job)
    assert list(steps) == ["download", "preprocess"]  # in turn: init container, then main
    assert steps["download"]["command"] == ["python", "-m", "components.download"]
    assert "--source=s3://pets/kagglecatsanddogs.zip" in steps["download"]["args"]
    arrays = "--output=/shared/dogs-vs-cats-tune/arrays"
    assert arrays in steps["preprocess"]["args"]
    assert "--image-size=96" in steps["preprocess"]["args"]  # the preset's shape
    trial = trial_arguments(target(), TrainConfig(data="-", output="-"), ())
    assert "--data=/shared/dogs-vs-cats-tune/arrays" in trial  # the same folder
    for container in steps.values():  # non-root, no GPU asked for
        assert container["securityContext"]["runAsNonRoot"] is True
        assert set(container["resources"]["requests"]) == {"cpu", "memory"}


def test_its_commands_run_as_written_put_the_arrays_on_the_claim(
    small_sample_zip, tmp_path, mlflow_store
):
    """The Job's two commands, with the claim at tmp_path: the arrays the trials read."""
    claim = tmp_path / "claim"
    values = {"source": str(small_sample_zip), "image_size": 32, "channels": 3}
    steps = containers(staging_job(target(shared_mount=str(claim)), values))
    download.main(steps["download"]["args"])
    preprocess.main(steps["preprocess"]["args"])
    meta = json.loads((claim / "dogs-vs-cats-tune/arrays/meta.json").read_text())
    assert (meta["image_size"], meta["channels"]) == (32, 3)
    assert sum(meta["counts"]["train"].values()) > 0
