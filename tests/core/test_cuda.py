"""Whether a CUDA device could be here, answered before torch loads."""

import ctypes

import pytest
import torch

from components.core import cuda


def test_wherever_torch_finds_a_gpu_the_driver_is_found():
    assert cuda.driver_present() or not torch.cuda.is_available()


def test_a_driver_library_that_does_not_load_is_no_driver(monkeypatch):
    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert not cuda.driver_present()


@pytest.mark.gpu
def test_the_gpu_machines_driver_is_found():
    assert cuda.driver_present()
