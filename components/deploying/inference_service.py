"""The InferenceService that serves a registered version, built with KServe's own models.

One resource for both of KServe's deployment modes, its mode named by KServe's
annotation. The hardening sits on the container, not the pod: Knative refuses a pod-level
``securityContext`` unless its ``kubernetes.podspec-securitycontext`` flag is on, and the
container's holds all of it (non-root user, seccomp, no privilege escalation). No
credential stands in the resource: the model server reads them from secrets by reference.
"""

from __future__ import annotations

from typing import Any, cast

from kserve import (
    V1beta1CanarySpec,
    V1beta1InferenceService,
    V1beta1InferenceServiceSpec,
    V1beta1PredictorSpec,
    constants,
)
from kubernetes import client as k8s

from components.core.workspace import workspace_env
from components.deploying.config import DeployConfig
from components.serving.config import MODEL_NAME

PORT = 8080
USER = 10001  # the images' user
# measured: 676 MiB resident idle, 1,073 MiB at peak under load (docs/BENCHMARKS.md)
RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
MODEL_URI_ANNOTATION = "dogs-vs-cats/model-uri"  # the version with the traffic
CANARY_URI_ANNOTATION = "dogs-vs-cats/canary-model-uri"  # a canary's, while one runs
STORAGE_URI = "STORAGE_URI"  # KServe's variable for a custom container's model
# what the deploy step created, and so may update; anything else under the name it refuses
MANAGED_BY = ("app.kubernetes.io/managed-by", "dogs-vs-cats-deploy")
# Istio's sidecar (a profile namespace injects one) up before the model is fetched through it
HOLD_UNTIL_PROXY = ("proxy.istio.io/config", '{"holdApplicationUntilProxyStarts": true}')
MLFLOW_KEYS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")


def build(cfg: DeployConfig, knative_canary: bool = False) -> V1beta1InferenceService:
    """The InferenceService serving ``cfg``'s version with all the traffic; with
    ``knative_canary`` (Knative mode), the new revision takes ``cfg.canary_percent`` while
    the serving one keeps the rest (``canary`` builds the Standard mode's)."""
    return V1beta1InferenceService(
        api_version=constants.KSERVE_V1BETA1,
        kind=constants.KSERVE_KIND_INFERENCESERVICE,
        metadata=k8s.V1ObjectMeta(
            name=cfg.name,
            namespace=cfg.namespace,
            labels={"app.kubernetes.io/part-of": "dogs-vs-cats", MANAGED_BY[0]: MANAGED_BY[1]},
            annotations={
                MODEL_URI_ANNOTATION: cfg.model_uri,
                MODE_ANNOTATION: cfg.deployment_mode,
                HOLD_UNTIL_PROXY[0]: HOLD_UNTIL_PROXY[1],
            },
        ),
        spec=V1beta1InferenceServiceSpec(predictor=_predictor(cfg, knative_canary)),
    )


def canary(cfg: DeployConfig) -> V1beta1CanarySpec:
    """KServe's Standard-mode canary (0.20+) for ``cfg``'s version beside the serving
    predictor: its own Deployment ``NAME-vVERSION-predictor`` at a fixed replica (KServe
    refuses autoscaling on a canary), taking ``cfg.canary_percent`` of the traffic (0: a
    dark launch, deployed and not routed to)."""
    predictor = V1beta1PredictorSpec(
        name=canary_name(cfg.model_version),
        min_replicas=1,  # at most the serving predictor's, as KServe requires
        automount_service_account_token=False,
        containers=[_container(cfg)],
        volumes=_volumes(),
    )
    return V1beta1CanarySpec(predictor=predictor, traffic_percent=cfg.canary_percent)


def canary_name(version: str) -> str:
    """A canary predictor's name, which names its Deployment: one per version."""
    return f"v{version}"


def _predictor(cfg: DeployConfig, knative_canary: bool) -> V1beta1PredictorSpec:
    return V1beta1PredictorSpec(
        min_replicas=cfg.min_replicas,
        max_replicas=cfg.max_replicas,
        canary_traffic_percent=cfg.canary_percent if knative_canary else None,
        automount_service_account_token=False,  # the model server calls no Kubernetes API
        containers=[_container(cfg)],
        volumes=_volumes(),
    )


def _volumes() -> list[k8s.V1Volume]:
    return [
        k8s.V1Volume(name=name, empty_dir=k8s.V1EmptyDirVolumeSource()) for name in ("tmp", "home")
    ]


def _container(cfg: DeployConfig) -> k8s.V1Container:
    ready = f"/v1/models/{MODEL_NAME}"
    return k8s.V1Container(
        name="kserve-container",  # the name KServe gives a predictor's container
        image=cfg.image,
        command=["python", "-m", "components.serve"],
        # KServe's storage initializer (the ClusterStorageContainer for models:/ URIs in
        # manifests/serving) fetches STORAGE_URI's model and points the variable at it
        args=[f"--model=$({STORAGE_URI})", "--host=0.0.0.0", f"--port={PORT}"],
        env=[
            k8s.V1EnvVar(name=STORAGE_URI, value=cfg.model_uri),
            k8s.V1EnvVar(name="MLFLOW_TRACKING_URI", value=cfg.served_tracking_uri),
            *(k8s.V1EnvVar(name=name, value=value) for name, value in workspace_env().items()),
            *_secret_env(cfg.mlflow_secret, MLFLOW_KEYS),
            *_secret_env(cfg.s3_secret, S3_KEYS),
        ],
        ports=[k8s.V1ContainerPort(container_port=PORT, protocol="TCP")],
        readiness_probe=k8s.V1Probe(
            http_get=k8s.V1HTTPGetAction(path=ready, port=PORT), period_seconds=10
        ),
        liveness_probe=k8s.V1Probe(
            http_get=k8s.V1HTTPGetAction(path=ready, port=PORT),  # alive while it serves
            initial_delay_seconds=60,  # loading the model comes first
            period_seconds=20,
            failure_threshold=6,
        ),
        resources=k8s.V1ResourceRequirements(**RESOURCES),
        security_context=k8s.V1SecurityContext(
            run_as_non_root=True,
            run_as_user=USER,
            run_as_group=USER,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
        volume_mounts=[
            k8s.V1VolumeMount(name="tmp", mount_path="/tmp"),
            k8s.V1VolumeMount(name="home", mount_path="/home/app"),
        ],
    )


def _secret_env(secret: str, keys: tuple[str, ...]) -> list[k8s.V1EnvVar]:
    """Each key of ``secret`` as the variable of its name, by reference; absent, unset."""
    return [
        k8s.V1EnvVar(
            name=key,
            value_from=k8s.V1EnvVarSource(
                secret_key_ref=k8s.V1SecretKeySelector(name=secret, key=key, optional=True)
            ),
        )
        for key in keys
    ]


def manifest(service: V1beta1InferenceService) -> dict[str, Any]:
    """The resource as the Kubernetes API takes it (camelCase, no empty fields)."""
    return cast(dict[str, Any], k8s.ApiClient().sanitize_for_serialization(service))
