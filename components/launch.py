"""Train in the shape asked for: this process, or torchrun with one process per GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from components.train import TrainConfig, config_to_argv, train


def train_processes(cfg: TrainConfig, processes: int) -> str:
    """Train with ``processes`` DDP processes on this node; return the MLflow run id."""
    if processes <= 1:
        train(cfg)
        return (Path(cfg.output) / "mlflow_run_id").read_text()
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
        "-m",
        "components.train",
        *config_to_argv(cfg),
    ]
    subprocess.run(command, check=True)
    return (Path(cfg.output) / "mlflow_run_id").read_text()
