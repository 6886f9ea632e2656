"""The deploy step's life cycle against a stand-in for KServe's API (no Kubernetes API
server runs here): create and wait until it serves in each mode, a canary in Knative, a
controller failure, a timeout, refusals, a hung API, another team's service."""

from __future__ import annotations

import dataclasses
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client as k8s

from components.cluster import kube
from components.deploying import inference_service, release
from components.deploying.config import DeployConfig, RolloutConfig
from tests.support import crds
from tests.support.kube_api import FakeKServeApi

CFG = DeployConfig(
    model_version="2",
    tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
    image="registry.example/dogs-vs-cats@sha256:" + "a" * 64,
    namespace="team-a",
    poll_seconds=0.01,
    timeout_seconds=60,  # a limit for a hang: each test that serves ends when it serves
)
KNATIVE = dataclasses.replace(CFG, deployment_mode="Knative", canary_percent=10)
ROLLOUT = RolloutConfig(namespace="team-a", poll_seconds=0.01, timeout_seconds=60)
KEY = ("team-a", "dogs-vs-cats")


def client(url: str) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = url
    configuration.retries = 0  # as kube.api_client() sets it
    return k8s.ApiClient(configuration)


def served_version(service: dict, predictor: dict | None = None) -> str:
    """The model the (given) predictor's container names, as its args would read."""
    (container,) = (predictor or service["spec"]["predictor"])["containers"]
    (uri,) = [e["value"] for e in container["env"] if e["name"] == "STORAGE_URI"]
    return container["args"][0].replace("$(STORAGE_URI)", uri)


def earlier(cfg: DeployConfig) -> dict:
    return inference_service.manifest(
        inference_service.build(dataclasses.replace(cfg, model_version="1"))
    )


def test_standard_mode_waits_for_the_deployment_to_roll_out_then_returns_the_url():
    with FakeKServeApi() as api:
        api.rollout_polls = 3
        url = release.deploy(CFG, client(api.url))
        ((kind, body),) = api.writes
        stored = api.services[KEY]
    assert url == "http://dogs-vs-cats.team-a.example.com"
    assert kind == "create" and served_version(body) == "--model=models:/dogs-vs-cats/2"
    assert api.deployment_reads == 4  # three reads rolling out, the fourth rolled out
    assert "canaryTrafficPercent" not in body["spec"]["predictor"]
    assert crds.errors({k: v for k, v in stored.items() if k != "status"}) == []


def test_standard_mode_replaces_a_serving_version_with_all_the_traffic():
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(CFG))
        release.deploy(CFG, client(api.url))
        ((kind, body),) = api.writes
    assert kind == "patch" and "canaryTrafficPercent" not in body["spec"]["predictor"]
    assert served_version(body) == "--model=models:/dogs-vs-cats/2"


