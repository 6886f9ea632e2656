"""The paths the project needs on a cluster, through the NetworkPolicies that guard them.

No Kubernetes runs here (a stand-in by necessity): the rendered manifests and Kubeflow
Pipelines' own SeaweedFS policy (tests/fixtures/kfp-seaweedfs) are evaluated by
tests/support/network_policies.py, whose reading of the API's rules is tested first.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
import yaml

from tests.conftest import REPO
from tests.support.network_policies import Pod, allows, namespace_labels, selects
from tests.test_manifests import render

KFP_STORE = REPO / "tests/fixtures/kfp-seaweedfs/kfp-seaweedfs.yaml"
NAMESPACES = {
    "kubeflow": namespace_labels("kubeflow"),
    "istio-system": namespace_labels("istio-system"),
    "team-a": namespace_labels("team-a", {"app.kubernetes.io/part-of": "kubeflow-profile"}),
    "mlflow": namespace_labels("mlflow", {"app.kubernetes.io/part-of": "dogs-vs-cats"}),
    "default": namespace_labels("default"),
}
SEAWEEDFS = Pod("kubeflow", {"app": "seaweedfs"})
PIPELINE_STEP = {"pipelines.kubeflow.org/v2_component": "true"}


def policy(namespace: str, spec: dict) -> dict:
    return {
        "kind": "NetworkPolicy",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": spec,
    }


# --- the evaluator's reading of the rules --------------------------------------------------


def test_a_pod_no_policy_selects_accepts_everything():
    other = policy("kubeflow", {"podSelector": {"matchLabels": {"app": "x"}}, "ingress": []})
    assert allows([other], Pod("default", {}), SEAWEEDFS, 8333, NAMESPACES)


def test_a_selected_pod_without_rules_accepts_nothing():
    deny = policy("kubeflow", {"podSelector": {}, "policyTypes": ["Ingress"]})
    assert not allows([deny], Pod("kubeflow", {}), SEAWEEDFS, 8333, NAMESPACES)


def test_a_pod_selector_alone_means_the_policys_own_namespace():
    own = policy("kubeflow", {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]})
    assert allows([own], Pod("kubeflow", {}), SEAWEEDFS, 8333, NAMESPACES)
    assert not allows([own], Pod("team-a", {}), SEAWEEDFS, 8333, NAMESPACES)


def test_both_selectors_in_one_peer_must_match_and_separate_peers_add_up():
    both = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mlflow"}}}
    one_peer = [{**both, "podSelector": {"matchLabels": {"app": "a"}}}]
    two_peers = [both, {"podSelector": {"matchLabels": {"app": "a"}}}]
    for peers, other_pod_passes in ((one_peer, False), (two_peers, True)):
        rules = policy("kubeflow", {"podSelector": {}, "ingress": [{"from": peers}]})
        assert allows([rules], Pod("mlflow", {"app": "a"}), SEAWEEDFS, 1, NAMESPACES)
        assert allows([rules], Pod("mlflow", {"app": "b"}), SEAWEEDFS, 1, NAMESPACES) is (
            other_pod_passes
        )


def test_ports_numbered_named_and_ranged():
    rules = [{"ports": [{"port": "s3"}, {"port": 9000, "endPort": 9010}]}]
    spec = policy("kubeflow", {"podSelector": {}, "ingress": rules})
    store = Pod("kubeflow", {"app": "seaweedfs"}, {"s3": 8333})
    assert [p for p in (8333, 8334, 9005, 9011) if allows([spec], store, store, p, NAMESPACES)] == [
        8333,
        9005,
    ]


def test_egress_policies_of_the_source_count_too():
    quiet = policy("mlflow", {"podSelector": {}, "policyTypes": ["Egress"]})
    assert not allows([quiet], Pod("mlflow", {}), SEAWEEDFS, 8333, NAMESPACES)


def test_match_expressions():
    labels = {"app": "seaweedfs"}
    assert selects(
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["seaweedfs"]}]}, labels
    )
    assert not selects(
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["seaweedfs"]}]}, labels
    )
    assert selects({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, labels)


# --- the project's paths ----------------------------------------------------------------------


def kfp_store() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(KFP_STORE.read_text()) if doc]


def template_pod(documents: list[dict], name: str) -> Pod:
    """The pod a rendered Deployment or StatefulSet ``name`` makes."""
    (owner,) = [
        d
        for d in documents
        if d["kind"] in ("Deployment", "StatefulSet") and d["metadata"]["name"] == name
    ]
    ports = {
        port["name"]: port["containerPort"]
        for container in owner["spec"]["template"]["spec"]["containers"]
        for port in container.get("ports", [])
        if "name" in port
    }
    return Pod(
        owner["metadata"]["namespace"], owner["spec"]["template"]["metadata"]["labels"], ports
    )


def policies(documents: list[dict]) -> list[dict]:
    return [d for d in documents if d["kind"] == "NetworkPolicy"]


def store_port(documents: list[dict]) -> int:
    """The pod port that the overlay's MLFLOW_S3_ENDPOINT_URL reaches through its Service."""
    (config,) = [d for d in documents if d["kind"] == "ConfigMap"]
    endpoint = urlparse(config["data"]["MLFLOW_S3_ENDPOINT_URL"])
    name, namespace = endpoint.hostname.split(".")[:2]
    (service,) = [
        d
        for d in kfp_store()
        if d["kind"] == "Service"
        and (d["metadata"]["name"], d["metadata"]["namespace"]) == (name, namespace)
    ]
    assert selects({"matchLabels": service["spec"]["selector"]}, SEAWEEDFS.labels)
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == endpoint.port]
    return port["targetPort"]


