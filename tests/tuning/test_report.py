"""The trial's output, read by Katib's StdOut collector's own rule
(tests/support/katib_collector.py)."""

import math
from datetime import UTC, datetime

from components.tuning.report import ADDITIONAL, OBJECTIVE, metrics_line
from tests.support.katib_collector import UNAVAILABLE, parse

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


def test_a_trial_that_printed_no_objective_is_recorded_unavailable():
    assert parse("epoch 1/3 val_accuracy 0.9, val_loss 0.2\n", METRICS) == [
        (None, OBJECTIVE, UNAVAILABLE)
    ]
