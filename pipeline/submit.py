"""Starting a run on a cluster's Kubeflow Pipelines API."""

import tempfile
from pathlib import Path

import requests

from pipeline.arguments import parse_arguments, refuse_credentials, sweep_arguments
from pipeline.pipeline import build_pipeline
from pipeline.spec import compile_pipeline
from pipeline.target import ClusterTarget


def submit(
    host: str,
    experiment: str,
    pairs: list[str],
    target: ClusterTarget,
    sweep: bool,
    preset: str | None,
) -> str:
    """Compile for ``target``, check the API answers, start a run; the run's id."""
    import kfp

    parse = sweep_arguments if sweep else parse_arguments
    arguments = parse(pairs, build_pipeline(target, sweep), preset)
    refuse_credentials(arguments, ("source", "tracking_uri"))
    with tempfile.TemporaryDirectory() as scratch:
        package = compile_pipeline(Path(scratch) / "pipeline.yaml", target, sweep)
        check_reachable(host)
        run = kfp.Client(host=host).create_run_from_pipeline_package(
            str(package), arguments=arguments, experiment_name=experiment
        )
    return run.run_id


def check_reachable(host: str, timeout: float = 10.0) -> None:
    """Exit with one line that says what was tried when the KFP API does not answer."""
    url = f"{host.rstrip('/')}/apis/v2beta1/healthz"
    try:
        requests.get(url, timeout=timeout)
    except requests.RequestException as err:
        raise SystemExit(
            f"cannot reach the Kubeflow Pipelines API at {host} ({type(err).__name__} on "
            f"{url}); check --host, e.g. after `kubectl -n kubeflow port-forward "
            "svc/ml-pipeline-ui 8080:80` use --host http://localhost:8080"
        ) from None
