"""A stand-in for the Kubernetes API that Katib (v1beta1) would answer, on 127.0.0.1.

There is no Kubernetes API server or Katib controller on these machines. This one stores
Experiments, refuses a creation as Katib's admission webhook would (on cue), and plays
the controller: ``on_create`` runs the trials in a thread of their own, as the controller
does beside the API (a test runs the train step as each trial's Job would), and says how
each ended; reads report the Experiment Running until they are done, then Succeeded with
Katib's status lists and optimal trial, or Failed. Every call is recorded.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.support.kube_api import condition
from tests.support.local_http import JSONHandler, LocalHTTPServer

EXPERIMENTS = re.compile(
    r"^/apis/kubeflow\.org/v1beta1/namespaces/([^/]+)/experiments(?:/([^/]+))?$"
)


class FakeKatibApi(LocalHTTPServer):
    def __init__(self, on_create: Callable[[dict], dict], failed: bool = False):
        """``on_create(experiment)`` runs its trials and returns Katib's status lists:
        ``succeededTrialList``, ``earlyStoppedTrialList``, ``currentOptimalTrial``."""
        self.on_create, self.failed = on_create, failed
        self.refuse_creation = ""  # a message: answer the creation 400, as the webhook does
        self.experiments: dict[str, dict] = {}
        self.played: dict[str, dict] = {}  # each Experiment's status lists, once it ran
        self.created: list[dict] = []
        self.reads = 0
        self._bind()

    @property
    def url(self) -> str:
        return self.base_url

    def status_of(self, name: str) -> dict:
        self.reads += 1
        experiment = self.experiments[name]
        if self.reads < 2 or name not in self.played:
            return {
                **experiment,
                "status": {"conditions": [condition("Running", "ExperimentRunning", "running")]},
            }
        if self.failed or "error" in self.played[name]:
            message = self.played[name].get("error", "3 trials failed")
            why = condition("Failed", "ExperimentMaxFailedTrialsReached", message)
            return {**experiment, "status": {"conditions": [why]}}
        done = condition("Succeeded", "ExperimentMaxTrialsReached", "max trials reached")
        return {**experiment, "status": {"conditions": [done], **self.played[name]}}

    def play(self, name: str, experiment: dict) -> None:
        try:
            self.played[name] = self.on_create(experiment)
        except Exception as err:  # a trial that failed the test: the Experiment fails with it
            self.played[name] = {"error": f"a trial failed: {err}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not EXPERIMENTS.match(urlsplit(self.path).path):
                    return self._reply(404, {"kind": "Status", "code": 404})
                if api.refuse_creation:
                    webhook = '"validator.experiment.katib.kubeflow.org"'
                    message = (
                        f"admission webhook {webhook} denied the request: {api.refuse_creation}"
                    )
                    return self._reply(400, {"kind": "Status", "code": 400, "message": message})
                api.created.append(body)
                name = body["metadata"]["name"]
                api.experiments[name] = body
                threading.Thread(target=api.play, args=(name, body), daemon=True).start()
                self._reply(201, body)

            def do_GET(self) -> None:
                match = EXPERIMENTS.match(urlsplit(self.path).path)
                if match and match.group(2) in api.experiments:
                    return self._reply(200, api.status_of(match.group(2)))
                self._reply(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

        return Handler
