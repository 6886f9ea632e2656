"""Scale-out on one node: DDP under torchrun on the CPU (Gloo), as the train task starts it.

The multi-node TrainJob is tested in tests/cluster/test_trainjob.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from components import train
from components.networks.models import build_model
from components.training.processes import train_processes
from tests.support.helpers import run_to_end


def history(output) -> list[dict]:
    return json.loads((output / "history.json").read_text())


def weights(output: Path) -> dict[str, torch.Tensor]:
    return torch.load(output / "model.pt", weights_only=True)["state_dict"]


def distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The L2 distance between two sets of weights, over the keys of ``b``."""
    return sum(((a[k] - b[k]) ** 2).sum().item() for k in b) ** 0.5


@pytest.mark.slow
def test_two_gloo_processes_train_the_same_weights_as_one(small_arrays, tmp_path, mlflow_store):
    common = [
        *("--data", str(small_arrays), "--epochs", "2", "--batch-size", "100"),
        # float32: bf16 on a CPU with AMX rounds each rank's half-batch apart (5e-4)
        *("--device", "cpu", "--no-augment", "--seed", "3", "--no-amp"),
    ]
    run_to_end([*common, "--output", str(tmp_path / "one")])
    # two processes the way the pipeline's train step starts them (gpus=2): torchrun
    two_processes = train.parse_config([*common, "--output", str(tmp_path / "two")])
    train_processes(two_processes, processes=2)

    # the same global batches in the same order: the same training, up to float rounding
    # (Adam's first steps move near-zero gradients by ±lr whatever their size, so single
    # weights may differ; the whole update and the losses must not). The rounding depends
    # on the CPU's kernels: 2.6e-5 apart on one machine, under 1e-5 on another
    for a, b in zip(history(tmp_path / "one"), history(tmp_path / "two"), strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-4)
        assert a["val_loss"] == pytest.approx(b["val_loss"], abs=1e-4)
    one, two = weights(tmp_path / "one"), weights(tmp_path / "two")
    torch.manual_seed(3)
    initial = {f"net.{k}": v for k, v in build_model("tutorial_cnn", 1, 40).state_dict().items()}
    moved = distance(one, initial)
    assert distance(one, two) < 0.05 * moved, (distance(one, two), moved)
    # every image once per epoch, split between the ranks
    for output in ("one", "two"):
        for epoch in history(tmp_path / output):
            assert round(epoch["images_per_second"] * epoch["epoch_seconds"]) == 400
    # the two ranks logged one MLflow run between them, with one point per epoch
    run_id = (tmp_path / "two/mlflow_run_id").read_text()
    steps = [m.step for m in MlflowClient(mlflow_store).get_metric_history(run_id, "val_loss")]
    assert steps == [1, 2]

    # resume the two-process run's checkpoint in one process: any world size will do
    run_to_end([*common, "--output", str(tmp_path / "two"), "--epochs", "3", "--resume"])
    resumed = history(tmp_path / "two")
    client = MlflowClient(mlflow_store)
    name = client.get_run(run_id).info.run_name
    assert name == f"tutorial_cnn-3ep petimages-sample split0 seed3 {run_id[:6]}"  # was 2ep
    assert [e["epoch"] for e in resumed] == [1, 2, 3]
    assert (tmp_path / "two/mlflow_run_id").read_text() == run_id
