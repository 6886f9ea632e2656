"""A stand-in for the Kubernetes API that Kubeflow Trainer v2 would answer, on 127.0.0.1.

There is no Kubernetes API server on these machines. This one stores TrainJobs, reports
each Complete or Failed (or never done, on cue) after a first poll with no condition,
serves ClusterTrainingRuntimes by name, lists the JobSet's node-0 pod by the labels
Trainer gives it, serves its log, and records every call. ``on_create`` plays the part
of the job's pods (writing the outputs they would write).
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.support.local_http import JSONHandler, LocalHTTPServer

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBS = re.compile(rf"^{TRAINER}/namespaces/([^/]+)/trainjobs(?:/([^/]+))?$")
RUNTIMES = re.compile(rf"^{TRAINER}/clustertrainingruntimes(?:/([^/]+))?$")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)/log)?$")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig whose current context is ``server`` with a token, as kubectl writes one."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def condition(kind: str, reason: str, message: str) -> dict:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-22T00:00:00Z",
    }


class FakeKubeApi(LocalHTTPServer):
    def __exit__(self, *exc) -> None:
        self._released.set()
        super().__exit__(*exc)

    def __init__(
        self,
        outcome: str | None = "Complete",
        on_create: Callable[[dict], None] = lambda job: None,
        runtimes: tuple[str, ...] = ("torch-distributed", "deepspeed-distributed"),
    ):
        self.outcome = outcome  # None: the job never finishes
        self.unavailable_reads = 0  # the next reads of a TrainJob answered 503
        self.silent_reads = 0  # the next reads of a TrainJob accepted and never answered
        self._released = threading.Event()  # lets silent reads go when the server stops
        self.refuse_creation = False  # answer a TrainJob's creation 422, as admission would
        self.on_create = on_create
        self.runtimes = runtimes
        self.jobs: dict[str, dict] = {}
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.polls: list[float] = []  # when each TrainJob was read
        self.pod_queries: list[str] = []  # label selectors pods were listed by
        self.logs_read: list[tuple[str, str]] = []  # (pod, container)
        self._bind()

    @property
    def url(self) -> str:
        return self.base_url

    def job_status(self, name: str) -> dict:
        self.polls.append(time.monotonic())
        job = self.jobs[name]
        if "status" in job:  # a job a test placed here, as an earlier attempt left it
            return job
        if len(self.polls) < 2 or self.outcome is None:
            return {**job, "status": {"conditions": []}}
        why = {
            "Complete": ("JobSetCompleted", "jobset completed"),
            "Failed": ("FailedJobs", "jobset failed: node-0 exited with code 1"),
        }[self.outcome]
        return {**job, "status": {"conditions": [condition(self.outcome, *why)]}}

    def pods(self, namespace: str, selector: str) -> dict:
        self.pod_queries.append(selector)
        labels = dict(part.split("=", 1) for part in selector.split(","))
        items = [
            {
                "metadata": {"name": f"{name}-node-0-0-x7k2p", "namespace": namespace},
                "status": {"phase": "Succeeded"},
            }
            for name in self.jobs
            if labels.get(JOBSET_LABEL) == name
        ]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _reply(self, status: int, payload, content_type="application/json") -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _not_found(self, what: str) -> None:
                self._reply(
                    404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": what}
                )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not JOBS.match(urlsplit(self.path).path):
                    return self._not_found(self.path)
                if api.refuse_creation:
                    message = "spec.trainer.numNodes: Invalid value"
                    return self._reply(422, {"kind": "Status", "code": 422, "message": message})
                api.jobs[body["metadata"]["name"]] = body
                api.created.append(body)
                api.on_create(body)
                self._reply(201, body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                if (match := JOBS.match(url.path)) and api.unavailable_reads:
                    api.unavailable_reads -= 1
                    return self._reply(503, {"kind": "Status", "code": 503})
                if match and api.silent_reads:
                    api.silent_reads -= 1
                    api._released.wait(timeout=30)
                    return None
                if match:
                    if match.group(2) in api.jobs:
                        return self._reply(200, api.job_status(match.group(2)))
                elif match := RUNTIMES.match(url.path):
                    items = [{"metadata": {"name": name}} for name in api.runtimes]
                    if match.group(1) is None:
                        return self._reply(200, {"items": items, "metadata": {}})
                    if match.group(1) in api.runtimes:
                        return self._reply(200, {"metadata": {"name": match.group(1)}})
                elif (match := PODS.match(url.path)) and match.group(2):
                    api.logs_read.append((match.group(2), query.get("container", [""])[0]))
                    text = f"epoch 1/1 val_accuracy=0.9 ({match.group(2)})\n"
                    return self._reply(200, text.encode(), "text/plain")
                elif match := PODS.match(url.path):
                    return self._reply(200, api.pods(match.group(1), query["labelSelector"][0]))
                self._not_found(url.path)

            def do_DELETE(self) -> None:
                match = JOBS.match(urlsplit(self.path).path)
                if not match or match.group(2) not in api.jobs:
                    return self._not_found(self.path)
                del api.jobs[match.group(2)]
                api.deleted.append(match.group(2))
                self._reply(200, {"kind": "Status", "status": "Success"})

        return Handler


ISVCS = re.compile(
    r"^/apis/serving\.kserve\.io/v1beta1/namespaces/([^/]+)/inferenceservices(?:/([^/]+))?$"
)
DEPLOYMENTS = re.compile(r"^/apis/apps/v1/namespaces/([^/]+)/deployments/([^/]+)$")
MODE = "serving.kserve.io/deploymentMode"


def merge_patch(target: dict, patch: dict) -> dict:
    """RFC 7386: objects merge, null removes, anything else replaces."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


