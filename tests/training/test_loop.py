"""The epoch loop: its fast paths compute what the plain ones do (on a GPU, without host
syncs); its epochs train at their progressive side, with CutMix."""

from __future__ import annotations

import pytest
import torch

from components.training import runtime
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig
from components.training.inference import predict_logits
from components.training.loop import (
    Learner,
    make_optimizer,
    new_learner,
    run_epoch,
    train_one_epoch,
)
from tests.support.models import tiny_model, tiny_split

PETS = ["cat", "dog"]


@pytest.mark.gpu
def test_bf16_autocast_on_the_gpu_agrees_with_fp32_on_the_cpu():
    cpu = predict_logits(tiny_model("cpu"), tiny_split("cpu"), amp=False)
    gpu = predict_logits(tiny_model("cuda"), tiny_split("cuda"), amp=True).cpu()
    assert (cpu.argmax(1) == gpu.argmax(1)).float().mean() >= 0.9
    assert torch.allclose(cpu, gpu, atol=0.1)


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:Synchronization debug mode is a prototype:UserWarning")
def test_an_epoch_on_the_gpu_never_waits_for_the_device():
    device = torch.device("cuda")
    data, model = tiny_split(device, count=400), tiny_model(device)
    cfg = TrainConfig(data="unused", output="unused", model="tutorial_cnn", batch_size=50)
    learner = Learner(model, model, *make_optimizer(model, cfg, steps_per_epoch=8), onnx=None)
    try:
        torch.cuda.set_sync_debug_mode("error")  # any host sync in the loop raises
        sums = train_one_epoch(learner, data, cfg, 1, runtime.Workers())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert sums[2].item() == 400


def test_compile_wraps_the_trained_net_and_leaves_the_saved_one_plain():
    cfg = TrainConfig(data="unused", output="unused", model="tutorial_cnn", compile=True)
    meta = {"channels": 1, "image_size": 40, "mean": [0.45], "std": [0.25], "classes": PETS}
    learner = new_learner(cfg, meta, runtime.Workers(), torch.device("cpu"), steps_per_epoch=4)
    assert getattr(learner.parallel, "_orig_mod", None) is learner.model  # compiled lazily
    assert not any(key.startswith("_orig_mod") for key in learner.model.state_dict())


@pytest.mark.gpu
def test_a_compiled_epoch_on_the_gpu_with_fused_adamw_and_crops():
    cfg = TrainConfig(
        data="unused",
        output="unused",
        model="compact_cnn",
        batch_size=50,
        compile=True,
        min_crop_area=0.3,
        label_smoothing=0.1,
    )
    meta = {"channels": 1, "image_size": 40, "mean": [0.45], "std": [0.25], "classes": PETS}
    device = torch.device("cuda")
    learner = new_learner(cfg, meta, runtime.Workers(), device, steps_per_epoch=8)
    assert learner.optimizer.defaults["fused"] and torch.backends.cudnn.benchmark
    loss_sum, _, seen = train_one_epoch(
        learner, tiny_split(device, count=400), cfg, 1, runtime.Workers()
    )
    assert seen.item() == 400 and torch.isfinite(loss_sum)


def test_an_epoch_trains_at_its_progressive_side_with_cutmix():
    cfg = TrainConfig(
        data="unused", output="unused", model="compact_cnn", epochs=3, batch_size=10,
        start_size=16, cutmix=1.0,
    )  # fmt: skip
    meta = {"channels": 3, "image_size": 32, "mean": [0.5] * 3, "std": [0.25] * 3, "classes": PETS}
    learner = new_learner(cfg, meta, runtime.Workers(), torch.device("cpu"), steps_per_epoch=2)
    sides: list[int] = []
    learner.model.net.register_forward_pre_hook(lambda _, args: sides.append(args[0].shape[-1]))
    generator = torch.Generator().manual_seed(0)
    pixels = torch.randint(0, 256, (20, 3, 32, 32), dtype=torch.uint8, generator=generator)
    data = DeviceSplit(pixels, torch.arange(20) % 2)
    losses = [train_one_epoch(learner, data, cfg, epoch, runtime.Workers())[0] for epoch in (1, 3)]
    assert sides == [16, 16, 32, 32]  # epoch 1 at the start size, the last at the data's
    assert all(torch.isfinite(loss) and loss > 0 for loss in losses)


def test_the_val_split_is_scored_after_every_nth_epoch_and_the_last():
    cfg = TrainConfig(
        data="unused", output="unused", model="tutorial_cnn", epochs=3, batch_size=20,
        validate_every=2, runtime="torch",
    )  # fmt: skip
    meta = {"channels": 1, "image_size": 40, "mean": [0.45], "std": [0.25], "classes": PETS}
    learner = new_learner(cfg, meta, runtime.Workers(), torch.device("cpu"), steps_per_epoch=2)
    data = tiny_split(torch.device("cpu"), count=40)
    scored = [
        "val_accuracy" in run_epoch(learner, data, data, cfg, epoch, runtime.Workers())
        for epoch in range(1, 4)
    ]
    assert scored == [False, True, True]  # the 2nd, and the last