def test_knative_mode_brings_a_new_version_in_as_a_canary():
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(KNATIVE))
        url = release.deploy(KNATIVE, client(api.url))
        ((kind, body),) = api.writes
        stored = {k: v for k, v in api.services[KEY].items() if k != "status"}
    assert kind == "patch" and url.startswith("http://dogs-vs-cats.team-a")
    assert body["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert api.deployment_reads == 0  # Knative's readiness is its revisions'
    assert stored["metadata"]["generation"] == 2 and crds.errors(stored) == []


def test_standard_mode_canary_is_created_made_ready_promoted_and_rolled_back():
    """KServe 0.20's Standard-mode canary, walked through on the stand-in for its API
    (its admission rules and status as KServe's code has them): version 1 serves; 2
    comes in as a canary at 10%, ready by ``CanaryPredictorReady`` and its own Deployment;
    it is promoted (its predictor, name and all, becomes the service's); 3 comes in dark
    (0%) and is rolled back, 2 serving throughout."""
    standard = dataclasses.replace(CFG, canary_percent=10)
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(standard))
        url = release.deploy(standard, client(api.url))
        assert url.startswith("http://dogs-vs-cats.team-a")
        stored = api.services[KEY]
        (entry,) = stored["spec"]["canary"]
        assert (entry["predictor"]["name"], entry["trafficPercent"]) == ("v2", 10)
        assert served_version(stored) == "--model=models:/dogs-vs-cats/1"  # still serving
        assert served_version(stored, entry["predictor"]) == "--model=models:/dogs-vs-cats/2"
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions["CanaryPredictorReady"] == "True"
        spec = {k: v for k, v in stored.items() if k != "status"}
        assert crds.errors(spec) == []  # as the strict schema of KServe 0.20 takes it
        read_before = api.deployment_reads

        url = release.promote(ROLLOUT, client(api.url))
        stored = api.services[KEY]
        assert "canary" not in stored["spec"] and stored["spec"]["predictor"]["name"] == "v2"
        assert served_version(stored) == "--model=models:/dogs-vs-cats/2"
        assert stored["spec"]["predictor"]["maxReplicas"] == 3  # the service's scaling kept
        annotations = stored["metadata"]["annotations"]
        assert annotations["dogs-vs-cats/model-uri"] == "models:/dogs-vs-cats/2"
        assert "dogs-vs-cats/canary-model-uri" not in annotations
        assert api.deployment_reads > read_before  # the kept Deployment, v2's, read

        dark = dataclasses.replace(CFG, model_version="3", canary_percent=0)
        release.deploy(dark, client(api.url))
        (entry,) = api.services[KEY]["spec"]["canary"]
        assert (entry["predictor"]["name"], entry["trafficPercent"]) == ("v3", 0)
        release.rollback(ROLLOUT, client(api.url))
        stored = api.services[KEY]
        assert "canary" not in stored["spec"]
        assert served_version(stored) == "--model=models:/dogs-vs-cats/2"
        assert stored["metadata"]["annotations"]["dogs-vs-cats/model-uri"] == (
            "models:/dogs-vs-cats/2"
        )
        with pytest.raises(RuntimeError, match="runs no canary to promote"):
            release.promote(ROLLOUT, client(api.url))


def test_a_kserve_without_standard_mode_canaries_refuses_one_with_the_reason():
    """Before 0.20 the CRD has no spec.canary: the step writes with strict field validation,
    so the API server refuses the field rather than drop it and roll out the canary whole."""
    standard = dataclasses.replace(CFG, canary_percent=10)
    with FakeKServeApi(kserve_version=(0, 19)) as api:
        api.serving("team-a", earlier(standard))
        with pytest.raises(RuntimeError) as refused:
            release.deploy(standard, client(api.url))
        assert served_version(api.services[KEY]) == "--model=models:/dogs-vs-cats/1"
    assert str(refused.value).startswith(
        "this cluster's KServe does not know spec.canary, the Standard mode's canary "
        "(KServe 0.20 and later): upgrade KServe, or deploy with canary_percent 100"
    )


def test_a_serving_predictor_that_does_not_name_its_model_gets_no_canary():
    """KServe refuses a canary beside a custom predictor with no STORAGE_URI (as a service
    deployed before the step named it would be); the step says so before writing."""
    standard = dataclasses.replace(CFG, canary_percent=10)
    old = earlier(standard)
    (container,) = old["spec"]["predictor"]["containers"]
    container["env"] = [e for e in container["env"] if e["name"] != "STORAGE_URI"]
    container["args"][0] = "--model=models:/dogs-vs-cats/1"
    with FakeKServeApi() as api:
        api.serving("team-a", old)
        with pytest.raises(RuntimeError, match="with canary_percent 100, then the canary"):
            release.deploy(standard, client(api.url))
        assert api.writes == []


def test_knative_mode_promotes_and_rolls_back_its_canary_as_kserve_documents():
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(KNATIVE))
        release.deploy(KNATIVE, client(api.url))
        release.promote(ROLLOUT, client(api.url))
        assert "canaryTrafficPercent" not in api.services[KEY]["spec"]["predictor"]
        assert api.services[KEY]["metadata"]["annotations"]["dogs-vs-cats/model-uri"] == (
            "models:/dogs-vs-cats/2"
        )
        release.deploy(dataclasses.replace(KNATIVE, model_version="3"), client(api.url))
        release.rollback(ROLLOUT, client(api.url))
        stored = api.services[KEY]
    # all the traffic back on the revision rolled out last, 2's
    assert stored["spec"]["predictor"]["canaryTrafficPercent"] == 0
    assert stored["metadata"]["annotations"]["dogs-vs-cats/model-uri"] == "models:/dogs-vs-cats/2"
    assert crds.errors({k: v for k, v in stored.items() if k != "status"}) == []