def predictors(service: dict) -> list[dict]:
    """The service's predictor and its canaries' predictors."""
    spec = service.get("spec", {})
    return [spec.get("predictor", {}), *(c["predictor"] for c in spec.get("canary", []))]


def deployment_name(service: str, predictor: str | None) -> str:
    """KServe's ``constants.PredictorServiceName``."""
    return f"{service}-{predictor}-predictor" if predictor else f"{service}-predictor"


def mode_of(service: dict) -> str | None:
    return service["metadata"].get("annotations", {}).get(MODE)


def ready_conditions(service: dict) -> list[str]:
    canary = ["CanaryPredictorReady"] if service["spec"].get("canary") else []
    return ["PredictorReady", *canary, "Ready"]


def canary_refusal(service: dict) -> str | None:
    """KServe 0.20's ``validateCanarySpecs``, the rules a canary of this project can meet."""
    canaries = service.get("spec", {}).get("canary") or []
    if not canaries:
        return None
    if mode_of(service) != "Standard":
        return "canary is only supported in Standard deployment mode"
    stable = service["spec"]["predictor"]
    storage = [
        env
        for container in stable.get("containers", [])
        if container.get("name") == "kserve-container"
        for env in container.get("env", [])
        if env.get("name") == "STORAGE_URI"
    ]
    if not storage and "model" not in stable:
        return (
            "canary requires a stable predictor with a model "
            "(multi-model serving is not supported with canary)"
        )
    names, total = set(), 0
    for i, canary in enumerate(canaries):
        name = canary["predictor"].get("name", "")
        if not name:
            return f"canary[{i}] predictor.name is required"
        if name in names:
            return f'canary predictor.name "{name}" is duplicated'
        if name == stable.get("name"):
            return f'canary predictor.name "{name}" conflicts with stable predictor name'
        names.add(name)
        total += canary["trafficPercent"]
        if canary["predictor"].get("maxReplicas"):
            return f'canary "{name}" must not set maxReplicas (canary uses fixed replicas)'
        if canary["predictor"].get("minReplicas", 0) > stable.get("minReplicas", 1):
            return f'canary "{name}" minReplicas must not exceed stable predictor minReplicas'
    if total > 100:
        return f"sum of canary trafficPercent values ({total}) must be <= 100"
    return None


