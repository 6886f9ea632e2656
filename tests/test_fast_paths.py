"""The fast paths compute what the plain ones do; on a GPU, without per-batch host syncs."""

from __future__ import annotations

import pytest
import torch

from components.training import runtime
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig
from components.training.inference import predict_logits
from components.training.loop import Learner, make_optimizer, train_one_epoch
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