def test_knative_mode_puts_the_same_version_back_with_all_the_traffic():
    with FakeKServeApi() as api:
        api.serving("team-a", inference_service.manifest(inference_service.build(KNATIVE)))
        release.deploy(KNATIVE, client(api.url))
        ((kind, body),) = api.writes
    assert kind == "patch" and body["spec"]["predictor"]["canaryTrafficPercent"] == 100


def test_another_teams_service_under_the_name_is_refused_and_left_untouched():
    foreign = earlier(CFG)
    del foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    with FakeKServeApi() as api:
        api.serving("team-a", foreign)
        with pytest.raises(RuntimeError) as refused:
            release.deploy(CFG, client(api.url))
        assert api.writes == []
    assert "was not created by this deploy step" in str(refused.value)
    assert (
        "`kubectl label inferenceservice dogs-vs-cats -n team-a "
        "app.kubernetes.io/managed-by=dogs-vs-cats-deploy`" in str(refused.value)
    )


def test_a_service_in_the_other_mode_is_refused_before_kserve_would():
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(KNATIVE))
        with pytest.raises(RuntimeError, match="serves in KServe's Knative mode"):
            release.deploy(CFG, client(api.url))
        assert api.writes == []


def test_a_model_that_does_not_load_fails_with_kserves_reason():
    with FakeKServeApi(outcome="FailedToLoad") as api:
        with pytest.raises(RuntimeError) as failed:
            release.deploy(CFG, client(api.url))
    assert str(failed.value) == (
        "KServe could not serve models:/dogs-vs-cats/2 as InferenceService team-a/dogs-vs-cats: "
        "BlockedByFailedLoad: ModelLoadFailed: no registered model version 7"
    )


class PolledDeadline(kube.Deadline):
    """A deadline whose time passes only in its sleeps between polls: it runs out after the
    same polls on a loaded machine as on an idle one."""

    slept = 0.0

    def left(self) -> float:
        return round(self.seconds - self.slept, 6)  # no sliver of a second left by rounding

    def sleep(self, seconds: float) -> None:
        self.slept += max(0.0, min(seconds, self.left()))


def test_a_service_never_ready_times_out_naming_its_conditions(monkeypatch):
    monkeypatch.setattr(release, "Deadline", PolledDeadline)
    with FakeKServeApi(outcome=None) as api:
        with pytest.raises(TimeoutError) as late:
            release.deploy(
                dataclasses.replace(CFG, timeout_seconds=3, poll_seconds=0.5), client(api.url)
            )
    assert str(late.value) == (
        "InferenceService team-a/dogs-vs-cats was not serving within 3 s: "
        "Ready RevisionMissing: Configuration is waiting for a Revision to become ready."
    )


def test_a_refused_resource_is_one_error_naming_it_and_an_api_hiccup_is_waited_out():
    with FakeKServeApi() as api:
        api.refuse_writes = True
        with pytest.raises(
            kube.ApiError, match="create InferenceService team-a/dogs-vs-cats: .* 422"
        ):
            release.deploy(CFG, client(api.url))
        api.refuse_writes, api.unavailable_reads = False, 0
        release.deploy(CFG, client(api.url))  # created
        api.reads_before_hiccup, api.unavailable_reads = 1, 2  # while it waits
        assert release.deploy(CFG, client(api.url)).startswith("http://")  # 503s survived
        api.reads_before_hiccup, api.unavailable_reads = 0, 1  # before anything is written
        with pytest.raises(kube.ApiError, match="503"):
            release.deploy(CFG, client(api.url))


