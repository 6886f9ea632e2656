"""Starting a run on a cluster's Kubeflow Pipelines API, single-user or multi-user."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from components.cluster.object_names import is_dns_label, is_dns_subdomain
from components.core.errors import printable
from components.core.uris import is_http_url, redact, split_credentials
from components.recipes.recipe import Recipe
from components.training.config import TrainConfig
from pipeline.arguments import parse_arguments, refuse_credentials, sweep_arguments
from pipeline.parameters import parameters_of
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


HEALTH_SECONDS = (5.0, 30.0)  # connect, read
HEALTH_KEYS = {"multi_user", "commit_sha", "tag_name"}


@dataclass(frozen=True)
class Destination:
    """Where and as whom a run starts; what the API would refuse is refused on creation."""

    host: str
    namespace: str | None = None  # a profile's namespace, in a multi-user Kubeflow
    token: str | None = None  # else the in-cluster service-account token, where there is one
    experiment: str = DEFAULT_EXPERIMENT
    run_name: str | None = None
    service_account: str = SERVICE_ACCOUNT  # "": the namespace's default runner
    timeout_seconds: float = 120.0  # the whole submission, every request included

    def __post_init__(self) -> None:
        bare, user, _ = split_credentials(self.host)
        if user is not None:
            raise ValueError(
                f"expected --host without a user and password, found {redact(self.host)}: the "
                f"Kubeflow Pipelines API takes a bearer token, given in ${TOKEN_ENV} (or "
                f"--token), so give --host {bare}"
            )
        if not is_http_url(self.host):
            raise ValueError(f"expected --host as http(s)://HOST[:PORT], found {self.host!r}")
        if self.namespace is not None and not is_dns_label(self.namespace):
            raise ValueError(
                f"expected --namespace as a Kubernetes namespace (a DNS label: lowercase "
                f"letters, digits and -), found {self.namespace!r}"
            )
        if self.service_account and not is_dns_subdomain(self.service_account):
            raise ValueError(
                "expected --service-account as a Kubernetes name (lowercase letters, digits, "
                f"- and .), found {self.service_account!r}"
            )
        for what, name in (("--experiment", self.experiment), ("--run-name", self.run_name)):
            if name is not None and not (name.isprintable() and 0 < len(name.strip()) <= 128):
                raise ValueError(
                    f"expected {what} as one line of 1 to 128 printable characters, found "
                    f"{printable(repr(name))[:140]}"
                )
        if not 0 < self.timeout_seconds <= 3600:
            raise ValueError(
                f"expected --timeout-seconds above 0 and at most 3600, found {self.timeout_seconds}"
            )


@dataclass(frozen=True)
class SubmittedRun:
    run_id: str
    url: str  # the run's page in the KFP UI


def submit(
    destination: Destination,
    pairs: list[str],
    target: ClusterTarget,
    sweep: bool,
    recipe: Recipe,
    tune: bool = False,
) -> SubmittedRun:
    """Check the arguments and the API, compile ``recipe`` for ``target``, start a run."""
    if not target.training.on_gpu and any(pair.startswith("gpus=") for pair in pairs):
        raise SystemExit(
            f"expected no gpus= on CPU hardware ({recipe.name}'s train task asks for no GPU, "
            "and its spec has no gpus parameter): give --hardware gpu, or a GPU preset"
        )
    parse = sweep_arguments if sweep else parse_arguments
    # the spec's defaults: the recipe's values
    compiled = parameters_of(sweep, tune, recipe, target.training.on_gpu)
    checked = parse(pairs, compiled, recipe)
    # the run's parameters: what was typed (a sweep's grid built of it); the rest are the
    # spec's defaults, the preset's values
    typed = {pair.partition("=")[0] for pair in pairs} | {"grid"}
    arguments = {name: value for name, value in checked.items() if name in typed}
    refuse_credentials(arguments, ("source", "tracking_uri"))
    import kfp  # loaded once the settings are known to be good

    from pipeline.spec import compile_pipeline

    token = destination.token or os.environ.get(TOKEN_ENV) or None
    health = check_api(destination.host, token)
    if health.get("multi_user") and not destination.namespace:
        raise SystemExit(
            f"the Kubeflow Pipelines at {destination.host} is multi-user: give --namespace "
            "with your profile's namespace"
        )
    with tempfile.TemporaryDirectory() as scratch:
        package = compile_pipeline(Path(scratch) / "pipeline.yaml", target, sweep, tune, recipe)

        def start_run() -> Any:
            client = kfp.Client(
                host=destination.host,
                namespace=destination.namespace or "kubeflow",
                existing_token=token,
            )
            return create_run(
                client,
                package,
                arguments,
                destination,
                experiment_id(client, destination),
                plugins_input(health, arguments),
            )

        with api_errors(destination, token):
            run = within(destination.timeout_seconds, destination.host, start_run)
    run_id = printable(str(run.run_id))  # as the API sent it, escaped: shown on a terminal
    return SubmittedRun(run_id, f"{destination.host.rstrip('/')}/#/runs/details/{run_id}")


def within(seconds: float, host: str, work: Callable[[], Any]) -> Any:
    """``work()``, or one line once ``seconds`` pass without its end.

    kfp's client sets no timeout on its requests, so they run in a thread the command
    stops waiting for: an API that accepts a connection and never answers ends the
    command in time, and the thread goes with the process.
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread as it is
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True, name="kfp-client")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise SystemExit(
            f"the Kubeflow Pipelines API at {host} did not answer within {seconds:g} s "
            "(--timeout-seconds); nothing is known to have started"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def plugins_input(health: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """What the run asks of the API's plugins: on KFP >= 2.17, the MLflow experiment its
    MLflow integration (where the cluster turned it on) tracks the run in, the pipeline's
    own ``experiment``, so that KFP's runs and the steps' are one experiment. Older APIs
    know no such field."""
    if api_version(health) < (2, 17):
        return {}
    experiment = arguments.get("experiment", TrainConfig.experiment)
    return {"mlflow": {"experiment_name": experiment}}


def api_version(health: dict[str, Any]) -> tuple[int, ...]:
    """The API's release from its health answer's ``tag_name`` (``2.17.0``); (0,) when
    it names none."""
    found = re.match(r"v?(\d+)\.(\d+)", str(health.get("tag_name") or ""))
    return tuple(int(part) for part in found.groups()) if found else (0,)


def create_run(
    client: Any,
    package: Path,
    arguments: dict[str, Any],
    destination: Destination,
    experiment: str,
    plugins: dict[str, Any],
) -> Any:
    """Start the run as ``kfp.Client.run_pipeline`` does, ``plugins_input`` added (kfp's
    client has no argument for it)."""
    import kfp_server_api

    job = client._create_job_config(
        params=arguments,
        pipeline_package_path=str(package),
        pipeline_id=None,
        version_id=None,
        enable_caching=None,
        cache_key=None,
        pipeline_root=None,
    )
    spec = job.pipeline_spec  # the spec alone, or with the Kubernetes platform's beside it
    name = spec.get("pipeline_spec", spec)["pipelineInfo"]["name"]  # as kfp names a run
    body = kfp_server_api.V2beta1Run(
        experiment_id=experiment,
        display_name=destination.run_name or f"{name} {time.strftime('%Y-%m-%d %H-%M-%S')}",
        pipeline_spec=job.pipeline_spec,
        runtime_config=job.runtime_config,
        service_account=destination.service_account or None,
        plugins_input=plugins or None,
    )
    return client._run_api.run_service_create_run(run=body)


def experiment_id(client: Any, destination: Destination) -> str:
    """The named experiment's id; the default experiment is created on first use, another
    that does not exist is refused (a typo would otherwise start a stray experiment)."""
    name, namespace = destination.experiment, destination.namespace
    try:
        found: str = client.get_experiment(experiment_name=name, namespace=namespace).experiment_id
        return found
    except ValueError:  # kfp: "No experiment is found with name ..."
        if name != DEFAULT_EXPERIMENT:
            where = f" in namespace {namespace}" if namespace else ""
            raise SystemExit(
                f"no experiment named {name!r}{where}: create it in the KFP UI, or leave "
                f"--experiment out to use {DEFAULT_EXPERIMENT!r}"
            ) from None
    made: str = client.create_experiment(name, namespace=namespace).experiment_id
    return made


@contextlib.contextmanager
def api_errors(destination: Destination, token: str | None = None) -> Iterator[None]:
    """An HTTP refusal of the KFP API as one line: status, what it said (escaped, the
    token masked should the API echo it), what to try."""
    from kfp_server_api.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    where = f" (namespace {destination.namespace})" if destination.namespace else ""
    try:
        yield
    except ApiException as err:
        body = str(err.body or "").replace(token, "***") if token else str(err.body or "")
        said = printable(" ".join(body.split()))[:200]
        hint = HINTS.get(err.status, "")
        raise SystemExit(
            f"the Kubeflow Pipelines API at {destination.host}{where} refused the request: "
            f"{err.status} {printable(str(err.reason))}: {said}" + (f"; {hint}" if hint else "")
        ) from None
    except HTTPError as err:
        cause = printable(str(getattr(err, "reason", None) or err))[:200]
        raise SystemExit(
            f"the Kubeflow Pipelines API at {destination.host}{where} stopped answering: {cause}"
        ) from None


def check_api(host: str, token: str | None = None) -> dict[str, Any]:
    """The API's health answer, ``{"multi_user": …}``; one line when the host does not
    answer, or answers as something other than the Kubeflow Pipelines API."""
    url = f"{host.rstrip('/')}/apis/v2beta1/healthz"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = requests.get(url, headers=headers, timeout=HEALTH_SECONDS)
    except requests.RequestException as err:
        raise SystemExit(
            f"cannot reach the Kubeflow Pipelines API at {host} ({type(err).__name__} on "
            f"{url}); check --host, e.g. after `kubectl -n kubeflow port-forward "
            "svc/ml-pipeline-ui 8888:80` use --host http://localhost:8888"
        ) from None
    try:
        health = answer.json()
    except ValueError:
        health = None
    if answer.status_code in (401, 403):
        raise SystemExit(
            f"the Kubeflow Pipelines API at {host} refused the health check: "
            f"{answer.status_code}; {HINTS[answer.status_code]}"
        )
    # KFP's answer: multi_user, commit_sha, tag_name (a false or empty one may be left out)
    if not (answer.ok and isinstance(health, dict) and HEALTH_KEYS & set(health)):
        kind = printable(answer.headers.get("Content-Type", "no content type"))[:60]
        raise SystemExit(
            f"{host} answered {url} with {answer.status_code} ({kind}), not as the Kubeflow "
            "Pipelines API does: check --host (the API or the KFP UI's address); behind "
            f"Kubeflow's login, give a token in ${TOKEN_ENV}"
        )
    return health
