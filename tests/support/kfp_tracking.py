"""A stand-in for Kubeflow Pipelines 2.17's own MLflow tracking, around kfp.local.

No KFP backend runs here, so this plays its three parts as kubeflow/pipelines
``proposals/12862-mlflow-integration`` and the code under ``backend/src/**/plugins/mlflow``
have them, over MLflow's REST API with the ``X-MLFLOW-WORKSPACE`` header, as KFP's Go
client calls it:

- the API server (``CreateRun``): creates the experiment named at run creation
  (``plugins_input.mlflow.experiment_name``, else ``Default``) and a parent run tagged
  ``kfp.pipeline_run_id``, ``kfp.pipeline_run_url`` and ``mlflow.kfp.idempotencyKey``;
  at the end (``ReportWorkflowResource``) marks it and closes any nested run left open;
- the driver: a nested run per task (``mlflow.parentRunId``, named after the task), a
  ParallelFor's iterations nested under one run for the loop; it sets
  ``MLFLOW_TRACKING_URI``, ``MLFLOW_WORKSPACE``, ``MLFLOW_EXPERIMENT_ID`` and
  ``MLFLOW_RUN_ID`` on the task's container;
- the launcher: after the task, one ``log-batch`` of its input parameters (each value
  JSON-encoded, as Go's ``json.Marshal`` writes it) and scalar output metrics, then
  the run marked FINISHED or FAILED; its errors are logged, never fatal;
- a retried task (``RetryRun``): its failed nested run is reopened (RUNNING) and
  reused, as the driver matches it by task name.

Each task runs with its own command from the compiled pipeline, under kfp.local's
SubprocessRunner, with that environment added to its container's.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import requests
from kfp.dsl import Metrics
from kfp.local import status, task_dispatcher

API = "/api/2.0/mlflow"
LOOP_ITERATION = re.compile(r"^(?P<loop>.+)-iteration-\d+$")


@dataclass
class KfpMlflow:
    """One pipeline run tracked as KFP >= 2.17 tracks it, in ``workspace`` (None: the
    server has no workspaces)."""

    tracking_uri: str
    workspace: str | None
    experiment_name: str = "Default"
    kfp_run_id: str = "kfp-run-1"
    # a hook per task name, run in place of a task's first attempt: (run the task) -> outcome
    first_attempt: dict[str, Callable[[Callable[[], Any]], Any]] = field(default_factory=dict)
    experiment_id: str = ""
    parent_run_id: str = ""
    task_runs: dict[str, str] = field(default_factory=dict)  # (loop/)task -> nested run
    launcher_errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, method: str, path: str, body: dict) -> dict:
        headers = {"X-MLFLOW-WORKSPACE": self.workspace} if self.workspace else {}
        url = f"{self.tracking_uri}{API}/{path}"
        if method == "GET":
            answer = requests.get(url, params=body, headers=headers, timeout=30)
        else:
            answer = requests.post(url, json=body, headers=headers, timeout=30)
        if not answer.ok:
            raise RuntimeError(f"MLflow answered {path} with {answer.status_code}: {answer.text}")
        return answer.json()

    # the API server
    def create_run(self) -> None:
        found = requests.get(
            f"{self.tracking_uri}{API}/experiments/get-by-name",
            params={"experiment_name": self.experiment_name},
            headers={"X-MLFLOW-WORKSPACE": self.workspace} if self.workspace else {},
            timeout=30,
        )
        if found.ok:
            self.experiment_id = found.json()["experiment"]["experiment_id"]
        else:
            created = self.call("POST", "experiments/create", {"name": self.experiment_name})
            self.experiment_id = created["experiment_id"]
            self.call(
                "POST",
                "experiments/set-experiment-tag",
                {
                    "experiment_id": self.experiment_id,
                    "key": "mlflow.note.content",
                    "value": "Created by Kubeflow Pipelines",
                },
            )
        tags = {
            "kfp.pipeline_run_id": self.kfp_run_id,
            "kfp.pipeline_run_url": f"http://kfp.example/#/runs/details/{self.kfp_run_id}",
            "mlflow.kfp.idempotencyKey": self.kfp_run_id,
        }
        self.parent_run_id = self._new_run(f"pipeline run {self.kfp_run_id}", tags)

    def end_run(self, succeeded: bool) -> None:
        state = "FINISHED" if succeeded else "FAILED"
        self._update(self.parent_run_id, state)
        for run in self.nested_runs():
            if run["info"]["status"] == "RUNNING":
                self._update(run["info"]["run_id"], state)

    def nested_runs(self) -> list[dict]:
        """Every run under the parent, at any depth."""
        found, parents = [], [self.parent_run_id]
        while parents:
            parent = parents.pop()
            children = self.call(
                "POST",
                "runs/search",
                {
                    "experiment_ids": [self.experiment_id],
                    "filter": f"tags.`mlflow.parentRunId` = '{parent}'",
                    "max_results": 1000,
                },
            ).get("runs", [])
            found += children
            parents += [child["info"]["run_id"] for child in children]
        return found

    # the driver
    def start_task(self, task: str, iteration: str | None, retried: bool) -> dict[str, str]:
        """A nested run for the task (in a ParallelFor, under the loop's run), or on a
        retry its own, reopened; the variables the task's container gets."""
        key = f"{iteration}/{task}" if iteration else task
        loop = LOOP_ITERATION.match(iteration).group("loop") if iteration else None
        with self._lock:
            if retried:
                self.call(
                    "POST", "runs/update", {"run_id": self.task_runs[key], "status": "RUNNING"}
                )
            else:
                parent = self._loop_run(loop) if loop else self.parent_run_id
                self.task_runs[key] = self._new_run(task, {"mlflow.parentRunId": parent})
        env = {
            "MLFLOW_TRACKING_URI": self.tracking_uri,
            "MLFLOW_EXPERIMENT_ID": self.experiment_id,
            "MLFLOW_RUN_ID": self.task_runs[key],
        }
        return env | ({"MLFLOW_WORKSPACE": self.workspace} if self.workspace else {})

    def _loop_run(self, loop: str) -> str:
        if loop not in self.task_runs:
            self.task_runs[loop] = self._new_run(loop, {"mlflow.parentRunId": self.parent_run_id})
        return self.task_runs[loop]

    # the launcher
    def end_task(self, run_id: str, succeeded: bool, parameters: dict, metrics: dict) -> None:
        batch = {
            "run_id": run_id,
            "params": [{"key": k, "value": go_json(v)} for k, v in parameters.items()],
            "metrics": [
                {"key": k, "value": v, "timestamp": int(time.time() * 1000), "step": 0}
                for k, v in metrics.items()
            ],
        }
        try:
            self.call("POST", "runs/log-batch", batch)
        except RuntimeError as err:  # KFP logs it and goes on
            self.launcher_errors.append(str(err))
        self._update(run_id, "FINISHED" if succeeded else "FAILED")

    def _new_run(self, name: str, tags: dict[str, str]) -> str:
        body = {
            "experiment_id": self.experiment_id,
            "run_name": name,
            "start_time": int(time.time() * 1000),
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        }
        return self.call("POST", "runs/create", body)["run"]["info"]["run_id"]

    def _update(self, run_id: str, state: str) -> None:
        body = {"run_id": run_id, "status": state, "end_time": int(time.time() * 1000)}
        self.call("POST", "runs/update", body)

    @contextlib.contextmanager
    def tracking_tasks(self) -> Iterator[KfpMlflow]:
        """kfp.local's tasks run as KFP's driver and launcher see them, for the block."""
        original = task_dispatcher.run_single_task_implementation

        def run_task(**kwargs) -> tuple[dict, status.Status]:
            task = kwargs["component_name"].removeprefix("comp-")
            parts = kwargs["pipeline_resource_name"].split("/")
            iteration = next((part for part in parts if LOOP_ITERATION.match(part)), None)

            def attempt(retried: bool) -> tuple[dict, status.Status]:
                env = self.start_task(task, iteration, retried)
                spec = type(kwargs["executor_spec"])()
                spec.CopyFrom(kwargs["executor_spec"])
                for name, value in env.items():
                    spec.container.env.add(name=name, value=value)
                outputs, outcome = original(**{**kwargs, "executor_spec": spec})
                succeeded = outcome == status.Status.SUCCESS
                self.end_task(
                    env["MLFLOW_RUN_ID"],
                    succeeded,
                    scalars(kwargs["arguments"]),
                    metrics_of(outputs),
                )
                return outputs, outcome

            hook = self.first_attempt.pop(task, None)
            if hook is None:
                return attempt(retried=False)
            outputs, outcome = hook(lambda: attempt(retried=False))
            if outcome == status.Status.SUCCESS:
                return outputs, outcome
            return attempt(retried=True)  # RetryRun: the same nested run, reopened

        task_dispatcher.run_single_task_implementation = run_task
        try:
            yield self
        finally:
            task_dispatcher.run_single_task_implementation = original


def scalars(arguments: dict) -> dict:
    """A task's input parameters, as the launcher reads them (artifacts are no parameters)."""
    return {k: v for k, v in arguments.items() if isinstance(v, str | int | float | bool | list)}


def metrics_of(outputs: dict) -> dict[str, float]:
    """The scalar metrics of a task's ``Output[Metrics]`` artifacts."""
    found: dict[str, float] = {}
    for value in outputs.values():
        if isinstance(value, Metrics):
            found.update(
                {
                    k: float(v)
                    for k, v in value.metadata.items()
                    if k != "display_name" and isinstance(v, int | float)
                }
            )
    return found


def go_json(value: Any) -> str:
    """``json.Marshal`` of a protobuf Value as Go writes it: numbers are float64, and a
    whole one has no fraction (``10``, not ``10.0``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