def test_an_api_that_accepts_and_never_answers_is_bounded_by_the_deadline():
    with FakeKServeApi() as api:
        api.hang = True
        # the deadline's own error: the stand-in holds the request for a minute
        with pytest.raises(TimeoutError, match="within 1 s to read InferenceService"):
            release.deploy(dataclasses.replace(CFG, timeout_seconds=1), client(api.url))


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, "answered 401 Unauthorized: Unauthorized; the credentials were refused"),
        (403, "answered 403 Forbidden: .*; this identity may not do that here"),
        (500, "answered 500 Internal Server Error: etcdserver: request timed out"),
    ],
)
def test_a_refusal_is_one_line_naming_the_request_and_what_to_try(status, expected):
    said = {401: "Unauthorized", 403: 'cannot get resource "inferenceservices"'}
    with FakeKServeApi() as api:
        api.answer_all = status
        api.said = said.get(status, "etcdserver: request timed out")
        with pytest.raises(kube.ApiError, match=expected) as refused:
            release.deploy(dataclasses.replace(CFG, timeout_seconds=2), client(api.url))
    assert "read InferenceService team-a/dogs-vs-cats" in str(refused.value)


def test_text_from_the_api_cannot_forge_lines_or_move_the_terminal():
    with FakeKServeApi() as api:
        api.answer_all = 403
        api.said = "denied\nerror: all fine, deployed\x1b[2J\u202e"
        with pytest.raises(kube.ApiError) as refused:
            release.deploy(CFG, client(api.url))
    message = str(refused.value)
    assert "\n" not in message and "\x1b" not in message and "\u202e" not in message
    assert "\\x1b[2J" in message and "\\u202e" in message


def test_a_refused_port_is_one_line():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(kube.ApiError, match="the Kubernetes API did not answer"):
        release.deploy(
            dataclasses.replace(CFG, timeout_seconds=0.5), client(f"http://127.0.0.1:{port}")
        )


@pytest.mark.parametrize(
    "status",
    [
        "Ready",
        ["Ready"],
        {"observedGeneration": "2"},
        {"observedGeneration": 9, "conditions": "Ready"},
        {"observedGeneration": 9, "conditions": ["Ready"]},
        {"observedGeneration": 9, "conditions": [{"type": "Ready", "status": "True"}], "url": 7},
    ],
)
def test_a_status_kserve_would_never_write_is_refused_in_one_line(status):
    with FakeKServeApi() as api:
        api.malformed_status = status
        with pytest.raises(RuntimeError, match="^expected .* found"):
            release.deploy(dataclasses.replace(KNATIVE, canary_percent=100), client(api.url))


def test_a_password_in_the_tracking_uri_is_neither_written_in_nor_shown(caplog):
    caplog.set_level("INFO")
    with_password = "http://bob:p@ss-w0rd@mlflow.mlflow.svc.cluster.local:5000"
    with FakeKServeApi() as api:
        release.deploy(dataclasses.replace(CFG, tracking_uri=with_password), client(api.url))
        ((_, body),) = api.writes
    (container,) = body["spec"]["predictor"]["containers"]
    assert "ss-w0rd" not in str(body) and "ss-w0rd" not in caplog.text
    assert {"name": "MLFLOW_TRACKING_URI", "value": CFG.tracking_uri} in container["env"]
    assert "reads them from the secret dogs-vs-cats-mlflow" in caplog.text


@pytest.mark.parametrize(
    "secret_part",
    ["?%70assword=s3cret-pw", "#password=s3cret-pw", "?jwt=s3cret-pw", ";jwt=s3cret-pw"],
)
def test_a_query_or_fragment_in_the_tracking_uri_is_neither_written_in_nor_shown(
    secret_part, caplog
):
    """Whatever its keys are called: the URI's parts decide, not a list of key names."""
    caplog.set_level("INFO")
    with FakeKServeApi() as api:
        uri = f"http://mlflow.mlflow.svc.cluster.local:5000/{secret_part}"
        with pytest.raises(ValueError, match="expected the tracking URI as http") as refused:
            release.deploy(dataclasses.replace(CFG, tracking_uri=uri), client(api.url))
        assert api.writes == [] and api.services == {}
    assert "s3cret-pw" not in caplog.text + str(refused.value)


def test_a_tracking_uri_no_pod_could_use_is_refused_before_any_request():
    with FakeKServeApi() as api:
        local = dataclasses.replace(CFG, tracking_uri="sqlite:///mlflow.db")
        with pytest.raises(ValueError, match="expected the tracking URI as http"):
            release.deploy(local, client(api.url))
        assert api.writes == [] and api.services == {}


