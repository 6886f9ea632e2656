"""What a compiled spec targets (images, placement, nodes, backend), and the parameters
only the pipeline has."""

import importlib.metadata
import re
from dataclasses import dataclass, field

from components.cluster.object_names import is_dns_subdomain
from components.cluster.placement import Placement
from components.core.schema import PER_RUN, setting
from components.training.config import check_checkpoint_uri

VERSION = importlib.metadata.version("dogs-vs-cats-kfp")
REGISTRY = "ghcr.io/dogs-vs-cats"
IMAGE = f"{REGISTRY}/dogs-vs-cats:{VERSION}"
GPU_IMAGE = f"{REGISTRY}/dogs-vs-cats-cuda:{VERSION}"
CLUSTER_TRACKING_URI = "http://mlflow.mlflow.svc.cluster.local:5000"
# where a run on this machine logs (pipeline.local), as its help says it
LOCAL_TRACKING = "$MLFLOW_TRACKING_URI, else sqlite:///runs/mlflow.db"
# the parameters a run on this machine has no use for: no GPU, no KServe
CLUSTER_ONLY = ("gpus", "deploy")


OLDEST_BACKEND = (2, 5)  # tests/pipeline/test_spec.py parses the spec with its protos
OPTIONAL_SECRETS_SINCE = (2, 15)
CURRENT_BACKEND = "2.15"
MOST_NODES = 2**31 - 1  # a TrainJob's numNodes is a 32-bit integer
MOST_PREPROCESS_PODS = 256  # a ParallelFor of more is a control plane's load for little gain


NEWEST_BACKEND = (2, 15)  # the newest whose behaviour the spec was checked against


def backend_version(text: str) -> tuple[int, int]:
    """``2.5`` or ``2.5.0`` as (2, 5), refused outside the backends the spec is made for."""
    match = re.fullmatch(r"(\d{1,3})\.(\d{1,3})(\.\d{1,3})?", text)
    if not match:
        raise ValueError(f"expected a KFP backend version such as 2.5, found {text!r}")
    major, minor = int(match[1]), int(match[2])
    if (major, minor) < OLDEST_BACKEND:
        oldest = ".".join(map(str, OLDEST_BACKEND))
        raise ValueError(f"KFP backend {text} is older than the oldest supported, {oldest}")
    if (major, minor) > NEWEST_BACKEND:
        newest = ".".join(map(str, NEWEST_BACKEND))
        raise ValueError(
            f"KFP backend {text} is newer than the newest this spec was checked against, "
            f"{newest}: give {newest} (a spec for it runs on later 2.x backends)"
        )
    return major, minor


@dataclass(frozen=True)
class ClusterTarget:
    """The cluster a spec is compiled for: images (pin digests: KFP's cache keys on them),
    where training runs, the oldest backend it must run on."""

    image: str = IMAGE
    gpu_image: str = GPU_IMAGE
    training: Placement = field(default_factory=Placement)
    nodes: int = 1  # more than one: training is a Kubeflow Trainer TrainJob on that many
    trainer_runtime: str = "torch-distributed"  # the ClusterTrainingRuntime it refers to
    shared_pvc: str = "dogs-vs-cats-shared"  # ReadWriteMany, shared with the TrainJob's pods
    kfp_backend: str = CURRENT_BACKEND  # the oldest KFP backend the spec must run on
    train_retries: int = 2  # KFP retries of the train task, to survive a lost pod
    sweep_parallelism: int = 4  # a sweep's combinations trained at once
    preprocess_pods: int = 1  # more than one: a plan task, that many slice pods, a join

    def __post_init__(self) -> None:
        backend_version(self.kfp_backend)
        if not 1 <= self.nodes <= MOST_NODES:
            raise ValueError(f"expected 1 to {MOST_NODES} training nodes, found {self.nodes}")
        if not 1 <= self.preprocess_pods <= MOST_PREPROCESS_PODS:
            raise ValueError(
                f"expected 1 to {MOST_PREPROCESS_PODS} preprocess pods, found "
                f"{self.preprocess_pods}"
            )
        if not is_dns_subdomain(self.trainer_runtime):
            raise ValueError(
                "expected the trainer runtime as a ClusterTrainingRuntime's name (lowercase "
                f"letters, digits, - and .), found {self.trainer_runtime!r}"
            )
        for name in ("image", "gpu_image"):
            image = getattr(self, name)
            if not image or any(c.isspace() for c in image):
                raise ValueError(f"expected the {name} as an image reference, found {image!r}")

    @property
    def train_image(self) -> str:
        """The image the train task (or TrainJob, or search trial) runs: its hardware's."""
        return self.gpu_image if self.training.on_gpu else self.image

    @property
    def optional_secrets(self) -> bool:
        """Whether the spec may mark secrets optional (``SecretAsEnv.optional``, KFP 2.15+)."""
        return backend_version(self.kfp_backend) >= OPTIONAL_SECRETS_SINCE


@dataclass(frozen=True)
class PipelineOnly:
    """Pipeline parameters that no single step has as a flag."""

    gpus: int = setting(1, "GPUs for the train task (torchrun when more than 1)", role=PER_RUN)
    tracking_uri: str = setting(
        CLUSTER_TRACKING_URI, "MLflow tracking server every step logs to", role=PER_RUN
    )
    checkpoint_root: str = setting(
        "", "durable checkpoints: s3://BUCKET/PREFIX or a path; empty: MLflow's", role=PER_RUN
    )
    deploy: bool = setting(
        False,
        "serve the model on KServe in the run's namespace once the gate gives it the alias "
        "(an InferenceService named dogs-vs-cats; a canary when another version serves)",
        role=PER_RUN,
    )

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"expected 1 or more GPUs for the train task, found {self.gpus}")
        check_checkpoint_uri(self.checkpoint_root, "checkpoint_root")
