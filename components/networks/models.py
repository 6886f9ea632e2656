"""The networks: the classic tutorial CNN and stronger ones, built by name.

The CNNs max-pool before the ReLU, not after: both are monotone, so they commute and the
function is the same, with the ReLU on a quarter of the values.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from components.core.atomic import atomic_file
from components.core.names import SPEC_FILE, WEIGHTS_FILE
from components.networks.backbones import BACKBONES
from components.networks.efficientnet_lite import EfficientNetLite
from components.networks.registry import NETS
from components.networks.spec import check_spec, write_spec


class TutorialCNN(nn.Module):
    """The tutorial's net: 3 conv 5×5 (32/64/128) with 2×2 max-pool, fc 512, a logit a class.

    It returns logits (the tutorial applied softmax and trained with MSE), and takes
    1- or 3-channel input of any square size of at least 36 pixels.
    """

    def __init__(self, in_channels: int, image_size: int, classes: int = 2):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 5)
        self.conv2 = nn.Conv2d(32, 64, 5)
        self.conv3 = nn.Conv2d(64, 128, 5)
        side = image_size
        for _ in range(3):
            side = (side - 4) // 2
        if side < 1:
            raise ValueError(f"tutorial_cnn needs images of at least 36 pixels, found {image_size}")
        self.fc1 = nn.Linear(128 * side * side, 512)
        self.fc2 = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(F.max_pool2d(self.conv3(x), 2))
        logits: torch.Tensor = self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))
        return logits


def _conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.MaxPool2d(2),
        nn.ReLU(inplace=True),
    )


class BatchNormCNN(nn.Module):
    """Four VGG-style blocks with batch norm, global average pooling and dropout."""

    def __init__(self, in_channels: int, image_size: int, classes: int = 2, dropout: float = 0.3):
        super().__init__()
        if image_size < 16:
            raise ValueError(f"bn_cnn needs images of at least 16 pixels, found {image_size}")
        widths = (in_channels, 32, 64, 128, 256)
        self.features = nn.Sequential(*(_conv_block(a, b) for a, b in itertools.pairwise(widths)))
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(256, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(x))
        return logits


class ResidualBlock(nn.Module):
    """Two 3×3 convs with batch norm, added to their input, then a ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.body(x))


class CompactCNN(nn.Module):
    """The tutorial's cost with batch norm: 3×3 convs (32/64/128/256 by default), a max-pool
    after each of the first ``pools``, global average pooling and dropout; about 33M
    multiply-adds at 50×50 (the tutorial's net: 26M). A ``stem`` of that many channels
    puts a stride-2 conv in front; ``residual_after`` adds a residual block after those
    convs (by index)."""

    def __init__(
        self,
        in_channels: int,
        image_size: int,
        classes: int = 2,
        widths: tuple[int, ...] = (32, 64, 128, 256),
        pools: int = 3,
        dropout: float = 0.2,
        stem: int = 0,
        residual_after: tuple[int, ...] = (),
    ):
        super().__init__()
        if image_size < 16:
            raise ValueError(
                f"compact_cnn and five_conv_cnn need images of at least 16 pixels, found "
                f"{image_size}"
            )
        layers: list[nn.Module] = []
        if stem:
            layers += [nn.Conv2d(in_channels, stem, 3, stride=2, padding=1, bias=False)]
            layers += [nn.BatchNorm2d(stem), nn.ReLU(inplace=True)]
        for index, (a, b) in enumerate(itertools.pairwise((stem or in_channels, *widths))):
            layers += [nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b)]
            layers += ([nn.MaxPool2d(2)] if index < pools else []) + [nn.ReLU(inplace=True)]
            layers += [ResidualBlock(b)] if index in residual_after else []
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(widths[-1], classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(x))
        return logits