def with_a_canary(api: FakeKServeApi) -> None:
    """Version 1 serving, version 2 added beside it as a Standard-mode canary at 10%."""
    standard = dataclasses.replace(CFG, canary_percent=10)
    api.serving("team-a", earlier(standard))
    release.deploy(standard, client(api.url))


def test_a_canary_that_does_not_serve_is_never_promoted_and_can_still_be_rolled_back():
    """KServe reports the canary's predictor crash-looping (``CanaryPredictorReady``
    False): promote refuses and writes nothing, so the working predictor stays, and
    rollback still finds the canary to remove."""
    with FakeKServeApi() as api:
        with_a_canary(api)
        api.canary_crashing = True  # its pod crash-loops since
        api.report_again(KEY)
        writes = len(api.writes)
        with pytest.raises(
            RuntimeError,
            match=r"not promoting models:/dogs-vs-cats/2 .*: its canary does not serve \(canary v2",
        ):
            release.promote(ROLLOUT, client(api.url))
        assert len(api.writes) == writes
        assert served_version(api.services[KEY]) == "--model=models:/dogs-vs-cats/1"
        api.canary_crashing = False
        release.rollback(ROLLOUT, client(api.url))
        assert "canary" not in api.services[KEY]["spec"]


def test_a_promote_and_a_rollback_at_once_cannot_both_land():
    """Each PATCH held 2 s by the API server: both read the same version, and the
    precondition (its resourceVersion) lets one write land; the other is refused, saying
    what the service now serves, and the service's predictor is the one its annotation
    names."""
    with FakeKServeApi() as api:
        with_a_canary(api)
        api.patch_seconds = 2.0
        slow = dataclasses.replace(ROLLOUT, timeout_seconds=20)
        with ThreadPoolExecutor(2) as pool:
            ends = [
                pool.submit(end, slow, client(api.url))
                for end in (release.promote, release.rollback)
            ]
            outcomes = [future.exception() for future in ends]
        refused = [err for err in outcomes if err is not None]
        assert len(refused) == 1 and "changed while this step ran" in str(refused[0])
        stored = api.services[KEY]
        said = stored["metadata"]["annotations"]["dogs-vs-cats/model-uri"]
        assert served_version(stored) == f"--model={said}" and "canary" not in stored["spec"]


def test_a_connection_dropped_after_an_applied_update_is_read_back_not_called_a_failure(caplog):
    with FakeKServeApi() as api:
        with_a_canary(api)
        api.drop_after_patch = 1
        url = release.promote(ROLLOUT, client(api.url))
    assert url.startswith("http://dogs-vs-cats.team-a")
    assert served_version(api.services[KEY]) == "--model=models:/dogs-vs-cats/2"
    assert "no answer to the update, but reading it back, it landed" in caplog.text


def test_a_canary_for_a_service_that_is_not_ready_is_refused_not_rolled_out_whole():
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(CFG))
        api.services[KEY]["status"]["conditions"] = [
            {"type": "Ready", "status": "False", "reason": "RevisionMissing"}
        ]
        with pytest.raises(
            RuntimeError, match="is not Ready .* cannot run beside it as a canary at 10%"
        ):
            release.deploy(dataclasses.replace(CFG, canary_percent=10), client(api.url))
        assert api.writes == []


def test_a_dark_launch_says_the_serving_version_keeps_all_the_traffic(caplog):
    with FakeKServeApi() as api:
        api.serving("team-a", earlier(CFG))
        caplog.set_level("INFO")
        release.deploy(dataclasses.replace(CFG, canary_percent=0), client(api.url))
    assert (
        "serves models:/dogs-vs-cats/1, with models:/dogs-vs-cats/2 as its canary (none of the "
        "traffic: a dark launch), at http://" in caplog.text
    )


def test_a_canary_removed_by_hand_from_the_spec_is_one_line_on_promote():
    with FakeKServeApi() as api:
        with_a_canary(api)
        api.services[KEY]["spec"].pop("canary")
        with pytest.raises(
            RuntimeError, match=r"spec.canary holds 0 predictors \(changed by hand\?\)"
        ):
            release.promote(ROLLOUT, client(api.url))
