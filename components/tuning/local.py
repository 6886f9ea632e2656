"""The cluster's search on this machine: Optuna's sampler and median pruner, trials in turn.

The same search space (``SEARCH_SPACE``), the same algorithm family (Optuna's TPE or
random sampler for Katib's ``tpe``, ``multivariate-tpe`` and ``random``) and the same
early-stopping rule: Optuna's ``MedianPruner`` stops a trial whose best validation
accuracy so far, from epoch ``start_step`` on, is below the median of the finished
trials' at the same epoch, once ``min_trials_required`` trials have finished. (Katib's
``medianstop`` compares with the median of the finished trials' mean over their first
``start_step`` epochs: the same rule, measured slightly differently.) Each trial is the
train step's own MLflow run, nested under the search's parent run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from components.tracking import run_log
from components.tracking.tags import OPTUNA_SEARCH, TRIAL_TAG
from components.training.config import TrainConfig
from components.training.loop import DivergedError
from components.training.session import train
from components.tuning import runs
from components.tuning.config import TuneConfig, trial_recipe
from components.tuning.report import OBJECTIVE
from components.tuning.search_space import CATEGORICAL, DOUBLE, Dimension

log = logging.getLogger(__name__)


def search(
    tune: TuneConfig,
    recipe: TrainConfig,
    space: tuple[Dimension, ...],
    name: str,
    first: tuple[dict[str, Any], ...] = (),
) -> tuple[runs.Best, list[runs.Trial]]:
    """Run ``tune.trials`` trials of ``recipe`` over ``space``, one after another; the best
    trial, and every trial that finished or was stopped early.

    ``first``: values to try before the sampler's own (Optuna's ``enqueue_trial``), e.g.
    a preset's. Trials write under ``recipe.output``/``NAME-N``.

    Raises:
        RuntimeError: more than ``tune.max_failed_trials`` trials failed.
        ValueError: no trial finished.
    """
    if not space:
        raise ValueError("expected at least one searched dimension, found every one fixed")
    recipe = trial_recipe(recipe, tune)
    parent = runs.open_space_search(recipe.experiment, OPTUNA_SEARCH, name, tune, space, tags={})
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # each trial is logged here
    study = optuna.create_study(
        study_name=name,
        direction="maximize",
        sampler=sampler(tune),
        pruner=optuna.pruners.MedianPruner(
            n_startup_trials=tune.min_trials_required, n_warmup_steps=tune.start_step
        ),
    )
    for enqueued in first:
        study.enqueue_trial(enqueued)
    trials: list[runs.Trial] = []
    failed = 0
    for _ in range(tune.trials):
        trial = study.ask()
        trial_name = f"{name}-{trial.number}"
        values: dict[str, Any] = {dimension.name: suggest(trial, dimension) for dimension in space}
        cfg = replace(
            recipe,
            **values,
            output=str(Path(recipe.output) / trial_name),
            trial=trial_name,
            parent_run_id=parent,
        )
        shown = " ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                         for key, value in values.items())  # fmt: skip
        log.info("trial %s started: %s", trial_name, shown)
        try:
            result = train(cfg, on_epoch=_pruner_of(trial))
        except optuna.TrialPruned as stopped:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            trials.append(runs.Trial(trial_name, _run_of(cfg), stopped_early=True))
            log.info("trial %s stopped early: %s", trial_name, stopped)
            continue
        except DivergedError as err:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            failed += 1
            log.warning("trial %s failed: %s", trial_name, err)
            if failed > tune.max_failed_trials:
                raise RuntimeError(
                    f"{failed} trials failed, more than max_failed_trials="
                    f"{tune.max_failed_trials}; the last: {err}"
                ) from err
            continue
        study.tell(trial, result.history[-1][OBJECTIVE])
        trials.append(runs.Trial(trial_name, str(result.run_id), stopped_early=False))
        log.info("trial %s ended: %s %.4f", trial_name, OBJECTIVE, result.history[-1][OBJECTIVE])
    return runs.close_search(parent, trials), trials


def sampler(tune: TuneConfig) -> optuna.samplers.BaseSampler:
    """Optuna's sampler for Katib's algorithm name, seeded."""
    if tune.algorithm == "random":
        return optuna.samplers.RandomSampler(seed=tune.search_seed)
    return optuna.samplers.TPESampler(
        seed=tune.search_seed, multivariate=tune.algorithm == "multivariate-tpe"
    )


def suggest(trial: optuna.Trial, dimension: Dimension) -> object:
    """The trial's value for ``dimension``, from its range or choices."""
    if dimension.kind == CATEGORICAL:
        return trial.suggest_categorical(dimension.name, list(dimension.choices))
    assert dimension.low is not None and dimension.high is not None
    if dimension.kind == DOUBLE:
        return trial.suggest_float(dimension.name, dimension.low, dimension.high, log=dimension.log)
    return trial.suggest_int(
        dimension.name, int(dimension.low), int(dimension.high), log=dimension.log
    )


def _pruner_of(trial: optuna.Trial) -> Callable[[int, dict[str, float]], None]:
    """Report each validated epoch's accuracy; stop the trial when the pruner says so."""

    def report(epoch: int, metrics: dict[str, float]) -> None:
        if OBJECTIVE not in metrics:  # an epoch between validations (``validate_every``)
            return
        trial.report(metrics[OBJECTIVE], epoch)
        if trial.should_prune():
            raise optuna.TrialPruned(
                f"{OBJECTIVE} {metrics[OBJECTIVE]:.4f} at epoch {epoch} is below the median "
                "of the finished trials'"
            )

    return report


def _run_of(cfg: TrainConfig) -> str:
    """The MLflow run of a trial that stopped before writing its output."""
    run_id = run_log.find_run_by_tags(cfg.experiment, {TRIAL_TAG: str(cfg.trial)})
    if run_id is None:
        raise LookupError(f"expected the MLflow run of trial {cfg.trial}, found none")
    return run_id
