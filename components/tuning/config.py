"""The search's one schema: algorithm, trial counts and the median early-stopping rule.

The same settings drive Katib's Experiment on a cluster and Optuna's study on this
machine, so a search tried here is the search the cluster runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from components.core.schema import PER_RUN, setting
from components.training.config import TrainConfig

# Katib's algorithm names that Optuna has too (Katib: Hyperopt, Optuna; here: Optuna):
# TPE learns from earlier trials, random does not
ALGORITHMS = ("tpe", "multivariate-tpe", "random")


@dataclass(frozen=True)
class TuneConfig:
    """How many trials, chosen how, and when a trial is stopped early."""

    algorithm: str = setting(
        "tpe",
        "search algorithm (Katib's names); tpe learns from earlier trials",
        role=PER_RUN,
        choices=ALGORITHMS,
    )
    trials: int = setting(12, "trials in all (Katib's maxTrialCount)", role=PER_RUN)
    parallel_trials: int = setting(3, "trials at once on the cluster", role=PER_RUN)
    max_failed_trials: int = setting(3, "failed trials that end the search", role=PER_RUN)
    min_trials_required: int = setting(
        3, "median rule: finished trials needed before any trial is stopped", role=PER_RUN
    )
    start_step: int = setting(
        3, "median rule: epochs a trial reports before it may be stopped", role=PER_RUN
    )
    search_seed: int = setting(0, "seed of the search algorithm", role=PER_RUN)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(
                f"unknown algorithm {self.algorithm!r}; expected one of: {', '.join(ALGORITHMS)}"
            )
        if not 1 <= self.trials < 2**31:
            raise ValueError(  # Katib keeps maxTrialCount as an int32
                f"expected trials from 1 to 2**31 - 1, found {self.trials}"
            )
        if not 1 <= self.parallel_trials <= self.trials:
            raise ValueError(
                f"expected 1 <= parallel trials <= trials, found {self.parallel_trials} "
                f"parallel of {self.trials}"
            )
        if not 0 <= self.max_failed_trials <= self.trials:
            raise ValueError(
                f"expected 0 <= max failed trials <= trials, found {self.max_failed_trials} "
                f"of {self.trials}"
            )
        if self.min_trials_required < 1 or self.start_step < 1:
            raise ValueError(
                "expected min trials required >= 1 and start step >= 1, found "
                f"{self.min_trials_required} and {self.start_step}"
            )
        if not 0 <= self.search_seed < 2**31:
            raise ValueError(
                f"expected a search seed from 0 to 2**31 - 1, found {self.search_seed}"
            )


def check_search(tune: TuneConfig, epochs: int) -> None:
    """Refuse a median rule that could stop no trial: the one check every path to a
    search takes (``tune --output``, ``tune --local``, ``submit --tune``).

    Raises:
        ValueError: ``min_trials_required`` not below ``trials`` (of two or more), or
            ``start_step`` over the recipe's ``epochs``.
    """
    if tune.trials > 1 and tune.min_trials_required >= tune.trials:
        raise ValueError(
            f"expected min_trials_required (--min-trials-required) below trials "
            f"({tune.trials}), found {tune.min_trials_required}: the median rule would wait "
            "for that many finished trials, and none could stop early"
        )
    if tune.start_step > epochs:
        raise ValueError(
            f"expected start_step (--start-step) at most epochs ({epochs}), found "
            f"{tune.start_step}: the median rule would never look at a trial, and none "
            "could stop early"
        )


def trial_recipe(recipe: TrainConfig, tune: TuneConfig) -> TrainConfig:
    """``recipe`` as a trial trains it: scored on val at least twice ``start_step`` times
    over its epochs, so that the median rule, which counts scores, can stop it early (the
    recipe's own cadence where it scores that often already)."""
    often = max(1, recipe.epochs // (2 * tune.start_step))
    return replace(recipe, validate_every=min(recipe.validate_every, often))
