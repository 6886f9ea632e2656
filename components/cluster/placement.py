"""Where training pods run: one description for the single-node task and the multi-node job."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Placement:
    """GPUs' node, taint toleration, shared memory, secrets, requests and limits.

    Limits are twice the CPU request and equal to the memory request (memory is not
    overcommitted: a pod above its memory request is the first one evicted). The
    secrets are optional: a cluster without them runs with the pod's own identity.
    """

    node_selector: tuple[str, str] | None = ("nvidia.com/gpu.present", "true")
    toleration_key: str | None = GPU  # tolerate ``key:NoSchedule`` taints; None: none
    shm_size: str = "8Gi"
    cpu: str = "4"
    memory: str = "16Gi"
    s3_secret: str = "dogs-vs-cats-s3"  # AWS_* keys and endpoint, for s3:// sources
    mlflow_secret: str = "dogs-vs-cats-mlflow"  # MLFLOW_TRACKING_USERNAME/PASSWORD

    @property
    def secrets(self) -> tuple[str, str]:
        return (self.s3_secret, self.mlflow_secret)

    @property
    def cpu_limit(self) -> str:
        if self.cpu.endswith("m"):
            return f"{int(self.cpu[:-1]) * 2}m"
        return str(int(self.cpu) * 2)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Placement:
        values = json.loads(text)
        selector = values.get("node_selector")
        values["node_selector"] = tuple(selector) if selector else None
        return cls(**values)
