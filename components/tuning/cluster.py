"""A search on the cluster's Katib: stage the data, run the Experiment, record it in MLflow.

The pipeline's tune task runs this with the shared ReadWriteMany volume mounted: the
arrays go to ``NAME/arrays`` there, every trial writes ``NAME/trials/TRIAL``, and the
best trial's model comes back as the task's output for evaluate and the gate. The
Experiment of an earlier attempt of the same KFP run (its pod was lost) is waited for,
not created twice; the staged folder is removed however the search ends. The Experiment
itself is kept: Katib's UI shows it.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from components.cluster import kube
from components.cluster.object_names import is_dns_label
from components.core.errors import printable
from components.tracking import run_log
from components.tracking.tags import KATIB_SEARCH, KFP_RUN_ID_TAG, TRIAL_TAG
from components.training.config import TrainConfig
from components.tuning import runs
from components.tuning.config import TuneConfig
from components.tuning.experiment import ExperimentTarget, build_experiment, to_manifest
from components.tuning.search_space import Dimension

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeflow.org", "v1beta1", "experiments"


@dataclass(frozen=True)
class Outcome:
    """How Katib ended the Experiment: its optimal trial and each trial's end."""

    optimal_trial: str | None
    succeeded: tuple[str, ...]
    stopped_early: tuple[str, ...]


def tune_on_cluster(
    tune: TuneConfig,
    recipe: TrainConfig,
    target: ExperimentTarget,
    space: tuple[Dimension, ...],
    api_client: k8s.ApiClient,
    timeout_seconds: float = 7 * 24 * 3600,
    poll_seconds: float = 30,
) -> str:
    """Search ``space`` around ``recipe`` with Katib; the best trial's MLflow run id.

    ``recipe.data`` is the preprocess output, ``recipe.output`` where the best trial's
    model is copied to.

    Raises:
        RuntimeError: Katib refused or failed the Experiment (with its reason).
        TimeoutError: it did not finish within ``timeout_seconds``.
    """
    staging = Path(target.folder)
    try:
        shutil.copytree(recipe.data, staging / "arrays", dirs_exist_ok=True)
        parent = runs.open_space_search(
            recipe.experiment,
            KATIB_SEARCH,
            target.name,
            tune,
            space,
            tags={
                KFP_RUN_ID_TAG: recipe.kfp_run_id or "",
                "katib.experiment": target.name,
            },
        )
        target = replace(target, parent_run_id=parent)
        manifest = to_manifest(build_experiment(tune, target, recipe, space))
        outcome = run_experiment(manifest, api_client, timeout_seconds, poll_seconds)
        best = runs.close_search(parent, _trials(recipe.experiment, outcome))
        # Katib's choice, for the record: it may name a trial stopped early, which wrote no model
        run_log.set_run_tags(parent, {"katib.optimal_trial": str(outcome.optimal_trial)})
        if outcome.optimal_trial != best.name:
            log.warning(
                "Katib's optimal trial is %s; the best finished one %s",
                outcome.optimal_trial,
                best.name,
            )
        shutil.copytree(staging / "trials" / best.name, recipe.output, dirs_exist_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return best.run_id


def run_experiment(
    manifest: dict[str, Any], api_client: k8s.ApiClient, timeout_seconds: float, poll_seconds: float
) -> Outcome:
    """Create the Experiment (or find an earlier attempt's) and wait for its end."""
    objects = k8s.CustomObjectsApi(api_client)
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    if kube.get_or_none(objects, GROUP, VERSION, namespace, PLURAL, name) is None:
        try:
            objects.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, manifest, _request_timeout=kube.REQUEST_TIMEOUT
            )
        except ApiException as err:
            raise RuntimeError(
                f"Katib refused Experiment {name} in {namespace}: {err.status} {err.reason}: "
                f"{printable(str(err.body))}"
            ) from None
        log.info("created Katib Experiment %s in %s", name, namespace)
    else:
        log.info("Experiment %s of an earlier attempt is there: waiting for it", name)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        try:
            body = kube.get_or_none(objects, GROUP, VERSION, namespace, PLURAL, name)
        except (ApiException, HTTPError) as err:  # a days-long wait outlives API restarts
            if isinstance(err, ApiException) and err.status < 500:
                raise
            log.warning("could not read Experiment %s (%s); trying again", name, err)
            time.sleep(poll_seconds)
            continue
        if body is None:
            raise RuntimeError(f"Experiment {name} was deleted before it finished")
        outcome = _outcome(name, body.get("status") or {})
        if outcome:
            return outcome
        time.sleep(poll_seconds)
    raise TimeoutError(f"Experiment {name} did not finish within {timeout_seconds} s")


def _outcome(name: str, status: dict[str, Any]) -> Outcome | None:
    """The Experiment's end from its status, or None while it runs.

    Raises:
        RuntimeError: it failed (too many failed trials, a refused suggestion).
    """
    ended = {
        condition["type"]: condition
        for condition in status.get("conditions") or []
        if condition.get("status") == "True" and condition.get("type") in ("Succeeded", "Failed")
    }
    if "Failed" in ended:
        why = ended["Failed"]
        raise RuntimeError(
            f"Katib Experiment {name} failed: {why.get('reason')}: {why.get('message')}"
        )
    if "Succeeded" not in ended:
        return None
    return Outcome(
        optimal_trial=(status.get("currentOptimalTrial") or {}).get("bestTrialName"),
        succeeded=tuple(status.get("succeededTrialList") or ()),
        stopped_early=tuple(status.get("earlyStoppedTrialList") or ()),
    )


def _trials(experiment: str, outcome: Outcome) -> list[runs.Trial]:
    """Each ended trial and its MLflow run (the train step tagged it with the trial).

    Raises:
        RuntimeError: the API named a trial Katib could not have (not a DNS label): the
            name becomes a path under the staged folder and an MLflow search.
    """
    trials = []
    for name in (*outcome.succeeded, *outcome.stopped_early):
        if not is_dns_label(name):
            raise RuntimeError(
                f"expected Katib's trial names as DNS labels, found {printable(repr(name))}"
            )
        run_id = run_log.find_run_by_tags(experiment, {TRIAL_TAG: name})
        if run_id is None:
            log.warning("trial %s has no MLflow run (it ended before training started)", name)
            continue
        trials.append(runs.Trial(name, run_id, stopped_early=name in outcome.stopped_early))
    return trials
