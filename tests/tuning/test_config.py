"""The search's settings: what Katib would refuse is refused before anything is written."""

import pytest

from components.tuning.config import TuneConfig


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"parallel_trials": 5, "trials": 4}, "parallel trials <= trials"),
        ({"algorithm": "hyperband"}, "unknown algorithm"),
        ({"start_step": 0}, "start step >= 1"),
    ],
)
def test_a_search_that_cannot_run_is_refused_before_anything_is_written(settings, expected):
    with pytest.raises(ValueError, match=expected):
        TuneConfig(**settings)


@pytest.mark.parametrize(
    ("epochs", "validate_every", "start_step", "cadence"),
    [
        (30, 30, 3, 5),  # the cpu preset: one score would leave the median rule nothing
        (30, 1, 3, 1),  # a recipe that scores every epoch keeps its cadence
        (3, 3, 1, 1),  # the pretrained preset's three epochs: scored each
        (10, 5, 3, 1),
    ],
)
def test_a_trial_scores_val_often_enough_for_the_median_rule_to_stop_it(
    epochs, validate_every, start_step, cadence
):
    from components.training.config import TrainConfig
    from components.tuning.config import trial_recipe

    recipe = TrainConfig(data="d", output="o", epochs=epochs, validate_every=validate_every)
    trial = trial_recipe(recipe, TuneConfig(start_step=start_step))
    assert trial.validate_every == cadence
    scores = sum(1 for epoch in range(1, epochs + 1) if epoch % cadence == 0 or epoch == epochs)
    assert scores > start_step or epochs <= start_step  # the rule can stop a trial early