def five_conv_cnn(in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """compact_cnn one layer deeper and narrower in the middle (32/64/96/192/256, four
    max-pools): about 30M multiply-adds at 50×50, and better on validation in the
    tutorial's 10 epochs of grey 50×50 photos (docs/BENCHMARKS.md)."""
    return CompactCNN(in_channels, image_size, classes, widths=(32, 64, 96, 192, 256), pools=4)


def residual_cnn(in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """compact_cnn behind a stride-2 stem, a max-pool after all four convs and a residual
    block after the second and fourth: twice the input side for about the same cost
    (about 70M multiply-adds at 96×96, compact_cnn 60M at 64×64)."""
    if image_size < 32:
        raise ValueError(f"residual_cnn needs images of at least 32 pixels, found {image_size}")
    return CompactCNN(in_channels, image_size, classes, pools=4, stem=24, residual_after=(1, 3))


def lean_residual_cnn(in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """residual_cnn without its last residual block, whose 256 channels see a 3×3 map:
    about 60M multiply-adds at 96×96 and 0.47M weights (residual_cnn: 70M, 1.65M), the
    same val accuracy after 20 epochs in four fifths of the time (docs/BENCHMARKS.md)."""
    if image_size < 32:
        raise ValueError(
            f"lean_residual_cnn needs images of at least 32 pixels, found {image_size}"
        )
    return CompactCNN(in_channels, image_size, classes, pools=4, stem=24, residual_after=(1,))


def stem16_residual_cnn(in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """lean_residual_cnn with a 16-channel stem (it has 24): oneDNN's AVX-512 kernels work
    on channels in blocks of 16, so 24 are computed as 32. About 54M multiply-adds at
    96×96 and a fifth less time a train step on an AVX-512 CPU (docs/BENCHMARKS.md)."""
    if image_size < 32:
        raise ValueError(
            f"stem16_residual_cnn needs images of at least 32 pixels, found {image_size}"
        )
    return CompactCNN(in_channels, image_size, classes, pools=4, stem=16, residual_after=(1,))


def small_input_resnet18(in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """torchvision's ResNet-18, untrained, with a 3×3 stem and no max-pool below 96 pixels."""
    from torchvision.models import resnet18  # 2 s of imports (torch._dynamo): only when used

    net = resnet18(weights=None, num_classes=classes)
    if image_size < 96:
        net.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
    else:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    module: nn.Module = net
    return module


def efficientnet_lite(name: str, in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """The catalogue's backbone ``name`` (components.networks.backbones), built by its
    family's builder with a logit a class and its source's dropout; training starts it
    from its ImageNet weights (components.networks.pretrained)."""
    if image_size < 32:
        raise ValueError(f"{name} needs images of at least 32 pixels, found {image_size}")
    backbone = BACKBONES[name]
    return EfficientNetLite(
        in_channels, name, backbone.width, backbone.depth, classes, backbone.dropout
    )


def build_model(name: str, in_channels: int, image_size: int, classes: int = 2) -> nn.Module:
    """Build the registry's net ``name`` (components.networks.registry) for
    ``in_channels``×``image_size``² input, a logit for each of ``classes`` out."""
    if name not in NETS:
        raise ValueError(f"unknown model {name!r}; expected one of: {', '.join(NETS)}")
    net = NETS[name]
    build: Callable[..., nn.Module] = globals()[net.builder]
    return (
        build(name, in_channels, image_size, classes)
        if net.pretrained
        else build(in_channels, image_size, classes)
    )


# how far shift averaging moves each copy, up or down and left or right: a third of the
# random crops' 6-pixel reach at 50×50 (the only step measured, docs/BENCHMARKS.md)
SHIFT_PIXELS = 2


class Classifier(nn.Module):
    """A trained net plus its input normalisation: raw 0–255 pixels in, logits out.

    This is the form the model is saved, logged to MLflow and served in, so callers
    never need to know the training set's mean and std. Its convolutions run channels-last
    (NHWC), the layout oneDNN on CPUs and tensor cores on GPUs are fastest with, unless
    ``channels_last`` is off (to measure what the layout buys). With ``mirror_average``
    or ``shift_average``, in eval mode it returns the log of the mean class probabilities
    over the views of the image (a valid logit vector: its softmax is that mean): the image
    and its mirror image, the image and four copies shifted diagonally, or both (ten).
    """

    scale: torch.Tensor
    shift: torch.Tensor

    def __init__(
        self,
        net: nn.Module,
        mean: list[float],
        std: list[float],
        channels_last: bool = True,
        mirror_average: bool = False,
        shift_average: bool = False,
    ):
        super().__init__()
        self.layout = torch.channels_last if channels_last else torch.contiguous_format
        self.mirror_average = mirror_average
        self.shift_average = shift_average
        self.net = net.to(memory_format=self.layout)
        self.register_buffer("scale", 1.0 / (255.0 * torch.tensor(std).view(1, -1, 1, 1)))
        self.register_buffer("shift", torch.tensor(mean).view(1, -1, 1, 1) * 255.0)

    def normalised(self, pixels: torch.Tensor) -> torch.Tensor:
        """0–255 pixels as the net takes them: scaled by the mean and std, in its layout."""
        return ((pixels.float() - self.shift) * self.scale).contiguous(memory_format=self.layout)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        inputs = self.normalised(pixels)
        if self.training or not (self.mirror_average or self.shift_average):
            logits: torch.Tensor = self.net(inputs)
            return logits
        views = views_of(inputs, self.mirror_average, self.shift_average)
        log_p = torch.stack([self.net(view).log_softmax(1) for view in views])
        return torch.logsumexp(log_p, 0) - math.log(len(views))


class OneBatchOfViews(nn.Module):
    """An eval-mode classifier whose views of each photo go through its net as one batch:
    the classifier's function, and its weights under the same names. Exported (the ONNX
    graph, MLflow's pt2 program), it holds the net once, not once a view: ten views, a
    tenth of the nodes to export, save and load."""

    scale: torch.Tensor
    shift: torch.Tensor

    def __init__(self, model: Classifier):
        super().__init__()
        self.net = model.net
        self.register_buffer("scale", model.scale)
        self.register_buffer("shift", model.shift)
        self.mirror_average, self.shift_average = model.mirror_average, model.shift_average

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        inputs = (pixels.float() - self.shift) * self.scale  # as Classifier.forward
        views = views_of(inputs, self.mirror_average, self.shift_average)
        if len(views) == 1:
            logits: torch.Tensor = self.net(inputs)
            return logits
        log_p = self.net(torch.cat(views)).log_softmax(1).unflatten(0, (len(views), -1))
        return torch.logsumexp(log_p, 0) - math.log(len(views))

    def view_count(self) -> int:
        """The views of each photo it scores."""
        return len(views_of(torch.zeros(1, 1, 8, 8), self.mirror_average, self.shift_average))


def views_of(images: torch.Tensor, mirror_average: bool, shift_average: bool) -> list[torch.Tensor]:
    """The views a prediction averages over: ``images``, with four shifted copies where
    ``shift_average``, and the mirror image of each where ``mirror_average``."""
    views = shifted_views(images) if shift_average else [images]
    if mirror_average:
        views += [view.flip(3) for view in views]
    return views


def shifted_views(images: torch.Tensor, step: int = SHIFT_PIXELS) -> list[torch.Tensor]:
    """``images`` and four copies moved ``step`` pixels diagonally, edges reflected."""
    height, width = images.shape[-2:]
    padded = F.pad(images, (step,) * 4, mode="reflect")
    return [images] + [
        padded[..., step + dy : step + dy + height, step + dx : step + dx + width]
        for dy in (-step, step)
        for dx in (-step, step)
    ]


def save_classifier(path: Path, model: Classifier, spec: dict[str, Any]) -> str:
    """Save weights plus ``spec`` (model name, channels, image_size, mean, std, classes,
    mirror_average, shift_average); the sha256 of the bytes written."""
    buffer = io.BytesIO()
    torch.save({"state_dict": model.state_dict(), **spec}, buffer)
    with atomic_file(path) as handle:
        handle.write(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def save_trained(folder: Path, model: Classifier, spec: dict[str, Any]) -> dict[str, str]:
    """``model.pt`` and ``spec.json`` in ``folder``, as the train step leaves them; the
    sha256 of each, by file name."""
    return {
        WEIGHTS_FILE: save_classifier(folder / WEIGHTS_FILE, model, spec),
        SPEC_FILE: write_spec(folder, spec),
    }


def load_classifier(path: Path) -> tuple[Classifier, dict[str, Any]]:
    """Rebuild a saved classifier on the CPU; return it with its spec.

    Raises:
        FileNotFoundError: no ``model.pt`` at ``path``.
        ValueError: the file is not a model the train step wrote: unreadable without
            running code, a spec outside the data contract, or weights of another shape.
    """
    path = Path(path)
    if path.is_dir():
        path = path / WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"expected model.pt from the train step at {path}, found none")
    saved = load_tensors(path, f"{path}, a model from the train step")
    if not isinstance(saved, dict) or not isinstance(saved.get("state_dict"), dict):
        raise ValueError(f"expected weights and a spec in {path}, found {type(saved).__name__}")
    spec = check_spec({key: value for key, value in saved.items() if key != "state_dict"}, path)
    net = build_model(spec["model"], spec["channels"], spec["image_size"], len(spec["classes"]))
    model = Classifier(
        net, spec["mean"], spec["std"], True, spec["mirror_average"], spec["shift_average"]
    )
    try:
        model.load_state_dict(saved["state_dict"])
    except RuntimeError as err:
        raise ValueError(
            f"expected weights of {spec['model']} for {spec['channels']}×{spec['image_size']}"
            f"×{spec['image_size']} images in {path}, found others: {err}"
        ) from err
    return model.eval(), spec


def load_tensors(path: Path, described: str) -> object:
    """``torch.load`` onto the CPU of tensors and plain data only, never code.

    ``described`` names the file in errors: where it came from and what it should be.

    Raises:
        ValueError: the file does not load so (it holds code, or is no torch file).
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - a crafted file can make the unpickler raise anything
        reason = ": ".join([type(err).__name__, *str(err).splitlines()[:1]])
        raise ValueError(
            f"cannot load {described}: only tensors and plain data are loaded, "
            f"never code ({reason:.300})"
        ) from err
