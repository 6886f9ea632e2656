"""Katib's webhook rules: the project's Experiment passes, each broken variant is refused."""

import copy

import pytest

from components.training.config import TrainConfig
from components.tuning import webhook
from components.tuning.config import TuneConfig
from components.tuning.experiment import ExperimentTarget, build_experiment, to_manifest
from components.tuning.search_space import SEARCH_SPACE

TARGET = ExperimentTarget(name="dogs-vs-cats-tune", image="img", tracking_uri="http://m:5000")


@pytest.fixture(scope="module")
def manifest() -> dict:
    recipe = TrainConfig(data="-", output="-")
    return to_manifest(build_experiment(TuneConfig(), TARGET, recipe, SEARCH_SPACE))


def broken(manifest: dict, change) -> dict:
    copied = copy.deepcopy(manifest)
    change(copied["spec"])
    return copied


def _container(spec: dict) -> dict:
    return spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]


BREAKS = {
    "more parallel than trials": (
        lambda s: s.update(parallelTrialCount=20), "spec.parallelTrialCount"),
    "an algorithm Katib has no config for": (
        lambda s: s["algorithm"].update(algorithmName="optuna-tpe"),
        "spec.algorithm.algorithmName"),
    "the objective among the additional metrics": (
        lambda s: s["objective"]["additionalMetricNames"].append("val_accuracy"),
        "spec.objective.additionalMetricNames"),
    "a trial parameter the template never uses": (
        lambda s: s["trialTemplate"]["trialParameters"].append(
            {"name": "unused", "reference": "lr"}),
        "spec.trialTemplate.trialParameters"),
    "a placeholder with no trial parameter": (
        lambda s: _container(s)["args"].append("--seed=${trialParameters.seed}"),
        "not in spec.trialTemplate.trialParameters"),
    "a field a Job does not have": (
        lambda s: _container(s).update(gpus=1), "does not convert to a batch/v1 Job at"),
    "a name in the trial template": (
        lambda s: s["trialTemplate"]["trialSpec"].update(metadata={"name": "x"}),
        "metadata.name and metadata.namespace must be omitted"),
    "a range for a categorical parameter": (
        lambda s: s["parameters"][4]["feasibleSpace"].update(min="64"), "spec.parameters[4]"),
    "a list for a double parameter": (
        lambda s: s["parameters"][0]["feasibleSpace"].update(list=["0.1"]), "spec.parameters[0]"),
    "an unknown distribution": (
        lambda s: s["parameters"][0]["feasibleSpace"].update(distribution="loguniform"),
        "distribution"),
    "a filter without two groups": (
        lambda s: s["metricsCollectorSpec"].update(
            source={"filter": {"metricsFormat": ["(\\w+)=.*"]}}),
        "two top subexpressions"),
    "a collector Katib does not know": (
        lambda s: s["metricsCollectorSpec"]["collector"].update(kind="Stdout"),
        "spec.metricsCollectorSpec.collector.kind"),
    "no success condition": (
        lambda s: s["trialTemplate"].pop("successCondition"),
        "successCondition and failureCondition"),
}  # fmt: skip


@pytest.mark.parametrize("why", list(BREAKS))
def test_what_katibs_webhook_refuses_is_refused(manifest, why):
    change, expected = BREAKS[why]
    errors = webhook.validate(broken(manifest, change))
    assert any(expected in error for error in errors), errors


def test_to_manifest_refuses_what_the_webhook_would(monkeypatch):
    monkeypatch.setattr(webhook, "SUGGESTIONS", ("random",))  # a cluster without TPE
    recipe = TrainConfig(data="-", output="-")
    with pytest.raises(ValueError, match="Katib's webhook would refuse the Experiment"):
        to_manifest(build_experiment(TuneConfig(), TARGET, recipe, SEARCH_SPACE))
