"""Every net a run may train, one entry each, from scratch or pretrained.

As torchvision's ``get_model`` and timm's model registry name them: an entry says what the
net is in one line, which function builds it (imported only when a net is built, so that
the schemas, the search space and ``--help`` read this without loading torch), and, for a
pretrained net, its catalogue entry (``components.networks.backbones``): where its weights
come from and what they take. The train step's model choices, the docs' table of nets and
the tests derive from it; adding a pretrained net is its catalogue entry, its package in
``pyproject.toml`` and its line in ``requirements.lock``.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.networks.backbones import BACKBONES, Backbone


@dataclass(frozen=True)
class Net:
    """One net: what it is, how it is built, what its training adds."""

    summary: str  # one line: the train step's help and the docs' table
    # the function in components.networks.models (torch's side) that builds it, from
    # (in_channels, image_size, classes); a pretrained net's family builder takes its name
    # first
    builder: str
    random_crops: bool = True  # learns better with random crops on top of flips
    backbone: Backbone | None = None  # its pretrained weights; None: trained from scratch

    @property
    def pretrained(self) -> bool:
        return self.backbone is not None


def _pretrained(backbone: Backbone) -> Net:
    """A catalogue backbone as a net: its family's builder, its summary from its entry."""
    return Net(
        summary=f"{backbone.title}, pretrained on {backbone.trained_on.split(' (')[0]} "
        f"({backbone.imagenet_top1:g}% top-1), {backbone.parameters / 1e6:.1f}M weights, "
        f"RGB at {backbone.input_size} px",
        builder=backbone.builder,
        backbone=backbone,
    )


NETS: dict[str, Net] = {
    "tutorial_cnn": Net(
        "the classic tutorial's net: three 5x5 convs, a 512-unit layer", "TutorialCNN", False
    ),
    "compact_cnn": Net("the tutorial's cost with batch norm: four 3x3 convs", "CompactCNN"),
    "five_conv_cnn": Net("compact_cnn one conv deeper, narrower in the middle", "five_conv_cnn"),
    "bn_cnn": Net("four VGG-style blocks with batch norm and dropout", "BatchNormCNN"),
    "residual_cnn": Net("compact_cnn behind a stride-2 stem, two residual blocks", "residual_cnn"),
    "lean_residual_cnn": Net("residual_cnn without its last residual block", "lean_residual_cnn"),
    "stem16_residual_cnn": Net(
        "lean_residual_cnn with a 16-channel stem (AVX-512 friendly)", "stem16_residual_cnn"
    ),
    "resnet18": Net("torchvision's ResNet-18, untrained, small-input stem", "small_input_resnet18"),
    **{name: _pretrained(backbone) for name, backbone in BACKBONES.items()},
}
MODEL_NAMES = tuple(NETS)  # the train step's choices: from scratch first, then pretrained
