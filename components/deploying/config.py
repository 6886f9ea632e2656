"""The deploy step's schema: which registered version, where, how it is rolled out.

Everything Kubernetes or KServe would refuse is refused here, before any request: the
step either sends a resource the cluster can take or says at once what is wrong.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from components.cluster.object_names import is_dns_label, is_dns_subdomain, is_service_name
from components.core.errors import printable
from components.core.names import REGISTERED_MODEL_NAME
from components.core.schema import LOCAL, PER_RUN, setting
from components.core.uris import holds_credentials, is_http_url, redact, split_credentials
from components.serving.config import MODEL_NAME

# KServe 0.15+: Standard (Deployments, the default since) or Knative (was Serverless)
STANDARD, KNATIVE = "Standard", "Knative"
# KServe names the predictor's Service NAME-predictor, itself a DNS label of at most 63
LONGEST_NAME = 63 - len("-predictor")
VERSION = re.compile(r"[1-9][0-9]{0,8}")  # ASCII digits only: "١" is a digit to str.isdigit
# an image reference as the container runtime parses it: [host[:port]/]path[:tag][@digest]
IMAGE = re.compile(
    r"(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
LONGEST_WAIT = 24 * 3600.0


@dataclass(frozen=True)
class DeployConfig:
    """What the deploy step serves, where, and how long it waits for it."""

    model_version: str = setting(
        help="the registered version to serve",
        role=LOCAL,
        example="1",  # register's, at run time
    )
    tracking_uri: str = setting(
        help="the MLflow tracking server the model server loads the model through; a user "
        "and password in it stay out of the InferenceService: the model server reads them "
        "from --mlflow-secret",
        role=LOCAL,
    )
    image: str = setting(
        help="the image with components.serve (the CPU image)",
        role=LOCAL,
        example="registry.example/dogs-vs-cats:0.1.0",  # the compiled spec's, at run time
    )
    registered_model_name: str = setting(
        REGISTERED_MODEL_NAME, "name in the MLflow Model Registry", role=PER_RUN
    )
    namespace: str = setting("kubeflow", "namespace of the InferenceService", role=LOCAL)
    name: str = setting(MODEL_NAME, "the InferenceService's name", role=LOCAL)
    deployment_mode: str = setting(
        STANDARD,
        "KServe's deployment mode: Standard (Deployments; KServe's default since 0.15) or "
        "Knative (revisions, scale to zero, canaries)",
        role=PER_RUN,
        choices=(STANDARD, KNATIVE),
    )
    canary_percent: int = setting(
        100,
        "share of traffic a new version gets while another serves: 100 rolls it out "
        "whole; below 100 it is a canary (0: deployed, no traffic) until `python -m "
        "components.rollout promote` or `rollback` (Standard mode: KServe 0.20 or later)",
        role=PER_RUN,
    )
    min_replicas: int = setting(
        1, "model server pods at the least (0: scale to zero, Knative only)", role=LOCAL
    )
    max_replicas: int = setting(3, "model server pods at the most", role=LOCAL)
    mlflow_secret: str = setting(
        "dogs-vs-cats-mlflow",
        "secret whose MLFLOW_TRACKING_USERNAME/PASSWORD the model server reads (optional)",
        role=LOCAL,
    )
    s3_secret: str = setting(
        "dogs-vs-cats-s3",
        "secret whose AWS_* keys the model server reads, for a model in S3 (optional)",
        role=LOCAL,
    )
    timeout_seconds: float = setting(
        600.0, "how long the whole step may take, every request included", role=LOCAL
    )
    poll_seconds: float = setting(5.0, "how often its status is read", role=LOCAL)

    def __post_init__(self) -> None:
        if not VERSION.fullmatch(self.model_version):
            raise ValueError(
                f"expected a registered model version (1, 2, ...), found {self.model_version!r}"
            )
        if not is_service_name(self.name, LONGEST_NAME):
            raise ValueError(
                f"expected the name as a DNS label of at most {LONGEST_NAME} characters "
                f"(lowercase letters, digits and -, a letter first), found {self.name!r}"
            )
        if not is_dns_label(self.namespace):
            raise ValueError(f"expected a DNS label as the namespace, found {self.namespace!r}")
        if not (IMAGE.fullmatch(self.image) and len(self.image) <= 1024):
            raise ValueError(
                f"expected an image reference such as registry.example/dogs-vs-cats:0.1.0 "
                f"or …@sha256:DIGEST, found {self.image!r}"
            )
        if self.deployment_mode not in (STANDARD, KNATIVE):
            raise ValueError(
                f"expected deployment_mode {STANDARD} or {KNATIVE}, found {self.deployment_mode!r}"
            )
        self._check_tracking_uri()
        for name in ("mlflow_secret", "s3_secret"):
            if not is_dns_subdomain(getattr(self, name)):
                raise ValueError(
                    f"expected the {name} as a Kubernetes name, found {getattr(self, name)!r}"
                )
        self._check_rollout()
        for name in ("timeout_seconds", "poll_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= LONGEST_WAIT):
                raise ValueError(
                    f"expected {name} above 0 and at most {LONGEST_WAIT:g}, found {value!r}"
                )

    def _check_tracking_uri(self) -> None:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:\S+", self.tracking_uri):
            raise ValueError(
                "expected the tracking URI as one URI with no spaces or control characters, "
                f"found {printable(redact(self.tracking_uri))!r}"
            )

    @property
    def served_tracking_uri(self) -> str:
        """The tracking URI the model server is given: without a user and password, which
        it reads from ``mlflow_secret`` by reference instead.

        Raises:
            ValueError: not an http(s) URI, which a pod in the cluster could reach.
        """
        bare, _, _ = split_credentials(self.tracking_uri)
        if not is_http_url(bare) or holds_credentials(bare):
            raise ValueError(
                "expected the tracking URI as http(s)://HOST[:PORT] with no secret in its "
                "query, which the model server in the cluster loads the model through, found "
                f"{redact(self.tracking_uri)!r}"
            )
        return bare

    def _check_rollout(self) -> None:
        if not 0 <= self.canary_percent <= 100:
            raise ValueError(f"expected canary_percent from 0 to 100, found {self.canary_percent}")
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError(
                "expected 0 <= min_replicas <= max_replicas and max_replicas >= 1, found "
                f"{self.min_replicas} and {self.max_replicas}"
            )
        if self.deployment_mode == STANDARD and self.min_replicas == 0:
            raise ValueError(
                f"min_replicas 0 (scale to zero) needs deployment_mode {KNATIVE}: the "
                f"{STANDARD} mode's autoscaler keeps at least one pod"
            )

    @property
    def model_uri(self) -> str:
        """The version, not an alias: a new version is a new revision to roll out."""
        return f"models:/{self.registered_model_name}/{self.model_version}"

    @property
    def canary(self) -> bool:
        return self.canary_percent < 100


PROMOTE, ROLLBACK = "promote", "rollback"


@dataclass(frozen=True)
class RolloutConfig:
    """Where the canary to promote or roll back runs, and how long the step may wait."""

    namespace: str = setting("kubeflow", "namespace of the InferenceService", role=LOCAL)
    name: str = setting(MODEL_NAME, "the InferenceService's name", role=LOCAL)
    timeout_seconds: float = setting(
        600.0, "how long the whole step may take, every request included", role=LOCAL
    )
    poll_seconds: float = setting(5.0, "how often its status is read", role=LOCAL)

    def __post_init__(self) -> None:
        if not is_service_name(self.name, LONGEST_NAME) or not is_dns_label(self.namespace):
            raise ValueError(
                f"expected the name and namespace as DNS labels, found {self.name!r} and "
                f"{self.namespace!r}"
            )
        for name in ("timeout_seconds", "poll_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= LONGEST_WAIT):
                raise ValueError(
                    f"expected {name} above 0 and at most {LONGEST_WAIT:g}, found {value!r}"
                )
