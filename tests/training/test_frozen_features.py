"""Frozen layers run once: cached features give the net's own answers, training on them
learns only what is not frozen, resumes exactly, and stays within its memory bound."""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient

from components.networks import pretrained
from components.networks.backbones import BACKBONES
from components.networks.models import Classifier, build_model
from components.training import frozen_features, runtime, session
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig
from components.training.frozen_features import LearnedPart
from components.training.loop import Learner, make_optimizer, train_one_epoch
from tests.support.helpers import train_config as config

CPU = torch.device("cpu")


def lite0(mirror_average: bool = True) -> Classifier:
    """EfficientNet-Lite0 from its package at 64×64, its 16 blocks frozen."""
    net = build_model("efficientnet_lite0", 3, 64)
    pretrained.load_pretrained(net, "efficientnet_lite0")
    net.freeze(16)
    backbone = BACKBONES["efficientnet_lite0"]
    return Classifier(net, list(backbone.mean), list(backbone.std), True, mirror_average)


def test_cached_features_score_as_the_classifier_scores_its_photos(rgb_arrays):
    model = lite0()
    train = DeviceSplit.load(rgb_arrays, "train", CPU).pick(24, seed=0)
    val = DeviceSplit.load(rgb_arrays, "val", CPU)
    train_features, val_features = frozen_features.cache_splits(model, train, val, 2, amp=False)
    assert train_features.images.shape[:2] == (24, 2) and val_features.images.shape[:2] == (40, 2)
    with torch.no_grad():
        from_photos = model.eval()(val.images)
        mirrored = model.net.frozen_part(model.normalised(train.images[:4]).flip(3))
    from_features = frozen_features.predict_logits(
        LearnedPart(model.net, model.layout), val_features, amp=False
    )
    assert torch.allclose(from_features, from_photos, atol=1e-4)
    assert torch.allclose(train_features.images[:4, 1], mirrored, atol=1e-3)


def test_each_epoch_draws_one_of_each_photos_views():
    features = torch.stack([torch.zeros(200, 3, 2, 2), torch.ones(200, 3, 2, 2)], 1)
    drawn = frozen_features.pick_views(features, torch.Generator().manual_seed(0))
    assert drawn.shape == (200, 3, 2, 2)
    views = drawn.flatten(1)
    assert bool(((views == 0).all(1) | (views == 1).all(1)).all())  # whole views, unmixed
    assert 60 < int(views[:, 0].sum()) < 140  # both drawn, about evenly


def test_features_beyond_the_memory_bound_are_refused_before_any_is_computed(
    rgb_arrays, monkeypatch
):
    monkeypatch.setattr(frozen_features, "memory_limit", lambda: 2**20)  # 1 MiB
    model = lite0()
    train = DeviceSplit.load(rgb_arrays, "train", CPU)
    val = DeviceSplit.load(rgb_arrays, "val", CPU)
    computed = []
    monkeypatch.setattr(model.net, "frozen_part", lambda x: computed.append(x) or x)
    with pytest.raises(MemoryError) as refused:
        frozen_features.cache_splits(model, train, val, 2, amp=False)
    message = str(refused.value)
    assert "160 train photos × 2 views" in message and "40 val photos × 2 views" in message
    assert "0.0 GiB" in message and "train_photos" in message
    assert len(computed) == 2  # one photo of each split, for the shape; no batch


def cached_recipe(rgb_arrays, output, **overrides):
    recipe = {
        "model": "efficientnet_lite0",
        "frozen_blocks": 16,
        "cached_views": 2,
        "mirror_average": True,
        "train_photos": 96,
        "batch_size": 32,
        "epochs": 2,
        "lr": 0.003,  # a constant schedule: a finished run may be resumed to more epochs
    }
    return config(rgb_arrays, output, **{**recipe, **overrides})


@pytest.mark.slow
def test_training_on_cached_features_learns_only_the_unfrozen_layers_and_resumes_exactly(
    rgb_arrays, tmp_path, mlflow_store
):
    whole = session.train(cached_recipe(rgb_arrays, tmp_path / "whole"))
    session.train(cached_recipe(rgb_arrays, tmp_path / "stopped", epochs=1))
    resumed = session.train(cached_recipe(rgb_arrays, tmp_path / "stopped", resume=True))
    assert [e["epoch"] for e in resumed.history] == [1, 2] and "val_accuracy" in whole.history[1]
    expected = torch.load(tmp_path / "whole/model.pt", weights_only=True)["state_dict"]
    actual = torch.load(tmp_path / "stopped/model.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(expected[k], actual[k]) for k in expected)
    untrained = lite0().state_dict()
    frozen = [k for k in expected if k.startswith(("net._conv_stem", "net._bn0", "net._blocks."))]
    learned = [k for k in expected if k.startswith(("net._conv_head", "net._fc"))]
    assert frozen and all(torch.equal(expected[k], untrained[k]) for k in frozen)
    assert not all(torch.equal(expected[k], untrained[k]) for k in learned if k in untrained)
    params = MlflowClient(mlflow_store).get_run(whole.run_id).data.params
    assert params["cached_views"] == "2" and params["train_photos"] == "96"
    assert (tmp_path / "whole/model.onnx").is_file()  # exported, and checked against torch


@pytest.mark.gpu
def test_cached_features_train_an_epoch_on_the_gpu(rgb_arrays):
    device = torch.device("cuda")
    model = lite0().to(device)
    train = DeviceSplit.load(rgb_arrays, "train", device)
    val = DeviceSplit.load(rgb_arrays, "val", device)
    train_features, val_features = frozen_features.cache_splits(model, train, val, 2, amp=True)
    assert train_features.images.is_cuda and train_features.images.dtype == torch.bfloat16
    cfg = TrainConfig(
        data="unused",
        output="unused",
        model="efficientnet_lite0",
        frozen_blocks=16,
        cached_views=2,
        mirror_average=True,
        batch_size=32,
    )
    learned = LearnedPart(model.net, model.layout)
    optimizer, scheduler = make_optimizer(model, cfg, steps_per_epoch=5)
    learner = Learner(model, learned, optimizer, scheduler, onnx=None, learned=learned)
    sums = train_one_epoch(learner, train_features, cfg, 1, runtime.Workers())
    assert sums[2].item() == len(train)
    logits = frozen_features.predict_logits(learned, val_features, amp=True)
    assert logits.shape == (len(val), 2) and bool(torch.isfinite(logits).all())
