"""Compile-time cluster settings, and the parameters only the pipeline has."""

import importlib.metadata
from dataclasses import dataclass, field

from components.cluster.placement import Placement
from components.core.schema import SETTING, setting

VERSION = importlib.metadata.version("dogs-vs-cats-kfp")
REGISTRY = "ghcr.io/dogs-vs-cats"
IMAGE = f"{REGISTRY}/dogs-vs-cats:{VERSION}"
GPU_IMAGE = f"{REGISTRY}/dogs-vs-cats-cuda:{VERSION}"
CLUSTER_TRACKING_URI = "http://mlflow.mlflow.svc.cluster.local:5000"


@dataclass(frozen=True)
class ClusterSettings:
    """Images (pin tags or digests: KFP's cache keys on them) and where training runs."""

    image: str = IMAGE
    gpu_image: str = GPU_IMAGE
    training: Placement = field(default_factory=Placement)
    nodes: int = 1  # more than one: training is a PyTorchJob across that many nodes
    shared_pvc: str = "dogs-vs-cats-shared"  # ReadWriteMany, for multi-node PyTorchJobs


@dataclass(frozen=True)
class PipelineOnly:
    """Pipeline parameters that no single step has as a flag."""

    gpus: int = setting(1, "GPUs for the train task (torchrun when more than 1)", role=SETTING)
    tracking_uri: str = setting(
        CLUSTER_TRACKING_URI, "MLflow tracking server every step logs to", role=SETTING
    )
    checkpoint_root: str = setting(
        "", "durable checkpoints: s3://BUCKET/PREFIX or a path; empty: MLflow's", role=SETTING
    )