def test_the_tracking_server_reaches_kfps_seaweedfs_and_only_it_of_its_namespace():
    documents = render("overlays/kubeflow")
    mlflow, postgres = template_pod(documents, "mlflow"), template_pod(documents, "mlflow-postgres")
    port = store_port(documents)
    assert port == 8333
    every = [*kfp_store(), *policies(documents)]
    assert allows(every, mlflow, SEAWEEDFS, port, NAMESPACES)
    assert not allows(every, postgres, SEAWEEDFS, port, NAMESPACES)
    # KFP's policy alone refuses it: the overlay's policy is what opens the path
    kfp_only = [
        *kfp_store(),
        *[p for p in policies(documents) if p["metadata"]["namespace"] != "kubeflow"],
    ]
    assert not allows(kfp_only, mlflow, SEAWEEDFS, port, NAMESPACES)


@pytest.mark.parametrize(
    ("namespace", "admitted"),
    [("team-a", True), ("kubeflow", True), ("default", False), ("mlflow", False)],
)
def test_pipeline_steps_reach_the_tracking_server_from_kubeflow_and_profiles(namespace, admitted):
    documents = render("overlays/kubeflow")
    every = [*kfp_store(), *policies(documents)]
    mlflow = template_pod(documents, "mlflow")
    step = Pod(namespace, PIPELINE_STEP)
    assert allows(every, step, mlflow, mlflow.named_ports["http"], NAMESPACES) is admitted


def test_only_the_tracking_server_reaches_its_database():
    documents = render("base")
    every = policies(documents)
    mlflow, postgres = template_pod(documents, "mlflow"), template_pod(documents, "mlflow-postgres")
    assert allows(every, mlflow, postgres, 5432, NAMESPACES)
    assert not allows(every, Pod("team-a", PIPELINE_STEP), postgres, 5432, NAMESPACES)
    assert not allows(
        every, Pod("mlflow", {"app.kubernetes.io/name": "debug"}), postgres, 5432, NAMESPACES
    )


# --- the model server in a profile's namespace (overlays/serving-profile) -------------------

PREDICTOR = Pod(
    "team-a", {"serving.kserve.io/inferenceservice": "dogs-vs-cats", "component": "predictor"}
)
SERVING_NAMESPACES = {
    **NAMESPACES,
    "knative-serving": namespace_labels("knative-serving"),
    "kube-system": namespace_labels("kube-system"),
}


def serving_policies() -> list[dict]:
    """Every policy on the path: the serving overlay's, the tracking server's, KFP's store's."""
    return [
        *kfp_store(),
        *policies(render("overlays/kubeflow")),
        *policies(render("overlays/serving-profile")),
    ]


def test_the_model_server_in_a_profile_fetches_its_model_from_the_tracking_server():
    mlflow = template_pod(render("overlays/kubeflow"), "mlflow")
    every = serving_policies()
    assert allows(every, PREDICTOR, mlflow, mlflow.named_ports["http"], SERVING_NAMESPACES)
    dns = Pod("kube-system", {"k8s-app": "kube-dns"})
    assert allows(every, PREDICTOR, dns, 53, SERVING_NAMESPACES)
    istiod = Pod("istio-system", {"app": "istiod"})
    assert allows(every, PREDICTOR, istiod, 15012, SERVING_NAMESPACES)


def test_the_model_server_reaches_nothing_else():
    documents = render("overlays/kubeflow")
    every = serving_policies()
    postgres = template_pod(documents, "mlflow-postgres")
    assert not allows(every, PREDICTOR, postgres, 5432, SERVING_NAMESPACES)
    assert not allows(every, PREDICTOR, SEAWEEDFS, 8333, SERVING_NAMESPACES)
    elsewhere = Pod("default", {"app": "anything"})
    assert not allows(every, PREDICTOR, elsewhere, 443, SERVING_NAMESPACES)


@pytest.mark.parametrize(
    ("caller", "admitted"),
    [
        (Pod("istio-system", {"app": "istio-ingressgateway"}), True),
        (Pod("knative-serving", {"app": "activator"}), True),
        (Pod("team-a", PIPELINE_STEP), True),
        (Pod("kubeflow", PIPELINE_STEP), True),
        (Pod("default", {"app": "curl"}), False),
        (Pod("team-b", PIPELINE_STEP), False),
    ],
)
def test_who_may_call_the_model_server(caller, admitted):
    every = serving_policies()
    assert allows(every, caller, PREDICTOR, 8080, SERVING_NAMESPACES) is admitted
    assert not allows(every, caller, PREDICTOR, 9090, SERVING_NAMESPACES)


def test_istios_policy_selects_the_predictor_and_admits_the_profiles_own_namespace():
    documents = render("overlays/serving-profile")
    (policy,) = [d for d in documents if d["kind"] == "AuthorizationPolicy"]
    (service,) = [d for d in documents if d["kind"] == "InferenceService"]
    namespace = service["metadata"]["namespace"]
    assert policy["metadata"]["namespace"] == namespace
    assert selects(policy["spec"]["selector"], PREDICTOR.labels)
    assert policy["spec"]["selector"]["matchLabels"] == {
        "serving.kserve.io/inferenceservice": service["metadata"]["name"]
    }
    (rule,) = policy["spec"]["rules"]
    (source,) = rule["from"]
    assert namespace in source["source"]["namespaces"]  # edited with the namespace, or refused
    paths = rule["to"][0]["operation"]["paths"]
    assert "/v1/models/*" in paths and "/v2/models/*" in paths
    assert not any("repository" in path for path in paths)  # no model loading or unloading
