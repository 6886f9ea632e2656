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
from components.tuning.experiment import APP_GID, ExperimentTarget

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
        security_context=k8s.V1PodSecurityContext(
            fs_group=APP_GID, seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault")
        ),
        init_containers=[first],  # in turn: the arrays only from a verified archive
        containers=[last],
        volumes=[
            k8s.V1Volume(
                name="shared",
                persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                    claim_name=target.shared_pvc
                ),
            )
        ],
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
        env=[  # an s3:// archive is read with the keys of the S3 secret, where there is one
            k8s.V1EnvVar(
                name=key,
                value_from=k8s.V1EnvVarSource(
                    secret_key_ref=k8s.V1SecretKeySelector(
                        name=target.placement.s3_secret, key=key, optional=True
                    )
                ),
            )
            for key in target.placement.secret_keys[target.placement.s3_secret]
        ],
        resources=k8s.V1ResourceRequirements(requests=resources, limits=resources),
        volume_mounts=[k8s.V1VolumeMount(name="shared", mount_path=target.shared_mount)],
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            run_as_non_root=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
    )
