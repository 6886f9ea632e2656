"""Inference in batches: the same answers as one image at a time, the layout aside."""

from __future__ import annotations

import torch

from components.networks.models import Classifier, build_model
from components.training import inference
from components.training.inference import predict_logits
from tests.support.models import tiny_model, tiny_split


def test_batched_inference_equals_the_one_image_at_a_time_loop():
    data, model = tiny_split("cpu"), tiny_model("cpu")
    batched = predict_logits(model, data, batch_size=16)
    with torch.no_grad():
        one_by_one = torch.cat([model(image[None]) for image in data.images])
    assert torch.allclose(batched, one_by_one, atol=1e-5)


def test_the_layout_changes_speed_not_results():
    data, model = tiny_split("cpu"), tiny_model("cpu")
    contiguous = Classifier(build_model("tutorial_cnn", 1, 40), [0.45], [0.25], channels_last=False)
    contiguous.load_state_dict(model.state_dict())
    assert torch.allclose(
        predict_logits(model, data), predict_logits(contiguous.eval(), data), atol=1e-4
    )


def test_training_runs_in_bf16_on_a_cpu_with_native_bf16_and_scoring_stays_float32(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(inference, "cpu_has_native_bf16", lambda: True)
    with inference.autocast(cpu, True, on_cpu=True):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    with inference.autocast(cpu, True):  # scoring: the same answer on any CPU
        assert not torch.is_autocast_enabled("cpu")
    with inference.autocast(cpu, False, on_cpu=True):  # --no-amp
        assert not torch.is_autocast_enabled("cpu")
    monkeypatch.setattr(inference, "cpu_has_native_bf16", lambda: False)  # no native bf16: slower
    with inference.autocast(cpu, True, on_cpu=True):
        assert not torch.is_autocast_enabled("cpu")