class FakeKServeApi(LocalHTTPServer):
    """InferenceServices as KServe's controller reports them, on 127.0.0.1.

    Each write bumps the generation; the controller's answer for it comes after
    ``polls_to_settle`` reads: ``"Ready"`` (with a URL), ``"FailedToLoad"`` (KServe's
    modelStatus for a model that does not load) or None (never Ready: its revision waits).
    A service in the Standard mode has a Deployment ``NAME-predictor`` (a named predictor:
    ``NAME-PREDICTOR-predictor``) whose rollout completes ``rollout_polls`` reads after the
    service is Ready; in the Knative mode its status names the predictor's latest created
    and ready revisions.

    KServe 0.20's Standard-mode canaries (``kserve_version`` (0, 20), the default): each
    ``spec.canary`` entry gets a Deployment of its predictor's name and a ready canary
    status, and ``CanaryPredictorReady`` once settled; writes pass the admission rules of
    KServe's ``validateCanarySpecs`` (pkg/apis/serving/v1beta1/inference_service_validation.go
    at v0.20.0), each refusal KServe's own message. An older KServe's CRD has no
    ``spec.canary``: with ``fieldValidation=Strict`` the API server refuses the field, as
    it refuses any a structural schema does not declare.

    Every write sets ``metadata.resourceVersion`` anew; a merge patch that carries one
    other than the stored object's is refused 409 ``Conflict`` with the API server's own
    message, as a precondition (``resourceVersion`` in a patch's metadata) works there.

    Faults on cue: ``answer_all`` (every request answered with that status and a Status
    body whose message is ``said``), ``hang`` (every request accepted and never answered),
    ``malformed_status`` (the status KServe would never write), ``unavailable_reads``,
    ``canary_crashing`` (a canary's predictor never becomes ready: its canary status not
    ready and ``CanaryPredictorReady`` False, as KServe reports a crash-looping pod),
    ``drop_after_patch`` (that many PATCHes applied, then the connection closed with no
    answer) and ``patch_seconds`` (each PATCH held that long before it is applied).
    """

    def __init__(
        self,
        outcome: str | None = "Ready",
        polls_to_settle: int = 2,
        kserve_version: tuple[int, int] = (0, 20),
    ):
        self.outcome, self.polls_to_settle = outcome, polls_to_settle
        self.kserve_version = kserve_version
        self.rollout_polls = 1
        self.services: dict[tuple[str, str], dict] = {}
        self.writes: list[tuple[str, dict]] = []  # ("create" or "patch", body as sent)
        self.deployment_reads = 0
        self.unavailable_reads = 0  # after ``reads_before_hiccup`` good reads, this many 503s
        self.reads_before_hiccup = 0
        self.refuse_writes = False
        self.answer_all: int | None = None
        self.said = ""
        self.hang = False
        self.malformed_status: object = None
        self.canary_crashing = False
        self.drop_after_patch = 0
        self.patch_seconds = 0.0
        self._versions = itertools.count(1000)
        self._writing = threading.Lock()  # the API server applies one write at a time
        self._released = threading.Event()  # lets hung requests go when the server stops
        self._reads_since_write = 0
        self._rollout_reads = 0
        self._bind()

    @property
    def url(self) -> str:
        return self.base_url

    def __exit__(self, *exc) -> None:
        self._released.set()
        super().__exit__(*exc)

    def serving(self, namespace: str, body: dict) -> None:
        """Place a service that already serves, as an earlier deploy (or another team) left it."""
        meta = {**body["metadata"], "generation": 1, "resourceVersion": str(next(self._versions))}
        self.services[namespace, body["metadata"]["name"]] = self._settled(
            {**body, "metadata": meta}, "Ready"
        )

    def _settled(self, service: dict, outcome: str | None) -> dict:
        meta = service["metadata"]
        generation = meta["generation"]
        if outcome == "Ready":
            status = {
                "observedGeneration": generation,
                "url": f"http://{meta['name']}.{meta['namespace']}.example.com",
                "conditions": [
                    {"type": t, "status": "False", "reason": "CrashLoopBackOff"}
                    if t == "CanaryPredictorReady" and self.canary_crashing
                    else {"type": t, "status": "True"}
                    for t in ready_conditions(service)
                ],
                "canaryStatuses": [
                    {
                        "name": c["predictor"]["name"],
                        "ready": not self.canary_crashing,
                        "trafficPercent": c["trafficPercent"],
                    }
                    for c in service["spec"].get("canary", [])
                ],
                "modelStatus": {"transitionStatus": "UpToDate"},
                "components": {
                    "predictor": {
                        "latestCreatedRevision": f"{meta['name']}-predictor-{generation:05}",
                        "latestReadyRevision": f"{meta['name']}-predictor-{generation:05}",
                    }
                },
            }
        elif outcome == "FailedToLoad":
            status = {
                "observedGeneration": generation,
                "conditions": [{"type": "Ready", "status": "False", "reason": "RevisionFailed"}],
                "modelStatus": {
                    "transitionStatus": "BlockedByFailedLoad",
                    "lastFailureInfo": {
                        "reason": "ModelLoadFailed",
                        "message": "no registered model version 7",
                    },
                },
            }
        else:
            status = {
                "observedGeneration": generation,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "RevisionMissing",
                        "message": "Configuration is waiting for a Revision to become ready.",
                    }
                ],
            }
        return {**service, "status": status}

    def report_again(self, key: tuple[str, str]) -> None:
        """The controller's status of a settled service made anew, as it reports a change
        in its pods (after ``canary_crashing`` is set, say)."""
        stored = {k: v for k, v in self.services[key].items() if k != "status"}
        self.services[key] = self._settled(stored, "Ready")

    def read(self, key: tuple[str, str]) -> dict:
        self._reads_since_write += 1
        service = self.services[key]
        if self.malformed_status is not None:
            return {**service, "status": self.malformed_status}
        if "status" in service:
            return service
        if self._reads_since_write < self.polls_to_settle:
            return {**service, "status": {"observedGeneration": 0, "conditions": []}}
        self.services[key] = self._settled(service, self.outcome)
        return self.services[key]

    def deployment(self, namespace: str, name: str) -> dict | None:
        """A Standard-mode predictor's (or canary's) Deployment: rolling out, then rolled out."""
        found = [
            (service, predictor)
            for (ns, _), service in self.services.items()
            if ns == namespace and mode_of(service) == "Standard"
            for predictor in predictors(service)
            if deployment_name(service["metadata"]["name"], predictor.get("name")) == name
        ]
        if not found:
            return None
        ((service, predictor),) = found
        self.deployment_reads += 1
        self._rollout_reads += 1
        done = self._rollout_reads > self.rollout_polls
        replicas = predictor.get("minReplicas", 1)
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
            "status": {
                "observedGeneration": 1,
                "replicas": replicas + (0 if done else 1),
                "updatedReplicas": replicas,
                "availableReplicas": replicas if done else 0,
                "conditions": [],
            },
        }

    def refusal(self, service: dict, strict: bool) -> tuple[int, dict] | None:
        """What the API server (an older KServe's CRD under strict field validation) or
        KServe's admission webhook says to a write, or None when both take it."""
        spec = service.get("spec", {})
        if "canary" in spec and self.kserve_version < (0, 20):
            if not strict:
                return None  # the API server would prune the field and say nothing
            message = (
                'InferenceService in version "v1beta1" cannot be handled as a InferenceService: '
                'strict decoding error: unknown field "spec.canary"'
            )
            return 400, {"kind": "Status", "code": 400, "reason": "BadRequest", "message": message}
        said = canary_refusal(service)
        if said is None:
            return None
        webhook = "inferenceservice.kserve-webhook-server.validator"
        message = f'admission webhook "{webhook}" denied the request: {said}'
        return 422, {"kind": "Status", "code": 422, "reason": "Invalid", "message": message}

    def write(
        self, kind: str, key: tuple[str, str], body: dict, strict: bool = False
    ) -> tuple[int, dict]:
        if self.refuse_writes:
            message = "admission webhook denied the request: spec.predictor: invalid"
            return 422, {"kind": "Status", "code": 422, "message": message}
        with self._writing:
            self.writes.append((kind, body))
            if kind == "create":
                if key in self.services:
                    return 409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"}
                updated = {**body, "metadata": {**body["metadata"], "generation": 1}}
            else:
                old = {k: v for k, v in self.services[key].items() if k != "status"}
                precondition = body.get("metadata", {}).get("resourceVersion")
                if precondition is not None and precondition != old["metadata"]["resourceVersion"]:
                    message = (
                        f"Operation cannot be fulfilled on inferenceservices.serving.kserve.io "
                        f'"{key[1]}": the object has been modified; please apply your changes '
                        "to the latest version and try again"
                    )
                    return 409, {
                        "kind": "Status",
                        "code": 409,
                        "reason": "Conflict",
                        "message": message,
                    }
                updated = merge_patch(old, body)
                updated["metadata"]["generation"] = old["metadata"]["generation"] + 1
            if refused := self.refusal(updated, strict):
                return refused
            if "canary" in updated.get("spec", {}) and self.kserve_version < (0, 20):
                updated["spec"].pop("canary")  # pruned: the schema has no such field
            updated["metadata"]["resourceVersion"] = str(next(self._versions))
            self.services[key] = updated
            self._reads_since_write = self._rollout_reads = 0
            return (201 if kind == "create" else 200), updated

    def _handler(self):
        api = self

        class Handler(JSONHandler):
            def _fault(self) -> bool:
                """Answer as a fault asks, if one is set; whether one was."""
                if api.hang:
                    api._released.wait(timeout=60)
                    return True
                if api.answer_all is not None:
                    status = {"kind": "Status", "code": api.answer_all, "message": api.said}
                    self._reply(api.answer_all, status)
                    return True
                return False

            def _route(self):
                match = ISVCS.match(urlsplit(self.path).path)
                if not match:
                    self._reply(404, {"kind": "Status", "code": 404, "message": self.path})
                    return None
                return match.group(1), match.group(2)

            def _body(self) -> dict:
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

            def do_GET(self) -> None:
                if self._fault():
                    return
                if match := DEPLOYMENTS.match(urlsplit(self.path).path):
                    found = api.deployment(match.group(1), match.group(2))
                    if found is None:
                        return self._reply(404, {"kind": "Status", "reason": "NotFound"})
                    return self._reply(200, found)
                if (key := self._route()) is None:
                    return
                if api.reads_before_hiccup:
                    api.reads_before_hiccup -= 1
                elif api.unavailable_reads:
                    api.unavailable_reads -= 1
                    return self._reply(503, {"kind": "Status", "code": 503})
                if key not in api.services:
                    return self._reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                self._reply(200, api.read(key))

            def do_POST(self) -> None:
                if self._fault() or (route := self._route()) is None:
                    return
                body = self._body()
                key = (route[0], body["metadata"]["name"])
                self._reply(*api.write("create", key, body, self._strict()))

            def do_PATCH(self) -> None:
                if self._fault() or (key := self._route()) is None:
                    return
                if key not in api.services:
                    return self._reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                assert self.headers["Content-Type"] == "application/merge-patch+json"
                body = self._body()
                time.sleep(api.patch_seconds)
                answer = api.write("patch", key, body, self._strict())
                if api.drop_after_patch:  # applied, then the connection lost
                    api.drop_after_patch -= 1
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self._reply(*answer)

            def _strict(self) -> bool:
                query = parse_qs(urlsplit(self.path).query)
                return query.get("fieldValidation") == ["Strict"]

        return Handler
