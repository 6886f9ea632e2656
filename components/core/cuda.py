"""Whether a CUDA device could be here, asked without loading torch where none can be."""

from __future__ import annotations

import ctypes


def driver_present() -> bool:
    """Whether NVIDIA's driver library (``libcuda.so.1``) loads. Without it torch finds
    no CUDA device, so a step on a CPU node knows it without importing torch (seconds of
    its start); with it, torch is asked."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True
