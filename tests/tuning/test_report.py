"""The trial's output, read by Katib's StdOut collector's own rule
(tests/support/katib_collector.py)."""

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from components.tuning.report import ADDITIONAL, OBJECTIVE, metrics_line
from tests.support.katib_collector import UNAVAILABLE, parse
from tests.support.processes import HANG_SECONDS

METRICS = [OBJECTIVE, *ADDITIONAL]


def test_a_line_gives_every_metric_with_its_time_stamp_and_value():
    when = datetime(2026, 11, 25, 10, 0, 0, 123456, tzinfo=UTC)
    metrics = {"val_accuracy": 0.91234567, "val_loss": 0.25, "train_loss": 1.5e-7,
               "train_accuracy": 1.0, "epoch_seconds": 3.0}  # fmt: skip
    observations = parse(metrics_line(3, metrics, when), METRICS)
    assert observations == [
        ("2026-11-25T10:00:00.123456Z", "val_accuracy", "0.912346"),
        ("2026-11-25T10:00:00.123456Z", "val_loss", "0.250000"),
        ("2026-11-25T10:00:00.123456Z", "train_loss", "0.000000"),  # not 1.5e-07 read as 1.5
        ("2026-11-25T10:00:00.123456Z", "train_accuracy", "1.000000"),
    ]


def test_a_value_that_is_not_finite_is_left_out_not_misread():
    line = metrics_line(1, {"val_accuracy": 0.5, "val_loss": math.nan, "train_loss": math.inf})
    assert [name for _, name, _ in parse(line, METRICS)] == ["val_accuracy"]


@pytest.mark.slow
def test_the_train_steps_whole_output_gives_each_epochs_metrics_once(
    small_arrays, mlflow_store, tmp_path
):
    """The train step's stdout and stderr together, as Katib's collector reads the
    container's log: each epoch's values once, equal to the history's, nothing else."""
    output = tmp_path / "trial"
    command = [sys.executable, "-m", "components.train", f"--data={small_arrays}",
               f"--output={output}", "--epochs=3", "--metrics-stdout", "--trial=t-1"]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    observations = parse(done.stdout + done.stderr, METRICS)
    history = json.loads((output / "history.json").read_text())
    expected = [(name, f"{epoch[name]:.6f}") for epoch in history for name in METRICS]
    assert [(name, value) for _, name, value in observations] == expected
    assert all(stamp is not None for stamp, _, _ in observations)
    assert " INFO onnx" not in done.stderr  # the exporter's optimizer does not narrate


def test_a_trial_that_printed_no_objective_is_recorded_unavailable():
    assert parse("epoch 1/3 val_accuracy 0.9, val_loss 0.2\n", METRICS) == [
        (None, OBJECTIVE, UNAVAILABLE)
    ]
