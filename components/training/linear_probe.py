"""A linear probe before fine-tuning: the classifier fitted alone on the pretrained net's
pooled features, so that fine-tuning starts from a head that already tells the classes
apart and its first steps do not bend the backbone's features to fit a random one
(linear probing, then fine-tuning: Kumar et al., 2022, "Fine-Tuning can Distort
Pretrained Features and Underperform Out-of-Distribution").
"""

from __future__ import annotations

import logging
from typing import cast

import torch
from torch.nn import functional as F

from components.networks.efficientnet_lite import EfficientNetLite
from components.networks.models import Classifier
from components.training.batches import DeviceSplit
from components.training.inference import autocast, default_batch_size

log = logging.getLogger(__name__)

# the L2 penalty on the classifier's weights, per photo of the mean loss: about
# scikit-learn's LogisticRegression at C 0.1 to 0.25 on a few thousand photos, where
# Lite2's probes scored best on val (docs/BENCHMARKS.md)
WEIGHT_PENALTY = 1e-3
MOST_ITERATIONS = 200  # L-BFGS converges in well under this on 1,280 features


@torch.no_grad()
def pooled_features(model: Classifier, photos: DeviceSplit) -> tuple[torch.Tensor, torch.Tensor]:
    """The classifier's input (N×features, float32) and its labels: of every photo where
    ``photos`` holds pixels (N×C×S×S); where it holds the frozen layers' cached output of
    each photo's views (N×V×C×H×W), of every view, each a sample of its own (a photo and
    its mirror image: twice the photos). The net in eval mode, under bf16 autocast where
    the device has it natively."""
    net = model.net
    if not isinstance(net, EfficientNetLite):
        raise ValueError(f"expected a pretrained net to probe, found {type(net).__name__}")
    device = photos.labels.device
    cached = len(photos.image_shape) == 4  # views × C × H × W
    was_training = model.training
    model.eval()
    features, labels = [], []
    for batch, batch_labels in photos.batches(default_batch_size(device)):
        with autocast(device, on_cpu=True):
            if cached:
                views = batch.shape[1]
                pooled = net.pooled_from_frozen(batch.flatten(0, 1))
                batch_labels = batch_labels.repeat_interleave(views)
            else:
                pooled = net.pooled(model.normalised(batch))
        features.append(pooled.float())
        labels.append(batch_labels)
    model.train(was_training)
    return torch.cat(features), torch.cat(labels)


def fit_classifier(model: Classifier, photos: DeviceSplit) -> dict[str, torch.Tensor]:
    """The multinomial logistic regression of ``model``'s pooled features of ``photos``
    (``pooled_features``: of their pixels, or of their cached frozen output) by L-BFGS,
    with an L2 penalty of ``WEIGHT_PENALTY``, fitted on their device and returned on the
    CPU as the classifier's weight and bias."""
    features, labels = pooled_features(model, photos)
    classes = cast(EfficientNetLite, model.net).classifier.out_features
    weight = torch.zeros(classes, features.shape[1], device=features.device, requires_grad=True)
    bias = torch.zeros(classes, device=features.device, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias], max_iter=MOST_ITERATIONS, line_search_fn="strong_wolfe"
    )

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        value = F.cross_entropy(features @ weight.T + bias, labels)
        value = value + WEIGHT_PENALTY / 2 * weight.square().sum()
        value.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        return value

    with torch.enable_grad():
        optimizer.step(loss)  # type: ignore[no-untyped-call]
    with torch.no_grad():
        accuracy = ((features @ weight.T + bias).argmax(1) == labels).float().mean().item()
    log.info(
        "linear probe: the classifier fitted on %d train photos' pooled features "
        "(%d samples), accuracy %.4f on them",
        len(photos),
        len(labels),
        accuracy,
    )
    return {"weight": weight.detach().cpu(), "bias": bias.detach().cpu()}


def set_classifier(model: Classifier, head: dict[str, torch.Tensor]) -> None:
    """Load ``fit_classifier``'s weight and bias into ``model``'s classifier."""
    net = model.net
    if not isinstance(net, EfficientNetLite):
        raise ValueError(f"expected a pretrained net, found {type(net).__name__}")
    net.classifier.load_state_dict(head)
