"""Batched inference: logits for a whole split in one pass, one host sync at the end."""

from __future__ import annotations

import torch

from components.scoring.scorers import CPU_BATCH
from components.training.batches import DeviceSplit


def autocast(device: torch.device, enabled: bool = True, on_cpu: bool = False) -> torch.autocast:
    """bf16 autocast when ``enabled``: on CUDA, and with ``on_cpu`` on a CPU with native
    bf16; a no-op elsewhere (one code path).

    oneDNN runs bf16 convolutions natively on AMX (Intel's matrix units, Sapphire Rapids
    on) and on AVX512-BF16 (AMD Zen 4 on, Intel Cooper Lake): the training step of the
    tutorial's net ran 2.5-3 times as fast on AMX and 1.6-1.9 times on a Zen 4 EPYC
    (docs/BENCHMARKS.md). Training passes ``on_cpu``; scoring stays float32 on a CPU, so
    a split's accuracy does not depend on the CPU it is scored on.
    """
    native = device.type == "cuda" or (on_cpu and device.type == "cpu" and cpu_has_native_bf16())
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled and native)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AMX tiles or AVX512-BF16); elsewhere oneDNN
    emulates it, slower than float32."""
    return torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()


def default_batch_size(device: torch.device) -> int:
    """64 on a CPU, whose caches then hold the activations (about twice as fast as 1,024
    on 2 cores, docs/BENCHMARKS.md); 1,024 on a GPU, which wants large batches."""
    return CPU_BATCH if device.type == "cpu" else 1024


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module, data: DeviceSplit, batch_size: int | None = None, amp: bool = True
) -> torch.Tensor:
    """Float32 logits (a row a photo, a column a class) for every sample of ``data``, in
    order, on its device."""
    model.eval()
    device = data.labels.device
    batch_size = batch_size or default_batch_size(device)
    outputs = []
    for pixels, _ in data.batches(batch_size):
        with autocast(device, amp):
            outputs.append(model(pixels).float())
    return torch.cat(outputs) if outputs else torch.empty(0, 2, device=device)
