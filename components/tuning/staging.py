"""The Job that puts a search's arrays where its trials read them.

A Katib search written by hand (``tune --output``) trains every trial on
``NAME/arrays`` on the shared claim. This Job fills it with the project's own steps, as
the pipeline runs them: the download step fetches and checks the archive into
``NAME/raw``, then the preprocess step writes the arrays the recipe was made for (its
image size and channels). Apply it, wait for it to complete, then apply the Experiment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s

from components.core import schema
from components.downloading.config import DownloadConfig
from components.preprocessing.config import PreprocessConfig
from components.tuning.experiment import (
    ExperimentTarget,
    locked_down,
    pod_security,
    shared_volume,
    step_env,
)

CPU, MEMORY = "2", "4Gi"  # as the pipeline's preprocess task


def staging_job(target: ExperimentTarget, values: Mapping[str, Any]) -> dict[str, Any]:
    """A ``batch/v1`` Job that downloads the archive ``values`` names to ``NAME/raw`` and
    preprocesses it, with their image size, channels and split, to ``NAME/arrays``.

    ``values``: pipeline parameters by name (``source``, ``sha256``, ``image_size``, …);
    each step's schema checks its own before anything is written.
    """
    raw, arrays = f"{target.folder}/raw", f"{target.folder}/arrays"
    download = DownloadConfig(output=raw, **schema.pick(DownloadConfig, values))
    preprocess = PreprocessConfig(input=raw, output=arrays, **schema.pick(PreprocessConfig, values))
    steps = {"download": schema.to_argv(download), "preprocess": schema.to_argv(preprocess)}
    first, last = (_container(target, name, argv) for name, argv in steps.items())
    pod = k8s.V1PodSpec(
        restart_policy="Never",
        service_account_name=target.service_account,
        security_context=pod_security(),
        init_containers=[first],  # in turn: the arrays only from a verified archive
        containers=[last],
        volumes=[shared_volume(target)],
    )
    job = k8s.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=k8s.V1ObjectMeta(name=f"{target.name}-data", namespace=target.namespace),
        spec=k8s.V1JobSpec(
            backoff_limit=0,  # a step that refuses its input says why once
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(annotations={"sidecar.istio.io/inject": "false"}),
                spec=pod,
            ),
        ),
    )
    manifest: dict[str, Any] = k8s.ApiClient().sanitize_for_serialization(job)
    return manifest


def _container(target: ExperimentTarget, step: str, argv: list[str]) -> k8s.V1Container:
    """One step in the CPU image, reading and writing the claim, non-root."""
    resources = {"cpu": CPU, "memory": MEMORY}
    return k8s.V1Container(
        name=step,
        image=target.image,
        command=["python", "-m", f"components.{step}"],
        args=argv,
        # an s3:// archive is read with the keys of the S3 secret, where there is one; the
        # download step records its source listing in the tracking store, as the trials log
        env=step_env(target),
        resources=k8s.V1ResourceRequirements(requests=resources, limits=resources),
        volume_mounts=[k8s.V1VolumeMount(name="shared", mount_path=target.shared_mount)],
        security_context=locked_down(),
    )
