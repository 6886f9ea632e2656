"""Image names and cluster settings, tagged with the project's version."""

import importlib.metadata
from dataclasses import dataclass

VERSION = importlib.metadata.version("dogs-vs-cats-kfp")
REGISTRY = "ghcr.io/dogs-vs-cats"
IMAGE = f"{REGISTRY}/dogs-vs-cats:{VERSION}"
GPU_IMAGE = f"{REGISTRY}/dogs-vs-cats-cuda:{VERSION}"


@dataclass(frozen=True)
class ClusterSettings:
    """Compile-time settings: images (pin tags or digests: KFP's cache keys on them), placement."""

    image: str = IMAGE
    gpu_image: str = GPU_IMAGE
    gpu_node_selector: tuple[str, str] | None = ("nvidia.com/gpu.present", "true")
    s3_secret: str = "dogs-vs-cats-s3"
    mlflow_secret: str = "dogs-vs-cats-mlflow"
    shm_size: str = "8Gi"
    nodes: int = 1  # more than one: training is a PyTorchJob across that many nodes
    shared_pvc: str = "dogs-vs-cats-shared"  # ReadWriteMany, for multi-node PyTorchJobs
