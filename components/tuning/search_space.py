"""The hyperparameter search space, declared once: Katib's Experiment and Optuna read it.

Beside the presets because it searches around them: each dimension is a training recipe
field (``TrainConfig``), and a trial is a preset's recipe with the dimensions' values over
it. Chosen, and why:

- ``lr`` (log-uniform 1e-3 to 1e-2): the one-cycle peak; the GPU search of
  docs/BENCHMARKS.md moved accuracy most through it and weight decay.
- ``weight_decay`` (log-uniform 1e-4 to 0.1): 5e-4 against 0.05 split the CPU preset's
  candidates there.
- ``label_smoothing`` (0 to 0.2) and ``min_crop_area`` (0.25 to 1, 1 = shifted crops
  only): the augmentation's and the targets' strength, which decide how much the small
  nets over- or under-fit in a fixed number of epochs.
- ``batch_size`` (64, 128, 256): steps per epoch against each step's noise.

A pretrained net (the catalogue's, ``BACKBONES``) searches its own ranges (``PRETRAINED_SPACE``):
a peak learning rate of 1e-4 to 3e-3, since a rate that trains a net from scratch wipes out
what its weights learned, and the batch sizes a CPU fits at 192 pixels.

Not searched: the model's width. The nets have fixed widths by name (``--model``), and
the image size and channels are the preprocess step's, shared by every trial of one
search (one set of arrays); both are set with ``name=value`` as fixed values.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.networks.backbones import BACKBONES

DOUBLE, INT, CATEGORICAL = "double", "int", "categorical"  # Katib's parameterType values


@dataclass(frozen=True)
class Dimension:
    """One searched recipe field: a range (``low`` to ``high``, maybe log-scaled) or choices."""

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[int | float | str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind == CATEGORICAL:
            if not self.choices or self.low is not None or self.high is not None:
                raise ValueError(f"expected choices and no range for {self.name}")
        elif self.kind in (DOUBLE, INT):
            if self.low is None or self.high is None or not self.low < self.high:
                raise ValueError(f"expected low < high for {self.name}, found {self}")
            if self.log and self.low <= 0:
                raise ValueError(f"expected a log range above 0 for {self.name}")
        else:
            raise ValueError(f"expected a kind of {DOUBLE}, {INT} or {CATEGORICAL}")


# searched alike for every net: the regularisation and the augmentation's strength
SHARED: tuple[Dimension, ...] = (
    Dimension("weight_decay", DOUBLE, 1e-4, 0.1, log=True),
    Dimension("label_smoothing", DOUBLE, 0.0, 0.2),
    Dimension("min_crop_area", DOUBLE, 0.25, 1.0),
)
SEARCH_SPACE: tuple[Dimension, ...] = (
    Dimension("lr", DOUBLE, 1e-3, 1e-2, log=True),
    *SHARED,
    Dimension("batch_size", CATEGORICAL, choices=(64, 128, 256)),
)
PRETRAINED_SPACE: tuple[Dimension, ...] = (
    Dimension("lr", DOUBLE, 1e-4, 3e-3, log=True),
    *SHARED,
    Dimension("batch_size", CATEGORICAL, choices=(32, 64, 128)),
)


def search_space(model: str) -> tuple[Dimension, ...]:
    """The dimensions searched around a recipe of net ``model``."""
    return PRETRAINED_SPACE if model in BACKBONES else SEARCH_SPACE


def searched(fixed: dict[str, object], model: str) -> tuple[Dimension, ...]:
    """The dimensions of ``model``'s space still searched when the user fixed ``fixed``'s
    names to one value."""
    return tuple(dimension for dimension in search_space(model) if dimension.name not in fixed)
