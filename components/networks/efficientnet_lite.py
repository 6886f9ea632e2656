"""The EfficientNet-Lite family in plain torch, under the parameter names of its published
weights, built from a width and a depth multiplier as timm's ``_gen_efficientnet_lite``.

EfficientNet-Lite (Tan and Le, 2019, for mobile CPUs) is EfficientNet without
squeeze-excitation and with ReLU6: MBConv blocks between a stride-2 stem of 32 channels
and a 1×1 head conv to 1280, both fixed across the family. Lite0 has 16 blocks; the others
widen each stage's channels (rounded to multiples of 8) and deepen its repeats (rounded
up), all but the first and last stage's. Its weights were trained in TensorFlow:
convolutions pad as TensorFlow's SAME does (more after than before on a stride-2 step),
batch norm uses eps 1e-3, and inputs are scaled as (x − 127) / 128 (the catalogue's mean
and std per channel, on pixels 0–255 / 255).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

BATCH_NORM_EPS = 1e-3
STEM = 32  # the stem conv's channels, fixed across the family
FEATURES = 1280  # the head conv's channels: what the classifier sees, pooled
# each stage: repeats, kernel, stride, expansion, input and output channels (the
# builder's 'r1_k3_s11_e1_i32_o16' strings) at width and depth 1: Lite0's
BASE_STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)


Stage = tuple[int, int, int, int, int, int]


def stages(width: float, depth: float) -> tuple[Stage, ...]:
    """The family's stage table at ``width`` and ``depth``: channels times ``width``
    rounded to a multiple of 8 (never below 90% of it), repeats times ``depth`` rounded
    up, but for the first and last stage's (one block each, as the Lite models keep)."""
    last = len(BASE_STAGES) - 1
    table = []
    for index, (repeats, kernel, stride, expansion, inputs, outputs) in enumerate(BASE_STAGES):
        deeper = repeats if index in (0, last) else math.ceil(repeats * depth)
        wider_in = STEM if index == 0 else _channels(inputs, width)
        table.append((deeper, kernel, stride, expansion, wider_in, _channels(outputs, width)))
    return tuple(table)


def _channels(channels: int, width: float, divisor: int = 8) -> int:
    scaled = channels * width
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * scaled else rounded


