"""Batched inference: logits for a whole split in one pass, one host sync at the end."""

from __future__ import annotations

import torch

from components.training.batches import DeviceSplit


def autocast(device: torch.device, enabled: bool = True):
    """bf16 autocast on CUDA when ``enabled``; a no-op elsewhere (one code path)."""
    return torch.autocast(
        device.type, dtype=torch.bfloat16, enabled=enabled and device.type == "cuda"
    )


def default_batch_size(device: torch.device) -> int:
    """64 on a CPU, whose caches then hold the activations (about twice as fast as 1,024
    on 2 cores, docs/BENCHMARKS.md); 1,024 on a GPU, which wants large batches."""
    return 64 if device.type == "cpu" else 1024


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module, data: DeviceSplit, batch_size: int | None = None, amp: bool = True
) -> torch.Tensor:
    """Float32 logits (N×2) for every sample of ``data``, in order, on its device."""
    model.eval()
    device = data.labels.device
    batch_size = batch_size or default_batch_size(device)
    outputs = []
    for pixels, _ in data.batches(batch_size):
        with autocast(device, amp):
            outputs.append(model(pixels).float())
    return torch.cat(outputs) if outputs else torch.empty(0, 2, device=device)
