"""A small stand-in for the Kubeflow Pipelines v2beta1 REST API, on 127.0.0.1.

It speaks the part of the API that ``kfp run create``/``submit`` and ``kfp.Client`` use
(health, experiments, runs) and keeps what it is sent, for the tests to inspect. As a
multi-user install it wants a bearer token and serves only the profiles' namespaces it
knows, answering 401 and 403 as KFP's API server does behind Kubeflow's auth.
"""

from __future__ import annotations

import json
import threading
from urllib.parse import parse_qs, urlparse

from tests.support.local_http import JSONHandler, LocalHTTPServer

PREFIX = "/apis/v2beta1"
CREATED = "2026-11-22T00:00:00Z"


class FakeKfpApi(LocalHTTPServer):
    def __init__(
        self,
        *,
        token: str | None = None,
        namespaces: set[str] | None = None,
        version: str = "2.17.0",
    ):
        self.token = token
        self.version = version  # the release the health check names (its tag_name)
        self.namespaces = namespaces  # a multi-user install's profiles; None: single-user
        self.experiments: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        self.unknown: list[str] = []
        self.seen: list[str] = []  # every path asked for, in order
        self.hang_after_health = False  # answer the health check, then nothing at all
        self.refuse_with: tuple[int, str] | None = None  # every call but health: this text
        self.next_run_id: str | None = None  # the id the next run gets, as given
        self._released = threading.Event()
        self._bind()

    def __exit__(self, *exc) -> None:
        self._released.set()
        super().__exit__(*exc)

    def refusal(self, authorization: str | None, namespace: str | None) -> tuple[int, dict] | None:
        """401 without the token, 403 for a namespace that is not a known profile."""
        if self.token and authorization != f"Bearer {self.token}":
            return 401, {"error": "Unauthenticated: no valid identity", "code": 16}
        if self.namespaces is not None and namespace not in self.namespaces:
            return 403, {
                "error": f"PermissionDenied: namespace {namespace!r} is not accessible",
                "code": 7,
            }
        return None

    @property
    def endpoint(self) -> str:
        return self.base_url

    def get(self, path: str, query: dict) -> tuple[int, dict]:
        if path == "/healthz":
            return 200, {"multi_user": self.namespaces is not None, "tag_name": self.version}
        if path == "/experiments":
            wanted = json.dumps(query.get("filter", [""])[0])
            namespace = query.get("namespace", [None])[0]
            found = [
                e
                for e in self.experiments.values()
                if e["display_name"] in wanted and e.get("namespace") in (namespace, None, "")
            ]
            return 200, {"experiments": found, "total_size": len(found)} if found else {}
        if path.startswith("/runs/") and path[len("/runs/") :] in self.runs:
            return 200, self.runs[path[len("/runs/") :]]
        return 404, {"error": f"no {path}"}

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        if path == "/experiments":
            experiment = {
                **body,
                "experiment_id": f"exp-{len(self.experiments) + 1}",
                "created_at": CREATED,
                "storage_state": "AVAILABLE",
            }
            self.experiments[experiment["experiment_id"]] = experiment
            return 200, experiment
        if path == "/runs":
            run = {
                **body,
                "run_id": self.next_run_id or f"run-{len(self.runs) + 1}",
                "created_at": CREATED,
                "state": "PENDING",
                "storage_state": "AVAILABLE",
            }
            self.runs[run["run_id"]] = run
            return 200, run
        return 404, {"error": f"no {path}"}

    def _handler(self):
        api = self

        class Handler(JSONHandler):
            def _route(self, method) -> None:
                url = urlparse(self.path)
                if not url.path.startswith(PREFIX):
                    api.unknown.append(self.path)
                    self._reply(404, {"error": "not the v2beta1 API"})
                    return
                path, payload = url.path[len(PREFIX) :], self._payload(url)
                api.seen.append(path)
                if path != "/healthz" and api.hang_after_health:
                    api._released.wait(timeout=60)
                    return
                if path != "/healthz" and api.refuse_with:
                    status, said = api.refuse_with  # as plain text, control characters and all
                    data = said.encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if path != "/healthz":
                    namespace = (
                        payload.get("namespace", [None])[0]
                        if self.command == "GET"
                        else payload.get("namespace") or self._experiment_namespace(payload)
                    )
                    refused = api.refusal(self.headers.get("Authorization"), namespace)
                    if refused:
                        self._reply(*refused)
                        return
                status, payload = method(path, payload)
                if status == 404:
                    api.unknown.append(self.path)
                self._reply(status, payload)

            def _experiment_namespace(self, body: dict) -> str | None:
                experiment = api.experiments.get(body.get("experiment_id", ""), {})
                return experiment.get("namespace")

            def _payload(self, url):
                if self.command == "GET":
                    return parse_qs(url.query)
                length = int(self.headers.get("Content-Length", 0))
                return json.loads(self.rfile.read(length) or b"{}")

            def do_GET(self) -> None:
                self._route(api.get)

            def do_POST(self) -> None:
                self._route(api.post)

        return Handler
