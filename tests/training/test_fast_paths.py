"""The fast paths compute what the plain ones do; on a GPU, without per-batch host syncs."""

from __future__ import annotations

import pytest
import torch

from components.training import runtime
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig
from components.training.inference import predict_logits
from components.training.loop import Learner, make_optimizer, new_learner, train_one_epoch
from components.training.models import Classifier, build_model


def tiny_split(device, count=37, size=40) -> DeviceSplit:
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (count, 1, size, size), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 2, (count,), generator=generator)
    return DeviceSplit(images.to(device), labels.to(device))


def tiny_model(device) -> Classifier:
    torch.manual_seed(0)
    return Classifier(build_model("tutorial_cnn", 1, 40), [0.45], [0.25]).to(device).eval()


def test_batched_inference_equals_the_one_image_at_a_time_loop():
    data, model = tiny_split("cpu"), tiny_model("cpu")
    batched = predict_logits(model, data, batch_size=16)
    with torch.no_grad():
        one_by_one = torch.cat([model(image[None]) for image in data.images])
    assert torch.allclose(batched, one_by_one, atol=1e-5)


@pytest.mark.gpu
def test_bf16_autocast_on_the_gpu_agrees_with_fp32_on_the_cpu():
    cpu = predict_logits(tiny_model("cpu"), tiny_split("cpu"), amp=False)
    gpu = predict_logits(tiny_model("cuda"), tiny_split("cuda"), amp=True).cpu()
    assert (cpu.argmax(1) == gpu.argmax(1)).float().mean() >= 0.9
    assert torch.allclose(cpu, gpu, atol=0.1)


@pytest.mark.gpu
def test_an_epoch_on_the_gpu_never_waits_for_the_device():
    device = torch.device("cuda")
    data, model = tiny_split(device, count=400), tiny_model(device)
    cfg = TrainConfig(data="unused", output="unused", model="tutorial_cnn", batch_size=50)
    learner = Learner(model, model, *make_optimizer(model, cfg, steps_per_epoch=8))
    torch.cuda.set_sync_debug_mode("error")  # any host sync in the loop raises
    try:
        sums = train_one_epoch(learner, data, cfg, 1, runtime.Workers())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert sums[2].item() == 400


def test_the_layout_changes_speed_not_results():
    data, model = tiny_split("cpu"), tiny_model("cpu")
    contiguous = Classifier(build_model("tutorial_cnn", 1, 40), [0.45], [0.25], channels_last=False)
    contiguous.load_state_dict(model.state_dict())
    assert torch.allclose(
        predict_logits(model, data), predict_logits(contiguous.eval(), data), atol=1e-4
    )


def test_compile_wraps_the_trained_net_and_leaves_the_saved_one_plain():
    cfg = TrainConfig(data="unused", output="unused", model="tutorial_cnn", compile=True)
    meta = {"channels": 1, "image_size": 40, "mean": [0.45], "std": [0.25]}
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
    meta = {"channels": 1, "image_size": 40, "mean": [0.45], "std": [0.25]}
    device = torch.device("cuda")
    learner = new_learner(cfg, meta, runtime.Workers(), device, steps_per_epoch=8)
    assert learner.optimizer.defaults["fused"] and torch.backends.cudnn.benchmark
    loss_sum, _, seen = train_one_epoch(
        learner, tiny_split(device, count=400), cfg, 1, runtime.Workers()
    )
    assert seen.item() == 400 and torch.isfinite(loss_sum)