class SamePaddingConv2d(nn.Conv2d):
    """A bias-free convolution padded as TensorFlow's SAME: the output side is the input's
    divided by the stride, rounded up, and an odd padding puts the extra pixel after."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int = 1,
                 groups: int = 1):  # fmt: skip
        padding = kernel // 2 if stride == 1 else 0  # stride 1: symmetric, as nn.Conv2d pads
        super().__init__(in_channels, out_channels, kernel, stride, padding, groups=groups,
                         bias=False)  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride[0] == 1:
            return super().forward(x)
        kernel, stride = self.kernel_size[0], self.stride[0]
        height, width = x.shape[-2:]
        pad_h = max((-(-height // stride) - 1) * stride + kernel - height, 0)
        pad_w = max((-(-width // stride) - 1) * stride + kernel - width, 0)
        x = F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))
        return super().forward(x)


def _batch_norm(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BATCH_NORM_EPS, momentum=0.01)


class MBConvBlock(nn.Module):
    """Inverted bottleneck: 1×1 expansion, depthwise conv, 1×1 projection, each with batch
    norm (ReLU6 after the first two), added to the input where the shape allows."""

    def __init__(self, kernel: int, stride: int, expansion: int, inputs: int, outputs: int):
        super().__init__()
        hidden = inputs * expansion
        self.expands = expansion != 1
        if self.expands:
            self._expand_conv = SamePaddingConv2d(inputs, hidden, 1)
            self._bn0 = _batch_norm(hidden)
        self._depthwise_conv = SamePaddingConv2d(hidden, hidden, kernel, stride, groups=hidden)
        self._bn1 = _batch_norm(hidden)
        self._project_conv = SamePaddingConv2d(hidden, outputs, 1)
        self._bn2 = _batch_norm(outputs)
        self.residual = stride == 1 and inputs == outputs

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self._bn0(self._expand_conv(inputs))) if self.expands else inputs
        x = F.relu6(self._bn1(self._depthwise_conv(x)))
        x = self._bn2(self._project_conv(x))
        out: torch.Tensor = x + inputs if self.residual else x
        return out


class EfficientNetLite(nn.Module):
    """An EfficientNet-Lite of ``width`` and ``depth`` with a linear layer of ``classes``;
    ``name`` names it in errors. ``freeze`` fixes its first blocks."""

    def __init__(
        self,
        in_channels: int,
        name: str,
        width: float,
        depth: float,
        classes: int = 2,
        dropout: float = 0.2,
    ):
        super().__init__()
        if in_channels != 3:
            raise ValueError(f"{name} takes RGB photos (3 channels), found {in_channels}")
        self.name = name
        self._conv_stem = SamePaddingConv2d(3, STEM, 3, 2)
        self._bn0 = _batch_norm(STEM)
        blocks = []
        table = stages(width, depth)
        for repeats, kernel, stride, expansion, inputs, outputs in table:
            blocks.append(MBConvBlock(kernel, stride, expansion, inputs, outputs))
            blocks += [
                MBConvBlock(kernel, 1, expansion, outputs, outputs) for _ in range(repeats - 1)
            ]
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = SamePaddingConv2d(table[-1][-1], FEATURES, 1)
        self._bn1 = _batch_norm(FEATURES)
        self._dropout = nn.Dropout(dropout)
        self._fc = nn.Linear(FEATURES, classes)
        self.frozen: list[nn.Module] = []
        self.frozen_blocks = 0
        self.frozen_statistics = False

    def freeze(self, blocks: int, statistics: bool = False) -> None:
        """Fix the stem and the first ``blocks`` blocks (none at 0): their weights take no
        gradient and their batch norm keeps its statistics in training mode too. With
        ``statistics``, every batch norm keeps its statistics, its scale and shift still
        learning: a short fine-tune's small batches then normalise as the pretrained net
        did, not by their own mean and variance."""
        if not 0 <= blocks <= len(self._blocks):
            raise ValueError(
                f"expected 0 to {len(self._blocks)} frozen blocks for {self.name}, found {blocks}"
            )
        self.frozen = [self._conv_stem, self._bn0, *self._blocks[:blocks]] if blocks else []
        self.frozen_blocks = blocks
        self.frozen_statistics = statistics
        for module in self.frozen:
            module.requires_grad_(False)
        self.train(self.training)

    def train(self, mode: bool = True) -> EfficientNetLite:
        """Training mode for the layers that learn; the frozen ones, and every batch norm
        where its statistics are frozen, stay in eval mode."""
        super().train(mode)
        for module in self.frozen:
            module.eval()
        if self.frozen_statistics:
            for module in self.modules():
                if isinstance(module, nn.BatchNorm2d):
                    module.eval()
        return self

    def frozen_part(self, x: torch.Tensor) -> torch.Tensor:
        """What the frozen layers make of ``x``: the stem and the frozen blocks' output
        (the stem's alone with nothing frozen)."""
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for block in self._blocks[: self.frozen_blocks]:
            x = block(x)
        return x

    def from_frozen(self, x: torch.Tensor) -> torch.Tensor:
        """The logits from ``frozen_part``'s output: the blocks that learn, the head conv,
        pooling and the classifier."""
        logits: torch.Tensor = self._fc(self._dropout(self.pooled_from_frozen(x)))
        return logits

    @property
    def classifier(self) -> nn.Linear:
        """The layer of a logit a class on the pooled features."""
        return self._fc

    def pooled(self, x: torch.Tensor) -> torch.Tensor:
        """What the classifier sees: the head conv's output, averaged over the image."""
        return self.pooled_from_frozen(self.frozen_part(x))

    def pooled_from_frozen(self, x: torch.Tensor) -> torch.Tensor:
        """What the classifier sees, from ``frozen_part``'s output."""
        for block in self._blocks[self.frozen_blocks :]:
            x = block(x)
        return F.relu6(self._bn1(self._conv_head(x))).mean((2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.from_frozen(self.frozen_part(x))
