"""A trained model whose answers are known, for the evaluate and predict tests: its files
and their record (``identity.json``), as the train step writes them."""

from __future__ import annotations

import functools

import torch

from components.core import identity
from components.core.names import ONNX_FILE, SPEC_FILE
from components.networks.models import Classifier, build_model, save_trained
from components.training.batches import DeviceSplit
from components.training.onnx_graph import OnnxGraph


def always_dog_model(directory, channels=1, size=40):
    """A tutorial net whose only say is its last bias: every image is a dog, p = 0.88."""
    net = build_model("tutorial_cnn", channels, size)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.zero_()
        net.fc2.bias.copy_(torch.tensor([0.0, 2.0]))
    return _saved(directory, net, channels, size, mean=0.5)


def nan_model(directory, channels=1, size=40):
    """A tutorial net whose last bias is NaN: every logit it gives is NaN. Its weights
    alone (no ONNX graph: its export's check against torch cannot pass), recorded."""
    net = build_model("tutorial_cnn", channels, size)
    with torch.no_grad():
        net.fc2.bias.fill_(float("nan"))
    _saved(directory, net, channels, size, mean=0.5, graph=False)
    return directory


def tiny_split(device, count=37, size=40) -> DeviceSplit:
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (count, 1, size, size), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 2, (count,), generator=generator)
    return DeviceSplit(images.to(device), labels.to(device))


def tiny_model(device) -> Classifier:
    torch.manual_seed(0)
    return Classifier(build_model("tutorial_cnn", 1, 40), [0.45], [0.25]).to(device).eval()


# a tutorial net's spec as the train step saves it, for tests that write one by hand
SPEC = {
    "model": "tutorial_cnn",
    "channels": 1,
    "image_size": 40,
    "mean": [0.45],
    "std": [0.25],
    "classes": ["cat", "dog"],
    "mirror_average": False,
    "shift_average": False,
}


def seeded_model(directory, channels=1, size=40, seed=0):
    """An untrained tutorial net of fixed random weights: its answers vary with the image."""
    torch.manual_seed(seed)
    net = build_model("tutorial_cnn", channels, size)
    return _saved(directory, net, channels, size, mean=0.45)


def _saved(directory, net, channels: int, size: int, mean: float, graph: bool = True):
    """``net`` saved as the train step saves a tutorial net: model.pt and (with ``graph``)
    model.onnx in ``directory``, and their record."""
    spec = {
        "model": "tutorial_cnn",
        "channels": channels,
        "image_size": size,
        "mean": [mean] * channels,
        "std": [0.25] * channels,
        "classes": ["cat", "dog"],
    }
    directory.mkdir(parents=True, exist_ok=True)
    model = Classifier(net, spec["mean"], spec["std"]).eval()
    digests = save_trained(directory, model, spec)
    if graph:
        photos = torch.randint(
            0, 256, (4, channels, size, size), generator=torch.Generator().manual_seed(0)
        )
        written = _graph(channels, size).write(
            directory / ONNX_FILE, model, photos.float(), spec["classes"]
        )
        digests[ONNX_FILE] = identity.sha256_of_bytes(written)
    identity.write_record(directory, digests)
    return directory


def rerecord(directory) -> None:
    """``identity.json`` made anew from the files now in ``directory`` (a test that
    changes a model's file on purpose, to test what is checked after the digests)."""
    names = [
        p.name for p in directory.iterdir() if p.suffix in (".pt", ".onnx") or p.name == SPEC_FILE
    ]
    identity.write_record(directory, {n: identity.sha256_of(directory / n) for n in names})


@functools.cache
def _graph(channels: int, size: int) -> OnnxGraph:
    """One export a shape, each model's weights swapped into it as training does."""
    return OnnxGraph()
