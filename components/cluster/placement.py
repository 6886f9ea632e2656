"""Where training pods run: one description for the single-node task and the multi-node job."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

from components.cluster.object_names import is_dns_subdomain, is_extended_resource_name
from components.cluster.quantities import memory_bytes, millicores, twice_cpu
from components.core.schema import LOCAL, setting

GPU = "nvidia.com/gpu"
HARDWARE = ("gpu", "cpu")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")
MLFLOW_KEYS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
# Kubernetes' label syntax: an optional DNS-subdomain prefix and "/", then a name
LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


@dataclass(frozen=True)
class Placement:
    """The train pods' hardware, node, taint toleration, shared memory, secrets, requests
    and limits.

    Chosen when the pipeline is compiled: each preset names its own
    (``components.recipes.presets``), and flags override it (``--cpu 8 …``). The defaults
    are the default preset's: a CPU node's pod, 2 cores and 8 GiB. Limits are twice the
    CPU request and equal to the memory request (memory is not overcommitted: a pod above
    its request is the first one evicted). The secrets are optional: a cluster without
    them runs with the pod's own identity.
    """

    hardware: str = setting(
        "cpu",
        "what the train pods run on: gpu (the CUDA image, a GPU asked for) or cpu (the CPU "
        "image, no GPU)",
        role=LOCAL,
        choices=HARDWARE,
    )
    node_selector: str = setting(
        "",
        "node label KEY=VALUE the train pods need (the GPU presets: nvidia.com/gpu.present="
        "true, which NVIDIA's GPU Operator sets); empty: none",
        role=LOCAL,
    )
    toleration_key: str = setting(
        "", "taint key the train pods tolerate (effect NoSchedule); empty: none", role=LOCAL
    )
    cpu: str = setting("2", "CPU request of a train pod; its limit is twice that", role=LOCAL)
    memory: str = setting(
        "8Gi", "memory request and limit of a train pod, /dev/shm included", role=LOCAL
    )
    shm_size: str = setting("1Gi", "in-memory /dev/shm of a train pod", role=LOCAL)
    s3_secret: str = setting(
        "dogs-vs-cats-s3", "optional secret with AWS_* keys and endpoint", role=LOCAL
    )
    mlflow_secret: str = setting(
        "dogs-vs-cats-mlflow",
        "optional secret with MLFLOW_TRACKING_USERNAME/PASSWORD",
        role=LOCAL,
    )
    gpu_resource: str = setting(
        GPU,
        "the GPU resource a train pod asks for: nvidia.com/gpu, or a MIG slice such as "
        "nvidia.com/mig-1g.10gb",
        role=LOCAL,
    )
    queue_name: str = setting(
        "",
        "Kueue LocalQueue the GPU work joins: the label kueue.x-k8s.io/queue-name on the "
        "train pod, the TrainJob or each search trial's Job; empty: none",
        role=LOCAL,
    )
    priority_class: str = setting(
        "",
        "Kueue WorkloadPriorityClass of the GPU work (the label "
        "kueue.x-k8s.io/priority-class); empty: none",
        role=LOCAL,
    )

    def __post_init__(self) -> None:
        if self.hardware not in HARDWARE:
            raise ValueError(
                f"expected the hardware as one of {', '.join(HARDWARE)}, found {self.hardware!r}"
            )
        if self.node_selector:
            key, sep, value = self.node_selector.partition("=")
            if not sep or not is_label_key(key) or not LABEL_NAME.fullmatch(value):
                raise ValueError(
                    "expected a node selector KEY=VALUE that Kubernetes accepts (a label key, "
                    f"a value of letters, digits, -_. up to 63), or empty; found "
                    f"{self.node_selector!r}"
                )
        if self.toleration_key and not is_label_key(self.toleration_key):
            raise ValueError(f"expected a taint key such as {GPU}, found {self.toleration_key!r}")
        for name in ("s3_secret", "mlflow_secret"):
            if not is_dns_subdomain(getattr(self, name)):
                raise ValueError(
                    f"expected the {name} as a Kubernetes name (lowercase letters, digits, "
                    f"- and .), found {getattr(self, name)!r}"
                )
        if not is_extended_resource_name(self.gpu_resource):
            raise ValueError(
                "expected the GPU resource as an extended resource name Kubernetes takes on "
                f"a container (DOMAIN/NAME outside kubernetes.io/, not requests.…) such as "
                f"{GPU} or nvidia.com/mig-1g.10gb, found {self.gpu_resource!r}"
            )
        for name in ("queue_name", "priority_class"):
            value = getattr(self, name)
            if value and not (is_dns_subdomain(value) and LABEL_NAME.fullmatch(value)):
                raise ValueError(
                    f"expected the {name} as Kueue's object name and a label value (lowercase "
                    f"letters, digits, - and ., at most 63), or empty; found {value!r}"
                )
        millicores(self.cpu)  # raises with what was expected
        for name in ("memory", "shm_size"):
            value = getattr(self, name)
            if memory_bytes(value, what=name) < 2**20:
                raise ValueError(
                    f"expected the {name} as a quantity of 1Mi or more such as 12Gi or 512Mi, "
                    f"found {value!r}"
                )
        if memory_bytes(self.shm_size) > memory_bytes(self.memory):
            raise ValueError(  # /dev/shm counts in the pod's memory
                f"expected the shm size at most the memory ({self.memory}), /dev/shm counting "
                f"in it, found {self.shm_size}"
            )

    @property
    def on_gpu(self) -> bool:
        """Whether the train pods ask for a GPU (and run the CUDA image)."""
        return self.hardware == "gpu"

    @property
    def node_label(self) -> tuple[str, str] | None:
        """The node selector as (key, value), or None."""
        if not self.node_selector:
            return None
        key, _, value = self.node_selector.partition("=")
        return key, value

    @property
    def kueue_labels(self) -> dict[str, str]:
        """The labels by which Kueue admits the GPU work to its queue, at its priority."""
        labels = {QUEUE_LABEL: self.queue_name, PRIORITY_LABEL: self.priority_class}
        return {key: value for key, value in labels.items() if value}

    @property
    def secret_keys(self) -> dict[str, tuple[str, ...]]:
        """Each secret, and the keys in it that become environment variables of the same name."""
        return {self.s3_secret: S3_KEYS, self.mlflow_secret: MLFLOW_KEYS}

    @property
    def cpu_limit(self) -> str:
        """Twice the request: "6" for "3", "3" for "1.5", "500m" for "250m"."""
        return twice_cpu(self.cpu)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Placement:
        return cls(**json.loads(text))


def is_label_key(key: str) -> bool:
    """Whether Kubernetes accepts ``key`` as a label or taint key (``prefix/name``)."""
    prefix, _, name = key.rpartition("/")
    valid_prefix = not prefix or is_dns_subdomain(prefix)
    return bool(name and valid_prefix and LABEL_NAME.fullmatch(name))
