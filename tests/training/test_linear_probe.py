"""The linear probe: the classifier fitted on the pretrained net's pooled features of real
photos tells their classes apart before any fine-tuning, and a train run starts from it."""

from __future__ import annotations

import pytest
import torch

from components.networks import pretrained
from components.networks.backbones import BACKBONES
from components.networks.models import Classifier, build_model, load_classifier
from components.training import linear_probe
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig

CPU = torch.device("cpu")


def lite0() -> Classifier:
    """EfficientNet-Lite0 from its package at the arrays' 64×64, a random classifier."""
    net = build_model("efficientnet_lite0", 3, 64)
    pretrained.load_pretrained(net, "efficientnet_lite0")
    backbone = BACKBONES["efficientnet_lite0"]
    return Classifier(net, list(backbone.mean), list(backbone.std), True, False)


def test_the_probed_classifier_tells_the_photos_it_was_fitted_on_apart(rgb_arrays):
    model = lite0()
    photos = DeviceSplit.load(rgb_arrays, "train", CPU).pick(60, seed=0)
    head = linear_probe.fit_classifier(model, photos)
    linear_probe.set_classifier(model, head)
    with torch.no_grad():
        predicted = model.eval()(photos.images).argmax(1)
    # ImageNet's features separate 60 real photos of cats and dogs; a random head does not
    assert (predicted == photos.labels).float().mean() >= 0.9
    assert torch.equal(model.net._fc.weight, head["weight"])


def test_the_probe_leaves_the_nets_mode_and_every_other_weight_as_they_were(rgb_arrays):
    model = lite0().train()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    linear_probe.fit_classifier(model, DeviceSplit.load(rgb_arrays, "train", CPU).pick(20, 0))
    assert model.training
    assert all(torch.equal(value, before[name]) for name, value in model.state_dict().items())


@pytest.mark.parametrize("field", ["probe_photos", "frozen_statistics"])
def test_a_probe_or_frozen_statistics_without_pretrained_weights_are_refused(field):
    value = 100 if field == "probe_photos" else True
    with pytest.raises(ValueError, match=f"expected {field} with a pretrained net"):
        TrainConfig(data="-", output="-", model="tutorial_cnn", **{field: value})


def test_a_short_fine_tune_starts_from_the_probe_and_keeps_every_statistic(
    rgb_arrays, tmp_path, mlflow_store, caplog
):
    from mlflow.tracking import MlflowClient

    from components.training import session

    cfg = TrainConfig(
        data=str(rgb_arrays),
        output=str(tmp_path / "model"),
        model="efficientnet_lite0",
        frozen_statistics=True,
        probe_photos=40,
        epochs=1,
        batch_size=40,
        lr=1e-4,
    )
    with caplog.at_level("INFO", logger=linear_probe.__name__):
        result = session.train(cfg)
    assert "linear probe: the classifier fitted on 40 train photos" in caplog.text
    params = MlflowClient(mlflow_store).get_run(result.run_id).data.params
    assert params["probe_photos"] == "40" and params["frozen_statistics"] == "True"
    trained, _ = load_classifier(tmp_path / "model")
    imagenet = lite0().net
    # the ImageNet statistics, unchanged by an epoch of training; the weights learned
    assert torch.equal(trained.net._bn1.running_var, imagenet._bn1.running_var)
    assert not torch.equal(trained.net._conv_head.weight, imagenet._conv_head.weight)


def test_the_probe_on_cached_views_sees_each_view_as_the_pixels_give_it(rgb_arrays):
    """From the frozen layers' cached output of a photo and its mirror image, the pooled
    features are those of both photos' pixels: twice the samples, at a fraction of the cost."""
    from components.training import frozen_features

    model = lite0()
    model.net.freeze(10)
    photos = DeviceSplit.load(rgb_arrays, "train", CPU).pick(12, seed=0)
    cached, _ = frozen_features.cache_splits(model, photos, photos, 2, amp=False)
    from_cache, labels = linear_probe.pooled_features(model, cached)
    mirrored = DeviceSplit(photos.images.flip(3), photos.labels)
    from_pixels = [linear_probe.pooled_features(model, split)[0] for split in (photos, mirrored)]
    expected = torch.stack(from_pixels, 1).flatten(0, 1)  # photo 0, its mirror, photo 1, …
    # the same up to bf16's rounding (its cache, its autocast): each row points one way
    similarity = torch.nn.functional.cosine_similarity(from_cache, expected)
    assert similarity.min() > 0.97, similarity
    assert torch.equal(labels, photos.labels.repeat_interleave(2))
