"""A small stand-in for the Kubernetes API that a Training Operator would answer, on 127.0.0.1.

It stores PyTorchJobs, reports them Running then Succeeded (or Failed, on cue), lists
their pods, serves the master's log, and records deletions. ``on_create`` lets a test
play the part of the job's pods (writing the outputs they would write).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from tests.local_http import LocalHTTPServer

JOBS = re.compile(r"^/apis/kubeflow.org/v1/namespaces/([^/]+)/pytorchjobs(?:/([^/?]+))?")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/?]+)/log)?")


class FakeKubeApi(LocalHTTPServer):
    def __init__(self, outcome: str = "Succeeded", on_create: Callable[[dict], None] = None):
        self.outcome = outcome
        self.on_create = on_create or (lambda job: None)
        self.jobs: dict[str, dict] = {}
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.polls = 0
        self._bind()

    @property
    def url(self) -> str:
        return self.base_url

    def _job_with_status(self, name: str) -> dict:
        self.polls += 1
        state = "Running" if self.polls < 2 else self.outcome
        condition = {
            "type": state,
            "status": "True",
            "reason": state,
            "lastTransitionTime": "2026-11-22T00:00:00Z",
        }
        return {**self.jobs[name], "status": {"conditions": [condition]}}

    def _pods(self, namespace: str) -> dict:
        items = [
            {
                "metadata": {"name": f"{name}-master-0", "namespace": namespace},
                "status": {"phase": "Succeeded"},
            }
            for name in self.jobs
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

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.jobs[body["metadata"]["name"]] = body
                api.created.append(body)
                api.on_create(body)
                self._reply(201, body)

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if (match := JOBS.match(path)) and match.group(2) in api.jobs:
                    self._reply(200, api._job_with_status(match.group(2)))
                elif (match := PODS.match(path)) and match.group(2):
                    self._reply(
                        200,
                        f"epoch 1/1 val_accuracy=0.9 ({match.group(2)})\n".encode(),
                        "text/plain",
                    )
                elif match := PODS.match(path):
                    self._reply(200, api._pods(match.group(1)))
                else:
                    self._reply(404, {"kind": "Status", "code": 404, "message": path})

            def do_DELETE(self) -> None:
                match = JOBS.match(self.path.split("?")[0])
                api.deleted.append(match.group(2))
                self._reply(200, {"kind": "Status", "status": "Success"})

        return Handler
