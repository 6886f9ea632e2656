"""Progress on long work: every item passed on, and a log line at each tenth done."""

from __future__ import annotations

import logging

from components.core.progress import logged


def test_a_long_pass_logs_each_tenth_once_and_passes_every_item_on(caplog):
    with caplog.at_level(logging.INFO, logger="components.core.progress"):
        assert list(logged(range(25), 25, "frozen layers", "batches")) == list(range(25))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 10  # 3, 5, 8, 10, … 25 of 25: each tenth once
    assert lines[0].startswith("frozen layers: 3 of 25 batches (12%) in ")
    assert lines[-1].startswith("frozen layers: 25 of 25 batches (100%) in ")


def test_a_pass_of_fewer_items_than_tenths_logs_each_item_once(caplog):
    with caplog.at_level(logging.INFO, logger="components.core.progress"):
        list(logged(["a", "b", "c"], 3, "hashed", "photos"))
    assert [r.getMessage().split(" in ")[0] for r in caplog.records] == [
        "hashed: 1 of 3 photos (33%)",
        "hashed: 2 of 3 photos (66%)",
        "hashed: 3 of 3 photos (100%)",
    ]
