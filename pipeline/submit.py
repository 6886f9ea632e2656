"""Starting a run on a cluster's Kubeflow Pipelines API, single-user or multi-user."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from pipeline.arguments import parse_arguments, refuse_credentials, sweep_arguments
from pipeline.pipeline import build_pipeline
from pipeline.spec import compile_pipeline
from pipeline.target import ClusterTarget

DEFAULT_EXPERIMENT = "dogs-vs-cats"
TOKEN_ENV = "KF_PIPELINES_TOKEN"
SERVICE_ACCOUNT = "dogs-vs-cats-pipeline"  # manifests/pipeline, overlays/profile
# what a refusal of the API most likely means, by HTTP status
HINTS = {
    401: f"no valid identity: give a token in ${TOKEN_ENV} (or --token)",
    403: "this identity may not use that namespace: is it your profile's, and are you "
    "one of its contributors?",
    404: "no such namespace or resource",
}


@dataclass(frozen=True)
class Destination:
    """Where and as whom a run starts."""

    host: str
    namespace: str | None = None  # a profile's namespace, in a multi-user Kubeflow
    token: str | None = None  # else the in-cluster service-account token, where there is one
    experiment: str = DEFAULT_EXPERIMENT
    run_name: str | None = None
    service_account: str = SERVICE_ACCOUNT  # "": the namespace's default runner


@dataclass(frozen=True)
class SubmittedRun:
    run_id: str
    url: str  # the run's page in the KFP UI


def submit(
    destination: Destination,
    pairs: list[str],
    target: ClusterTarget,
    sweep: bool,
    preset: str | None,
) -> SubmittedRun:
    """Check the arguments and the API, compile for ``target``, start a run."""
    import kfp

    parse = sweep_arguments if sweep else parse_arguments
    arguments = parse(pairs, build_pipeline(target, sweep), preset)
    refuse_credentials(arguments, ("source", "tracking_uri"))
    health = check_reachable(destination.host)
    if health.get("multi_user") and not destination.namespace:
        raise SystemExit(
            f"the Kubeflow Pipelines at {destination.host} is multi-user: give --namespace "
            "with your profile's namespace"
        )
    with tempfile.TemporaryDirectory() as scratch:
        package = compile_pipeline(Path(scratch) / "pipeline.yaml", target, sweep)
        with api_errors(destination):
            client = kfp.Client(
                host=destination.host,
                namespace=destination.namespace or "kubeflow",
                existing_token=destination.token or os.environ.get(TOKEN_ENV) or None,
            )
            run = client.create_run_from_pipeline_package(
                str(package),
                arguments=arguments,
                run_name=destination.run_name,
                experiment_id=experiment_id(client, destination),
                namespace=destination.namespace,
                service_account=destination.service_account or None,
            )
    return SubmittedRun(run.run_id, f"{destination.host.rstrip('/')}/#/runs/details/{run.run_id}")


def experiment_id(client, destination: Destination) -> str:
    """The named experiment's id; the default experiment is created on first use, another
    that does not exist is refused (a typo would otherwise start a stray experiment)."""
    name, namespace = destination.experiment, destination.namespace
    try:
        return client.get_experiment(experiment_name=name, namespace=namespace).experiment_id
    except ValueError:  # kfp: "No experiment is found with name ..."
        if name != DEFAULT_EXPERIMENT:
            where = f" in namespace {namespace}" if namespace else ""
            raise SystemExit(
                f"no experiment named {name!r}{where}: create it in the KFP UI, or leave "
                f"--experiment out to use {DEFAULT_EXPERIMENT!r}"
            ) from None
    return client.create_experiment(name, namespace=namespace).experiment_id


@contextlib.contextmanager
def api_errors(destination: Destination) -> Iterator[None]:
    """An HTTP refusal of the KFP API as one line: status, what it said, what to try."""
    from kfp_server_api.exceptions import ApiException

    try:
        yield
    except ApiException as err:
        where = f" (namespace {destination.namespace})" if destination.namespace else ""
        said = " ".join(str(err.body or "").split())[:200]
        hint = HINTS.get(err.status, "")
        raise SystemExit(
            f"the Kubeflow Pipelines API at {destination.host}{where} refused the request: "
            f"{err.status} {err.reason}: {said}" + (f"; {hint}" if hint else "")
        ) from None


def check_reachable(host: str, timeout: float = 10.0) -> dict:
    """The API's health answer; one line that says what was tried when it does not answer."""
    url = f"{host.rstrip('/')}/apis/v2beta1/healthz"
    try:
        answer = requests.get(url, timeout=timeout)
    except requests.RequestException as err:
        raise SystemExit(
            f"cannot reach the Kubeflow Pipelines API at {host} ({type(err).__name__} on "
            f"{url}); check --host, e.g. after `kubectl -n kubeflow port-forward "
            "svc/ml-pipeline-ui 8080:80` use --host http://localhost:8080"
        ) from None
    try:
        health = answer.json()
    except ValueError:
        return {}  # behind a login page, say: the API's own calls will say more
    return health if isinstance(health, dict) else {}
