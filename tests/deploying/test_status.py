"""Reading an InferenceService and its Deployment: what still waits, the URL, bad shapes."""

from __future__ import annotations

import pytest

from components.deploying import status


def deployment(wanted=2, observed=1, replicas=2, updated=2, available=2) -> dict:
    return {
        "metadata": {"generation": 1},
        "spec": {"replicas": wanted},
        "status": {
            "observedGeneration": observed,
            "replicas": replicas,
            "updatedReplicas": updated,
            "availableReplicas": available,
        },
    }


@pytest.mark.parametrize(
    ("found", "pending"),
    [
        (deployment(), ""),
        (deployment(observed=0), "the Deployment's new spec not yet seen by its controller"),
        (deployment(updated=1, replicas=3), "1 of 2 pods updated"),
        (deployment(replicas=3), "1 old pods still terminating"),
        (deployment(available=1), "1 of 2 updated pods available"),
    ],
)
def test_a_rollout_is_complete_as_kubectl_rollout_status_reads_it(found, pending):
    assert status.rollout_pending(found) == pending


def ready(**predictor) -> dict:
    return {
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "components": {"predictor": predictor},
            "address": {"url": "http://dogs-vs-cats.team-a.svc.cluster.local"},
        }
    }


def test_knative_serves_once_its_latest_revision_is_the_ready_one():
    waiting = ready(latestCreatedRevision="p-00002", latestReadyRevision="p-00001")
    assert (
        status.not_serving(waiting, "Knative") == "revision p-00002 not ready yet (serving p-00001)"
    )
    assert status.not_serving(waiting, "Standard") == ""  # the Deployment says it there
    done = ready(latestCreatedRevision="p-00002", latestReadyRevision="p-00002")
    assert status.not_serving(done, "Knative") == ""


def test_the_url_is_the_external_one_else_the_cluster_local_one():
    service = ready()
    assert status.url(service) == "http://dogs-vs-cats.team-a.svc.cluster.local"
    service["status"]["url"] = "http://dogs-vs-cats.team-a.example.com"
    assert status.url(service) == "http://dogs-vs-cats.team-a.example.com"


def test_no_ready_condition_yet_is_pending_not_ready():
    assert status.not_serving({"status": {"conditions": []}}, "Standard") == (
        "Ready not reported yet"
    )


@pytest.mark.parametrize(
    "service",
    [
        {"status": "Ready"},
        {"status": {"conditions": {"Ready": True}}},
        {"status": {"conditions": [{"status": "True"}]}},
    ],
)
def test_a_status_kserve_never_writes_is_one_error(service):
    with pytest.raises(RuntimeError, match="^expected "):
        status.not_serving(service, "Standard")


def test_metadata_of_another_shape_is_one_error():
    with pytest.raises(RuntimeError, match="^expected metadata to be an object"):
        status.labels_of({"metadata": ["x"]})
