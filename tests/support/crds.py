"""Validating custom resources against their CRDs' own schemas, unknown fields refused.

The API server prunes (or, with strict field validation, rejects) fields a structural
schema does not declare; here every object schema with ``properties`` and no
``additionalProperties`` or ``x-kubernetes-preserve-unknown-fields`` refuses others, so a
misspelt or misplaced field fails the test instead of vanishing on the cluster.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import jsonschema
import yaml

from tests.conftest import REPO

CRDS = REPO / "tests/fixtures/crds"
INFERENCE_SERVICE = CRDS / "serving.kserve.io_inferenceservices.yaml"
TRAIN_JOB = CRDS / "trainer.kubeflow.org_trainjobs.yaml"
CLUSTER_STORAGE_CONTAINER = CRDS / "serving.kserve.io_clusterstoragecontainers.yaml"
# Kueue v0.19.2's queues, by the kind of resource each CRD defines
KUEUE = {
    "ResourceFlavor": CRDS / "kueue.x-k8s.io_resourceflavors.yaml",
    "ClusterQueue": CRDS / "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": CRDS / "kueue.x-k8s.io_localqueues.yaml",
    "WorkloadPriorityClass": CRDS / "kueue.x-k8s.io_workloadpriorityclasses.yaml",
}


def _strict(schema: dict) -> dict:
    """The schema with unknown fields refused and Kubernetes' extensions made plain."""
    schema = copy.deepcopy(schema)

    def visit(node):
        if isinstance(node, dict):
            if node.get("x-kubernetes-int-or-string"):
                node.pop("type", None)
                node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return schema


@functools.cache
def _validator(path: str, version: str) -> jsonschema.Draft7Validator:
    crd = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return jsonschema.Draft7Validator(_strict(served["schema"]["openAPIV3Schema"]))


def errors(resource: dict, crd=INFERENCE_SERVICE) -> list[str]:
    """Every way ``resource`` breaks its CRD's schema (of its apiVersion's version)."""
    version = resource["apiVersion"].split("/")[-1]
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in _validator(str(crd), version).iter_errors(resource)
    ]
