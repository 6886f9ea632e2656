"""Where training runs: the device asked for."""

from __future__ import annotations

import pytest
import torch

from components.training import runtime


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="use --device auto or cpu"):
        runtime.pick_device("cuda")
