"""KServe's model server around the classifier, on the address and with the limits asked."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import warnings

import uvicorn
from fastapi import FastAPI
from fastapi.responses import ORJSONResponse
from kserve import ModelServer, errors
from kserve.protocol.rest.server import metrics_handler
from kserve.protocol.rest.v1_endpoints import V1Endpoints, register_v1_endpoints
from kserve.protocol.rest.v2_endpoints import register_v2_endpoints

from components.serving.config import ServeConfig
from components.serving.connections import ConnectionLimits, guarded_protocol
from components.serving.direct import DirectPredict
from components.serving.disconnects import StopWhenClientLeaves
from components.serving.limits import BodyLimit
from components.serving.model import DogsVsCats
from components.serving.routes import RouteGuard

log = logging.getLogger(__name__)
# KServe's error bodies, by exception class, as its own server adds them
ERROR_HANDLERS = {
    errors.InvalidInput: errors.invalid_input_handler,
    errors.InferenceError: errors.inference_error_handler,
    errors.ModelNotFound: errors.model_not_found_handler,
    errors.ModelNotReady: errors.model_not_ready_handler,
    NotImplementedError: errors.not_implemented_error_handler,
    errors.UnsupportedProtocol: errors.unsupported_protocol_error_handler,
    errors.ServerNotLive: errors.server_not_live_handler,
    errors.ServerNotReady: errors.server_not_ready_handler,
    Exception: errors.generic_exception_handler,
}


def application(server: ModelServer, max_body_bytes: int) -> FastAPI:
    """KServe's routes, error bodies and metrics (its public functions, as its own server
    registers them) on an app of this server's, with the limits a client meets: the body
    limit (``limits``), no model repository and a truthful liveness (``routes``), a request
    stopped when its client leaves (``disconnects``), and V1 predict answered without
    FastAPI's routing (``direct``).

    Not KServe's timing middleware: it only logs to kserve.trace, yet sums the process's
    CPU time (getrusage over every thread) twice a request while holding the GIL, a fifth
    of the event loop's time at 32 clients.
    """
    app = FastAPI(
        title="KServe ModelServer", docs_url=None, redoc_url=None,
        default_response_class=ORJSONResponse,  # KServe's own bodies, byte for byte
    )  # fmt: skip
    dataplane, repository = server.dataplane, server.model_repository_extension
    app.add_api_route("/", dataplane.live)
    app.add_api_route("/metrics", metrics_handler, methods=["GET"])
    register_v1_endpoints(app, dataplane, repository)
    register_v2_endpoints(app, dataplane, repository)
    for kind, handler in ERROR_HANDLERS.items():
        app.add_exception_handler(kind, handler)
    # the last added runs first: the route guard, the body limit, the disconnect watch,
    # then V1 predict answered at once
    endpoints = V1Endpoints(dataplane, repository)
    app.add_middleware(DirectPredict, endpoints=endpoints, handlers=app.exception_handlers)
    app.add_middleware(StopWhenClientLeaves)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(RouteGuard, serving=lambda: serving(server))
    return app


def serving(server: ModelServer) -> bool:
    """Whether every model is loaded and ready: what liveness reports."""
    return all(m.ready for m in server.dataplane.model_registry.get_models().values())


def http_server(app: FastAPI, cfg: ServeConfig) -> uvicorn.Server:
    """uvicorn serving ``app`` on ``cfg``'s address, each connection held to time and size
    limits (``connections``: a slow client loses its own slot), as KServe configures it
    otherwise (one worker, no logging setup of uvicorn's own)."""
    limits = ConnectionLimits(
        max_connections=cfg.max_connections,
        max_inflight_bytes=int(cfg.max_inflight_mb * 2**20),
        header_seconds=cfg.header_timeout_seconds,
        body_seconds=cfg.body_timeout_seconds,
        max_header_bytes=cfg.max_header_kb * 1024,
        max_headers=cfg.max_headers,
    )
    config = uvicorn.Config(
        app, host=cfg.host, port=cfg.port, http=guarded_protocol(limits), log_config=None,
        # typed int by uvicorn, which hands it to call_later: a fraction of a second works
        timeout_keep_alive=cfg.idle_timeout_seconds,  # type: ignore[arg-type]
        timeout_graceful_shutdown=5,
    )  # fmt: skip
    return uvicorn.Server(config)


def serve(cfg: ServeConfig) -> None:
    """Load the model, then answer requests until SIGTERM or Ctrl-C.

    ``ModelServer`` holds the model's registry and data plane; the HTTP server runs here
    rather than through ``ModelServer.start``, which binds every address and has no place
    for the limits. gRPC is off: the cluster's InferenceService speaks HTTP.
    """
    # one line a request: uvicorn's access line; not KServe's timing lines besides
    logging.getLogger("kserve.trace").setLevel(logging.WARNING)
    # KServe's response class (its bodies byte for byte), which FastAPI now calls deprecated
    warnings.filterwarnings("ignore", "ORJSONResponse is deprecated")
    model = DogsVsCats(cfg)
    model.load()
    server = ModelServer(
        http_port=cfg.port, enable_grpc=False, workers=1, enable_latency_logging=False
    )
    server.register_model(model)
    model.start()
    http = http_server(application(server, cfg.max_body_bytes), cfg)
    # the imports' and the model's objects, which live as long as the server, out of the
    # collector's sight: its full collections (each walked them all, tens of milliseconds
    # with every request waiting) then count only what requests make
    gc.collect()
    gc.freeze()
    log.info("serving %s as %s on http://%s:%d", cfg.model, model.name, cfg.host, cfg.port)
    # uvicorn stops on SIGINT even where the shell had it ignored (a script's background
    # job), then re-raises it: with Python's own handler that ends in exit status 130
    signal.signal(signal.SIGINT, signal.default_int_handler)
    asyncio.run(http.serve())
