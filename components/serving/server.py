"""KServe's model server around the classifier, on the address and with the limits asked."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import warnings

from fastapi import FastAPI
from kserve import ModelServer
from kserve.constants.constants import FASTAPI_APP_IMPORT_STRING
from kserve.protocol.rest.server import RESTServer
from kserve.protocol.rest.v1_endpoints import V1Endpoints

from components.serving.config import ServeConfig
from components.serving.connections import ConnectionLimits, guarded_protocol
from components.serving.direct import DirectPredict
from components.serving.disconnects import StopWhenClientLeaves
from components.serving.limits import BodyLimit
from components.serving.model import DogsVsCats
from components.serving.routes import RouteGuard

log = logging.getLogger(__name__)


class _LimitedRESTServer(RESTServer):
    """KServe's REST server (its FastAPI app, V1 and v2 routes, error bodies, metrics) on
    ``host``, with the limits a client meets: each connection's deadlines and sizes
    (``connections``), the body limit (``limits``), no model repository and a truthful
    liveness (``routes``), a request stopped when its client leaves (``disconnects``),
    and V1 predict answered without FastAPI's routing (``direct``)."""

    def __init__(self, server: ModelServer, cfg: ServeConfig):
        super().__init__(
            FASTAPI_APP_IMPORT_STRING,
            server.dataplane,
            server.model_repository_extension,
            cfg.port,
            grace_period=5,
        )
        self.config.host = cfg.host  # KServe's own binds 0.0.0.0 only
        # each connection held to time and size limits: a slow client loses its own slot
        limits = ConnectionLimits(
            max_connections=cfg.max_connections,
            header_seconds=cfg.header_timeout_seconds,
            body_seconds=cfg.body_timeout_seconds,
            max_header_bytes=cfg.max_header_kb * 1024,
            max_headers=cfg.max_headers,
        )
        self.config.http = guarded_protocol(limits)
        self.config.timeout_keep_alive = cfg.idle_timeout_seconds
        self.max_body_bytes = cfg.max_body_bytes

    def _add_middlewares(self, app: FastAPI) -> None:
        # not KServe's own: its timing middleware only logs to kserve.trace, silenced in
        # serve(), yet sums the process's CPU time (getrusage over every thread) twice a
        # request while holding the GIL: a fifth of the event loop's time at 32 clients.
        # The last added runs first: the route guard, the body limit, the disconnect
        # watch, then V1 predict answered at once
        endpoints = V1Endpoints(self.dataplane, self.model_repository_extension)
        app.add_middleware(DirectPredict, endpoints=endpoints, handlers=app.exception_handlers)
        app.add_middleware(StopWhenClientLeaves)
        app.add_middleware(BodyLimit, max_bytes=self.max_body_bytes)
        app.add_middleware(RouteGuard, serving=self.serving)

    def serving(self) -> bool:
        """Whether every model is loaded and ready: what liveness reports."""
        return all(m.ready for m in self.dataplane.model_registry.get_models().values())


def serve(cfg: ServeConfig) -> None:
    """Load the model, then answer requests until SIGTERM or Ctrl-C.

    ``ModelServer`` holds the model's registry and data plane; its REST server runs here
    rather than through ``ModelServer.start``, which binds every address and has no place
    for a body limit. gRPC is off: the cluster's InferenceService speaks HTTP.
    """
    # one line a request: uvicorn's access line; not KServe's timing lines besides
    logging.getLogger("kserve.trace").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", "ORJSONResponse is deprecated")  # inside KServe
    model = DogsVsCats(cfg)
    model.load()
    server = ModelServer(
        http_port=cfg.port, enable_grpc=False, workers=1, enable_latency_logging=False
    )
    server.register_model(model)
    model.start()
    rest = _LimitedRESTServer(server, cfg)
    # the imports' and the model's objects, which live as long as the server, out of the
    # collector's sight: its full collections (each walked them all, tens of milliseconds
    # with every request waiting) then count only what requests make
    gc.collect()
    gc.freeze()
    log.info("serving %s as %s on http://%s:%d", cfg.model, model.name, cfg.host, cfg.port)
    # uvicorn stops on SIGINT even where the shell had it ignored (a script's background
    # job), then re-raises it: with Python's own handler that ends in exit status 130
    signal.signal(signal.SIGINT, signal.default_int_handler)
    asyncio.run(rest.start())
