"""The deploy step's schema: which registered version, where, how it is rolled out."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.core.names import REGISTERED_MODEL_NAME
from components.core.schema import LOCAL, PER_RUN, setting
from components.serving.config import MODEL_NAME

DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class DeployConfig:
    """What the deploy step serves, where, and how long it waits for it."""

    model_version: str = setting(
        help="the registered version to serve",
        role=LOCAL,
        example="1",  # register's, at run time
    )
    tracking_uri: str = setting(
        help="the MLflow tracking server the model server loads the model through", role=LOCAL
    )
    image: str = setting(help="the image with components.serve (the CPU image)", role=LOCAL)
    registered_model_name: str = setting(
        REGISTERED_MODEL_NAME, "name in the MLflow Model Registry", role=PER_RUN
    )
    namespace: str = setting("kubeflow", "namespace of the InferenceService", role=LOCAL)
    name: str = setting(MODEL_NAME, "the InferenceService's name", role=LOCAL)
    canary_percent: int = setting(
        10, "share of traffic a new version gets while one already serves", role=PER_RUN
    )
    min_replicas: int = setting(1, "model server pods at the least", role=LOCAL)
    max_replicas: int = setting(3, "model server pods at the most", role=LOCAL)
    timeout_seconds: float = setting(600.0, "how long to wait for Ready", role=LOCAL)
    poll_seconds: float = setting(5.0, "how often its status is read", role=LOCAL)

    def __post_init__(self) -> None:
        if not self.model_version.isdigit():
            raise ValueError(
                f"expected a registered model version (1, 2, ...), found {self.model_version!r}"
            )
        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if not (DNS_LABEL.fullmatch(value) and len(value) <= 63):
                raise ValueError(f"expected a DNS label as the {what}, found {value!r}")
        if not 0 < self.canary_percent <= 100:
            raise ValueError(f"expected canary_percent from 1 to 100, found {self.canary_percent}")
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError(
                "expected 0 <= min_replicas <= max_replicas and max_replicas >= 1, found "
                f"{self.min_replicas} and {self.max_replicas}"
            )

    @property
    def model_uri(self) -> str:
        """The version, not an alias: a new version is a new revision to roll out."""
        return f"models:/{self.registered_model_name}/{self.model_version}"
