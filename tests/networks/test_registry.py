"""The registry of nets: one entry a net, its builder found when a net is built, the
pretrained ones made from the catalogue with what their source trained them with."""

from __future__ import annotations

import subprocess
import sys

import pytest
from torch import nn

from components.networks import models
from components.networks.backbones import BACKBONES
from components.networks.registry import MODEL_NAMES, NETS


def test_every_net_has_a_one_line_summary_and_a_builder_of_its_own_module():
    assert MODEL_NAMES == tuple(NETS) and len(set(n.summary for n in NETS.values())) == len(NETS)
    for name, net in NETS.items():
        assert net.summary and "\n" not in net.summary and len(net.summary) <= 100, name
        assert callable(getattr(models, net.builder)), name


def test_the_pretrained_nets_are_the_catalogues_and_only_they_skip_no_crops():
    assert [name for name, net in NETS.items() if net.pretrained] == list(BACKBONES)
    for name, backbone in BACKBONES.items():
        assert NETS[name].backbone is backbone
        assert backbone.title in NETS[name].summary and f"{backbone.input_size} px" in (
            NETS[name].summary
        )
    assert [name for name, net in NETS.items() if not net.random_crops] == ["tutorial_cnn"]


@pytest.mark.parametrize("name", list(BACKBONES))
def test_a_pretrained_net_is_built_with_its_sources_dropout(name):
    net = models.build_model(name, 3, 64)
    (dropout,) = [module for module in net.modules() if isinstance(module, nn.Dropout)]
    assert dropout.p == BACKBONES[name].dropout


def test_reading_the_registry_loads_no_torch():
    probe = (
        "import sys; from components.networks.registry import NETS; "
        "from components.training.config import TrainConfig; "
        "print('torch' in sys.modules, len(NETS))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", str(len(NETS))]
