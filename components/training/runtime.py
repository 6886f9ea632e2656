"""Where training runs: the device, and one process or many under torchrun (DDP).

Under ``torchrun`` (``WORLD_SIZE`` > 1) each process joins the group (NCCL on GPUs, Gloo
on CPUs), takes the GPU of its local rank, and these helpers reduce and share across
ranks; in one plain process they do nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import distributed as dist
from torch.nn.parallel import DistributedDataParallel

from components.core.cores import available_cores
from components.training import heap

T = TypeVar("T")


@dataclass(frozen=True)
class Workers:
    """This process's place among the training processes."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs to MLflow and writes checkpoints and the model."""
        return self.rank == 0


def pick_device(name: str) -> torch.device:
    """``auto`` is CUDA when present, else the CPU; ``cuda`` where there is none is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"expected a device of auto, cpu, cuda or cuda:N, found {name!r}") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"--device {name} asked for CUDA, which this machine does not have; "
            "use --device auto or cpu"
        )
    return device


def start(device_name: str) -> tuple[Workers, torch.device]:
    """Join the process group when launched by torchrun; this process's workers and device."""
    heap.keep_freed_memory()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device = pick_device(device_name)
    if world_size == 1:
        if device.type == "cpu":  # not more threads than the container's CPU limit
            torch.set_num_threads(min(torch.get_num_threads(), available_cores()))
        return Workers(), device
    local_rank = int(os.environ["LOCAL_RANK"])
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:  # share the cores instead of oversubscribing them
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
        torch.set_num_threads(max(1, available_cores() // per_node))
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Workers(dist.get_rank(), world_size, local_rank), device


def stop(workers: Workers) -> None:
    if workers.world_size > 1 and dist.is_initialized():
        dist.destroy_process_group()


def wrap(model: torch.nn.Module, workers: Workers, device: torch.device) -> torch.nn.Module:
    """The model as DistributedDataParallel across ranks, or as it is in one process."""
    if workers.world_size == 1:
        return model
    return DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )


def sum_across(workers: Workers, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Element-wise sums over all ranks, in place."""
    if workers.world_size > 1:
        for tensor in tensors:
            dist.all_reduce(tensor)
    return tensors


def share(workers: Workers, value: T) -> T:
    """Rank 0's ``value``, on every rank (tensors inside arrive on the CPU)."""
    if workers.world_size == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]
