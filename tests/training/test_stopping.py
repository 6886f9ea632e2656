"""SIGTERM asks for a stop that the training loop takes between batches, never inside
whatever the process was doing when it came."""

from __future__ import annotations

import os
import signal

import pytest

from components.training.stopping import stop_at_next_batch_on_sigterm, stop_if_asked


def test_sigterm_interrupts_nothing_and_the_next_batch_stops():
    before = signal.getsignal(signal.SIGTERM)
    with stop_at_next_batch_on_sigterm():
        stop_if_asked()  # nothing asked yet
        os.kill(os.getpid(), signal.SIGTERM)  # handled before kill returns, here
        written = sum(range(1000))  # a write to the tracking store, say: runs to its end
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            stop_if_asked()
    assert written == 499500
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_asked_in_an_earlier_block_is_not_taken_in_the_next():
    with stop_at_next_batch_on_sigterm():
        os.kill(os.getpid(), signal.SIGTERM)
    with stop_at_next_batch_on_sigterm():
        stop_if_asked()
