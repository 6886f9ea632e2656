"""The Katib Experiment: Katib's own models, its webhook's rules, a trial Kubernetes runs."""

import copy
import dataclasses
import json

import kubernetes_validate
import pytest
import yaml
from kubeflow import katib

from components.cluster.placement import GPU, Placement
from components.recipes.presets import ON_GPU
from components.train import build_parser
from components.training.config import TrainConfig
from components.tuning import webhook
from components.tuning.config import TuneConfig
from components.tuning.experiment import (
    CONTAINER,
    ExperimentTarget,
    build_experiment,
    experiment_name,
    to_manifest,
)
from components.tuning.search_space import SEARCH_SPACE, searched
from tests.conftest import REPO
from tests.test_manifests import K8S_VERSION

TARGET = ExperimentTarget(
    name="dogs-vs-cats-tune", image="registry.example/dvc-cuda@sha256:abc", namespace="team-a",
    tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000", parent_run_id="abc123",
    placement=Placement(**ON_GPU),
)  # fmt: skip
RECIPE = TrainConfig(data="-", output="-", model="compact_cnn", epochs=12, schedule="onecycle")


@pytest.fixture(scope="module")
def manifest() -> dict:
    return to_manifest(build_experiment(TuneConfig(), TARGET, RECIPE, SEARCH_SPACE))


def trial_job(manifest: dict, values: dict[str, str]) -> dict:
    """The Job Katib would create for a trial given ``values``: every placeholder replaced."""
    text = json.dumps(manifest["spec"]["trialTemplate"]["trialSpec"])
    for parameter in manifest["spec"]["trialTemplate"]["trialParameters"]:
        text = text.replace(f"${{trialParameters.{parameter['name']}}}", values[parameter["name"]])
    return json.loads(text)


VALUES = {"trialName": "dogs-vs-cats-tune-x7k2pq9d", "lr": "0.0031", "weight_decay": "0.002",
          "label_smoothing": "0.05", "min_crop_area": "0.5", "batch_size": "128"}  # fmt: skip


def test_the_experiment_passes_the_webhooks_rules_and_round_trips_through_katibs_models(manifest):
    assert webhook.validate(manifest) == []
    client = katib.ApiClient()
    typed = client._ApiClient__deserialize(copy.deepcopy(manifest), "V1beta1Experiment")
    assert isinstance(typed, katib.V1beta1Experiment)
    assert client.sanitize_for_serialization(typed) == manifest


def test_the_experiment_is_of_the_api_katibs_crd_serves(manifest):
    crd = yaml.safe_load(
        (REPO / "tests/fixtures/crds/katib.kubeflow.org_experiment.yaml").read_text()
    )
    served = {f"{crd['spec']['group']}/{v['name']}" for v in crd["spec"]["versions"] if v["served"]}
    assert manifest["apiVersion"] in served and manifest["kind"] == crd["spec"]["names"]["kind"]


def test_the_search_maximizes_val_accuracy_learning_from_trials_and_stops_by_the_median(manifest):
    spec = manifest["spec"]
    assert spec["objective"]["objectiveMetricName"] == "val_accuracy"
    assert spec["objective"]["type"] == "maximize"
    assert spec["algorithm"]["algorithmName"] == "tpe"
    assert spec["earlyStopping"]["algorithmName"] == "medianstop"
    settings = {s["name"]: s["value"] for s in spec["earlyStopping"]["algorithmSettings"]}
    assert settings == {"min_trials_required": "3", "start_step": "3"}
    assert spec["metricsCollectorSpec"]["collector"]["kind"] == "StdOut"
    assert [p["name"] for p in spec["parameters"]] == [d.name for d in SEARCH_SPACE]


def test_a_trial_is_a_job_kubernetes_accepts_placed_on_a_gpu_node_as_the_train_task(manifest):
    job = trial_job(manifest, VALUES)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == CONTAINER
    assert container["resources"]["limits"][GPU] == "1"
    placement = TARGET.placement
    assert pod["tolerations"] == [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["nodeSelector"] == dict([placement.node_label])
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    assert pod["serviceAccountName"] == "dogs-vs-cats-pipeline"
    secrets = {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if "valueFrom" in e}
    assert secrets == {placement.s3_secret, placement.mlflow_secret}
    assert all(
        e["valueFrom"]["secretKeyRef"]["optional"] for e in container["env"] if "valueFrom" in e
    )
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "sidecar.istio.io/inject": "false"
    }
    assert "runAsNonRoot" not in pod["securityContext"]  # Katib's collector sidecar runs as root


def test_the_trials_values_reach_the_train_step_as_its_own_flags(manifest):
    container = trial_job(manifest, VALUES)["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "components.train"]
    args = build_parser().parse_args(container["args"])
    assert (args.lr, args.weight_decay, args.batch_size) == (0.0031, 0.002, 128)
    assert (args.label_smoothing, args.min_crop_area) == (0.05, 0.5)
    assert (args.model, args.epochs, args.schedule) == ("compact_cnn", 12, "onecycle")
    assert args.trial == VALUES["trialName"] and args.metrics_stdout
    assert args.parent_run_id == "abc123" and not args.resume and args.checkpoint_uri is None
    assert args.data == "/shared/dogs-vs-cats-tune/arrays"
    assert args.output == f"/shared/dogs-vs-cats-tune/trials/{VALUES['trialName']}"


def test_a_field_given_one_value_is_fixed_not_searched():
    space = searched({"lr": 0.004, "batch_size": 100}, "bn_cnn")
    manifest = to_manifest(build_experiment(TuneConfig(), TARGET, RECIPE, space))
    assert [p["name"] for p in manifest["spec"]["parameters"]] == [
        "weight_decay", "label_smoothing", "min_crop_area"]  # fmt: skip


@pytest.mark.parametrize("name", ["Tune", "9tune", "tune_x", "t" * 41, "tune-"])
def test_an_experiment_name_katib_or_its_trials_pods_would_refuse_is_refused(name):
    with pytest.raises(ValueError, match="expected the experiment's name"):
        ExperimentTarget(name=name, image="i", tracking_uri="http://m:5000")


def test_each_kfp_run_gets_an_experiment_name_katib_accepts():
    name = experiment_name("0F3A2B1C-9D8E-4F7A-B6C5-D4E3F2A1B0C9-extra-long")
    assert ExperimentTarget(name=name, image="i", tracking_uri="http://m:5000").name == name


def test_each_trial_joins_the_teams_kueue_queue_on_the_gpu_resource_asked_for():
    mig = "nvidia.com/mig-1g.10gb"
    place = Placement(
        **{**ON_GPU, "queue_name": "team-a-gpu", "priority_class": "high", "gpu_resource": mig}
    )
    target = dataclasses.replace(TARGET, placement=place)
    manifest = to_manifest(build_experiment(TuneConfig(), target, RECIPE, SEARCH_SPACE))
    assert webhook.validate(manifest) == []
    job = trial_job(manifest, VALUES)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    assert job["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "team-a-gpu",
        "kueue.x-k8s.io/priority-class": "high",
    }
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"][mig] == "1"
    assert GPU not in container["resources"]["limits"]
