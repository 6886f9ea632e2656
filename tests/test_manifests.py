"""Every Kubernetes manifest renders, validates against the schemas offline, and is locked down."""

from __future__ import annotations

import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

from components.cluster.placement import Placement
from components.recipes.presets import PRESETS
from tests.conftest import REPO
from tests.support import crds

MANIFESTS = REPO / "manifests"
KUSTOMIZATIONS = [
    "base",
    "overlays/kubeflow",
    "pipeline",
    "overlays/profile",
    "overlays/multi-node",
    "overlays/profile-multi-node",
    "serving",
    "serving-storage",
    "overlays/serving",
    "overlays/serving-profile",
    "kueue",
]
K8S_VERSION = "1.30.0"
POD_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
# RBAC, volumes and namespaces: no pod to check
PODLESS = {"pipeline", "overlays/profile", "overlays/multi-node", "overlays/profile-multi-node"}
PODLESS |= {"serving-storage"}  # an init container KServe adds to the model server's pods
PODLESS |= {"kueue"}  # queues and quotas


def render(directory: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl (with its built-in kustomize) is not installed here")
    done = subprocess.run(
        [kubectl, "kustomize", str(MANIFESTS / directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def plain_manifests() -> list[tuple[str, dict]]:
    """Every resource file as written, kustomization files aside."""
    found = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        if path.name in ("kustomization.yaml", "kustomizeconfig.yaml") or path.name.endswith(
            "-patch.yaml"
        ):
            continue
        found += [
            (str(path.relative_to(REPO)), doc)
            for doc in yaml.safe_load_all(path.read_text())
            if doc
        ]
    return found


# Istio's AuthorizationPolicy (security.istio.io/v1): its CRD is not among the ones kept
# here, so its fields are checked against the names Istio's API reference lists
ISTIO_FIELDS = {
    "spec": {"selector", "targetRef", "targetRefs", "action", "provider", "rules"},
    "rule": {"from", "to", "when"},
    "source": {
        *("principals", "notPrincipals", "requestPrincipals", "notRequestPrincipals"),
        *("namespaces", "notNamespaces", "ipBlocks", "notIpBlocks"),
        *("remoteIpBlocks", "notRemoteIpBlocks", "serviceAccounts", "notServiceAccounts"),
    },
    "operation": {
        *("hosts", "notHosts", "ports", "notPorts"),
        *("methods", "notMethods", "paths", "notPaths"),
    },
}


def authorization_policy_errors(doc: dict) -> list[str]:
    errors = []

    def unknown(where: str, found: dict, known: str) -> None:
        errors.extend(f"{where}.{key}" for key in set(found) - ISTIO_FIELDS[known])

    assert doc["apiVersion"] == "security.istio.io/v1"
    unknown("spec", doc["spec"], "spec")
    if doc["spec"].get("action", "ALLOW") not in ("ALLOW", "DENY", "AUDIT", "CUSTOM"):
        errors.append("spec.action")
    for i, rule in enumerate(doc["spec"].get("rules", [])):
        unknown(f"rules[{i}]", rule, "rule")
        for peer in rule.get("from", []):
            unknown(f"rules[{i}].from", peer["source"], "source")
        for target in rule.get("to", []):
            unknown(f"rules[{i}].to", target["operation"], "operation")
    return errors


def validate(doc: dict) -> None:
    """Strictly, against Kubernetes' schemas or, for a custom resource, its CRD's."""
    if doc["kind"] == "InferenceService":
        assert crds.errors(doc) == []
    elif doc["kind"] == "ClusterStorageContainer":
        assert crds.errors(doc, crds.CLUSTER_STORAGE_CONTAINER) == []
    elif doc["kind"] in crds.KUEUE:
        assert crds.errors(doc, crds.KUEUE[doc["kind"]]) == []
    elif doc["kind"] == "AuthorizationPolicy":
        assert authorization_policy_errors(doc) == []
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS)
def test_kustomizations_render_to_valid_resources(directory):
    documents = render(directory)
    assert documents
    for doc in documents:
        validate(doc)


@pytest.mark.parametrize(
    "name, doc", plain_manifests(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_file_validates(name, doc):
    validate(doc)


def pod_specs(documents):
    for doc in documents:
        if doc["kind"] in POD_OWNERS:
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]
        elif doc["kind"] == "InferenceService":
            yield doc["metadata"]["name"], doc["spec"]["predictor"]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS)
def test_every_container_is_locked_down_with_probes_and_resources(directory):
    checked = 0
    for owner, pod in pod_specs(render(directory)):
        pod_context = pod.get("securityContext", {})
        for container in pod["containers"]:
            where = f"{directory}: {owner}/{container['name']}"
            context = {**pod_context, **container.get("securityContext", {})}
            assert context.get("runAsNonRoot") is True, where
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("capabilities", {}).get("drop") == ["ALL"], where
            assert context.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), where
            assert {"cpu", "memory"} <= set(container["resources"]["limits"]), where
            assert "readinessProbe" in container and "livenessProbe" in container, where
            checked += 1
    # a kustomization with pods had its containers checked, and one without has none
    assert (checked == 0) == (directory in PODLESS), f"{directory}: {checked} containers"


def test_no_secret_is_committed():
    for directory in KUSTOMIZATIONS:
        assert not [d for d in render(directory) if d["kind"] == "Secret"], directory
    templates = [doc for name, doc in plain_manifests() if doc["kind"] == "Secret"]
    assert templates
    for secret in templates:
        values = [v for v in secret["stringData"].values() if v]
        assert values and all(v in ("CHANGE_ME", "mlflow") for v in values), secret["metadata"]


def test_mlflow_serves_artifacts_from_s3_and_allows_in_cluster_names():
    (deployment,) = [d for d in render("base") if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--serve-artifacts" in args
    assert any(a.startswith("--backend-store-uri=postgresql+psycopg://") for a in args)
    allowed = next(a for a in args if a.startswith("--allowed-hosts=")).split("=", 1)[1]
    assert "mlflow.mlflow.svc.cluster.local:*" in allowed.split(",")


def artifact_store(directory: str) -> dict[str, str]:
    """The tracking server's artifact settings: the ConfigMap its container reads."""
    documents = render(directory)
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert not {"ARTIFACTS_DESTINATION", "MLFLOW_S3_ENDPOINT_URL"} & {
        e["name"] for e in container["env"]
    }
    (source,) = container["envFrom"]
    (config,) = [d for d in documents if d["kind"] == "ConfigMap"]
    assert source["configMapRef"]["name"] == config["metadata"]["name"]  # the hashed name
    return config["data"]


def test_the_artifact_store_is_set_in_one_place_per_overlay():
    assert artifact_store("base") == {"ARTIFACTS_DESTINATION": "s3://mlflow-artifacts"}
    assert artifact_store("overlays/kubeflow") == {
        "ARTIFACTS_DESTINATION": "s3://mlpipeline/mlflow-artifacts",
        # SeaweedFS since KFP 2.15 and MinIO before both answer as minio-service:9000
        "MLFLOW_S3_ENDPOINT_URL": "http://minio-service.kubeflow.svc.cluster.local:9000",
        "MLFLOW_S3_IGNORE_TLS": "true",
    }


def rbac_rules(role: dict) -> dict[tuple[str, str], set[str]]:
    return {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def subjects(binding: dict) -> set[tuple[str, str]]:
    return {(s["namespace"], s["name"]) for s in binding["subjects"]}


@pytest.mark.parametrize(
    ("directory", "namespace", "runners"),
    [
        ("pipeline", "kubeflow", {"dogs-vs-cats-pipeline", "pipeline-runner"}),
        ("overlays/profile", "team-a", {"dogs-vs-cats-pipeline", "default-editor"}),
    ],
)
def test_the_pipeline_may_run_trainjobs_and_read_runtimes_and_logs(directory, namespace, runners):
    documents = {(d["kind"], d["metadata"]["name"]): d for d in render(directory)}
    rules = rbac_rules(documents["Role", "dogs-vs-cats-trainjobs"])
    verbs = {"create", "get", "watch", "delete"}
    assert verbs <= rules[("trainer.kubeflow.org", "trainjobs")]
    assert "get" in rules[("", "pods/log")] and "list" in rules[("", "pods")]
    assert not any(group == "kubeflow.org" for group, _ in rules)  # no Training Operator v1
    runtimes = rbac_rules(documents["ClusterRole", "dogs-vs-cats-training-runtimes"])
    assert {"get", "list"} <= runtimes[("trainer.kubeflow.org", "clustertrainingruntimes")]
    bindings = [d for (kind, _), d in documents.items() if kind.endswith("RoleBinding")]
    for binding in bindings:
        if binding["metadata"]["name"] != "dogs-vs-cats-steps":
            assert subjects(binding) == {(namespace, name) for name in runners}
    assert documents["RoleBinding", "dogs-vs-cats-trainjobs"]["metadata"]["namespace"] == namespace
    assert not any(kind == "PersistentVolumeClaim" for kind, _ in documents)  # multi-node only


@pytest.mark.parametrize(
    ("directory", "runners"),
    [
        ("pipeline", {"dogs-vs-cats-pipeline", "pipeline-runner"}),
        ("overlays/profile", {"dogs-vs-cats-pipeline", "default-editor"}),
    ],
)
def test_the_tune_pipeline_may_run_katib_experiments_and_nothing_more(directory, runners):
    documents = {(d["kind"], d["metadata"]["name"]): d for d in render(directory)}
    rules = rbac_rules(documents["Role", "dogs-vs-cats-katib"])
    assert rules == {("kubeflow.org", "experiments"): {"create", "get", "list", "watch"}}
    binding = documents["RoleBinding", "dogs-vs-cats-katib"]
    assert {name for _, name in subjects(binding)} == runners


@pytest.mark.parametrize(
    ("directory", "namespace"), [("pipeline", "kubeflow"), ("overlays/profile", "team-a")]
)
def test_steps_may_run_as_the_pipelines_own_service_account(directory, namespace):
    documents = {(d["kind"], d["metadata"]["name"]): d for d in render(directory)}
    rules = rbac_rules(documents["Role", "dogs-vs-cats-steps"])
    assert {"create", "patch"} <= rules[("argoproj.io", "workflowtaskresults")]  # Argo's executor
    assert "get" in rules[("", "configmaps")] and "get" in rules[("", "secrets")]  # KFP's launcher
    binding = documents["RoleBinding", "dogs-vs-cats-steps"]
    assert subjects(binding) == {(namespace, "dogs-vs-cats-pipeline")}
    assert binding["metadata"]["namespace"] == namespace
    assert ("ServiceAccount", "dogs-vs-cats-pipeline") in documents


@pytest.mark.parametrize(
    ("directory", "namespace"),
    [("overlays/multi-node", "kubeflow"), ("overlays/profile-multi-node", "team-a")],
)
def test_the_shared_volume_comes_with_the_multi_node_overlays_in_their_namespace(
    directory, namespace
):
    documents = render(directory)
    (claim,) = [d for d in documents if d["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert {d["metadata"].get("namespace") for d in documents if d["kind"] != "ClusterRole"} - {
        None
    } == {namespace}


def test_the_served_manifest_is_the_deploy_steps_inference_service_for_the_candidate():
    from components.deploying import inference_service
    from components.deploying.config import DeployConfig

    (rendered,) = [d for d in render("overlays/serving") if d["kind"] == "InferenceService"]
    container = rendered["spec"]["predictor"]["containers"][0]
    built = inference_service.manifest(
        inference_service.build(
            DeployConfig(
                model_version="1",
                tracking_uri=next(
                    e["value"] for e in container["env"] if e["name"] == "MLFLOW_TRACKING_URI"
                ),
                image=container["image"],
                namespace="team-a",
            )
        )
    )
    # the step names the version it registered; the manifest, whatever holds @candidate
    candidate = "models:/dogs-vs-cats@candidate"
    built["metadata"]["annotations"]["dogs-vs-cats/model-uri"] = candidate
    built["spec"]["predictor"]["containers"][0]["env"][0]["value"] = candidate
    assert rendered == built
    assert container["image"] == "ghcr.io/dogs-vs-cats/dogs-vs-cats:0.1.0"
    assert container["env"][1]["value"] == "http://mlflow.mlflow.svc.cluster.local:5000"


@pytest.mark.parametrize(
    ("directory", "namespace"), [("pipeline", "kubeflow"), ("overlays/profile", "team-a")]
)
def test_the_deploy_step_may_create_and_watch_inference_services(directory, namespace):
    documents = {(d["kind"], d["metadata"]["name"]): d for d in render(directory)}
    rules = rbac_rules(documents["Role", "dogs-vs-cats-deploy"])
    assert {"get", "watch", "create", "patch"} <= rules[("serving.kserve.io", "inferenceservices")]
    assert rules[("apps", "deployments")] == {"get"}  # the Standard mode's rollout, read only
    binding = documents["RoleBinding", "dogs-vs-cats-deploy"]
    assert ("dogs-vs-cats-pipeline") in {name for ns, name in subjects(binding) if ns == namespace}
    assert {ns for ns, _ in subjects(binding)} == {namespace}


def test_a_field_istio_does_not_know_is_caught():
    (policy,) = [
        d for d in render("overlays/serving-profile") if d["kind"] == "AuthorizationPolicy"
    ]
    policy["spec"]["rules"][0]["from"][0]["source"]["namespace"] = ["team-a"]  # not namespaces
    assert authorization_policy_errors(policy) == ["rules[0].from.namespace"]


def test_the_storage_initializer_fetches_what_the_served_manifest_names_as_the_step_would():
    """KServe runs the ClusterStorageContainer whose prefix the predictor's STORAGE_URI
    has: the project's image, fetching through the tracking server the manifest names,
    with the model server's credentials, locked down as every container here."""
    (initializer,) = render("serving-storage")
    (service,) = [d for d in render("overlays/serving") if d["kind"] == "InferenceService"]
    served = service["spec"]["predictor"]["containers"][0]
    env = {e["name"]: e for e in served["env"]}
    (prefix,) = [f["prefix"] for f in initializer["spec"]["supportedUriFormats"]]
    assert env["STORAGE_URI"]["value"].startswith(prefix)
    container = initializer["spec"]["container"]
    assert container["image"] == served["image"]
    assert container["command"] == ["python", "-m", "components.fetch_model"]
    fetching = {e["name"]: e for e in container["env"]}
    assert fetching["MLFLOW_TRACKING_URI"] == env["MLFLOW_TRACKING_URI"]
    assert fetching["MLFLOW_TRACKING_PASSWORD"] == env["MLFLOW_TRACKING_PASSWORD"]
    context = container["securityContext"]
    assert context["runAsNonRoot"] and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"] and set(container["resources"]) == {
        "requests",
        "limits",
    }


def kueue_objects() -> tuple[dict, dict[str, dict], dict]:
    """The shipped ClusterQueue, its flavors by name, and the LocalQueue."""
    docs = render("kueue")
    (cluster_queue,) = [doc for doc in docs if doc["kind"] == "ClusterQueue"]
    (local_queue,) = [doc for doc in docs if doc["kind"] == "LocalQueue"]
    flavors = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ResourceFlavor"}
    return cluster_queue, flavors, local_queue


def test_the_kueue_queue_serves_the_teams_namespace_by_names_the_flags_take():
    cluster_queue, flavors, local_queue = kueue_objects()
    assert local_queue["spec"]["clusterQueue"] == cluster_queue["metadata"]["name"]
    namespace = cluster_queue["spec"]["namespaceSelector"]["matchLabels"]
    assert namespace == {"kubernetes.io/metadata.name": local_queue["metadata"]["namespace"]}
    listed = [f["name"] for g in cluster_queue["spec"]["resourceGroups"] for f in g["flavors"]]
    assert sorted(listed) == sorted(flavors)  # each flavor has a quota, none is missing
    for group in cluster_queue["spec"]["resourceGroups"]:  # Kueue: every flavor, every resource
        for flavor in group["flavors"]:
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    (priority,) = [doc for doc in render("kueue") if doc["kind"] == "WorkloadPriorityClass"]
    Placement(queue_name=local_queue["metadata"]["name"])  # names the flags take
    Placement(priority_class=priority["metadata"]["name"])


@pytest.mark.parametrize(
    ("preset", "flags", "flavor"),
    [
        ("accurate", {}, "gpu-node"),
        ("accurate", {"gpu_resource": "nvidia.com/mig-1g.10gb"}, "mig-node"),
        *(
            (name, {}, "cpu-node")
            for name, values in PRESETS.items()
            if values["hardware"] == "cpu"
        ),
        ("cpu", {"hardware": "gpu"}, "gpu-node"),
        ("accurate", {"hardware": "cpu"}, "cpu-node"),
    ],
)
def test_the_kueue_queue_admits_each_presets_training_on_its_flavor(preset, flags, flavor):
    """Each kind of training the flags make (a preset's placement, a MIG slice, a preset
    moved to other hardware) is admitted by the shipped queue, on the flavor of the nodes
    it is placed on (a stand-in for Kueue's flavor assignment: tests/support/kueue.py)."""
    from components.recipes.recipe import placement_of, recipe_values
    from tests.support.kueue import assign_flavor

    cluster_queue, flavors, _ = kueue_objects()
    place = placement_of(recipe_values(preset), flags)
    requests = {"cpu": place.cpu, "memory": place.memory}
    if place.on_gpu:
        requests[place.gpu_resource] = "1"
    tolerations = [{"key": place.toleration_key, "operator": "Exists", "effect": "NoSchedule"}]
    found = assign_flavor(
        cluster_queue,
        flavors,
        requests,
        tolerations if place.toleration_key else [],
        dict([place.node_label]) if place.node_label else {},
    )
    assert found == flavor


def test_the_kueue_stand_in_refuses_what_the_queue_does_not_cover_or_tolerate():
    cluster_queue, flavors, _ = kueue_objects()
    from tests.support.kueue import assign_flavor

    slice_2g = {"cpu": "1", "memory": "1Gi", "nvidia.com/mig-2g.20gb": "1"}
    assert assign_flavor(cluster_queue, flavors, slice_2g, [], {}) is None  # not covered
    untolerated_gpu = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert assign_flavor(cluster_queue, flavors, untolerated_gpu, [], {}) is None
    too_big = {"cpu": "64", "memory": "1Gi"}
    assert assign_flavor(cluster_queue, flavors, too_big, [], {}) is None


def test_a_kueue_field_in_the_wrong_place_is_caught():
    flavor = kueue_objects()[1]["gpu-node"]
    flavor["spec"]["nodeSelector"] = flavor["spec"].pop("nodeLabels")  # a Pod's name for it
    assert crds.errors(flavor, crds.KUEUE["ResourceFlavor"]) != []
