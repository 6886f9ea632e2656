"""The serve step's schema: which model, where it listens, what a request may hold."""

from __future__ import annotations

from dataclasses import dataclass

from components.core.names import SCORING_RUNTIMES
from components.core.schema import LOCAL, setting

MODEL_NAME = "dogs-vs-cats"  # the name in KServe's routes: /v1/models/dogs-vs-cats:predict
MOST_BODY_MB = 1024.0  # a request body past a GiB is no photo upload
MOST_COUNT = 10_000  # photos a request, photos a batch, connections at once
MOST_PASSES = 256  # forward passes at once: a thread each


@dataclass(frozen=True)
class ServeConfig:
    """What ``python -m components.serve`` loads and how much one request may ask."""

    model: str = setting(
        help="train output directory, an MLflow model's folder (what components.fetch_model "
        "writes), or an MLflow model URI such as models:/dogs-vs-cats@candidate or "
        "runs:/RUN_ID/model",
        role=LOCAL,
    )
    host: str = setting(
        "127.0.0.1",
        "address to listen on: this machine only; 0.0.0.0 for every address (a pod's "
        "InferenceService passes it)",
        role=LOCAL,
    )
    port: int = setting(8080, "HTTP port (KServe's default)", role=LOCAL)
    max_body_mb: float = setting(
        8.0,
        "largest request body in MiB; a larger one is refused with 413 before it is read "
        "whole (a 6 MB photo, or 32 of 180 KB, base64-encoded)",
        role=LOCAL,
    )
    max_instances: int = setting(64, "most photos in one request", role=LOCAL)
    max_request_megapixels: float = setting(
        200.0,
        "most pixels the photos of one request may decode to together, in millions (a "
        "JPEG counted at the reduced size it is decoded at): the decode work one request "
        "may take",
        role=LOCAL,
    )
    max_connections: int = setting(
        32,
        "requests served at once, each from its whole head to its answer's end (silent and "
        "idle connections hold none); another is answered 503 at once",
        role=LOCAL,
    )
    max_inflight_mb: float = setting(
        48.0,
        "MiB of request bodies served at once, all connections together (each holds several "
        "times its body while served: with it the pretrained net's server stays under nine "
        "tenths of its pod's 2 GiB); a request past it is answered 503 with Retry-After",
        role=LOCAL,
    )
    header_timeout_seconds: float = setting(
        10.0,
        "time a client has to send a request's head (an idle or trickling connection is "
        "answered 408 and closed)",
        role=LOCAL,
    )
    body_timeout_seconds: float = setting(
        30.0, "time a client has to send a request's body once its head is in", role=LOCAL
    )
    idle_timeout_seconds: float = setting(
        5.0, "how long a kept-alive connection may wait for its next request", role=LOCAL
    )
    max_header_kb: int = setting(
        64, "largest request head (request line and headers) in KiB; larger is 431", role=LOCAL
    )
    max_headers: int = setting(100, "most headers a request may carry; more is 431", role=LOCAL)
    max_batch: int = setting(
        64, "most photos of concurrent requests run through the network at once", role=LOCAL
    )
    batch_wait_ms: float = setting(
        2.0, "how long a request waits for others to share its batch", role=LOCAL
    )
    forward_passes: int = setting(
        0,
        "batches run through the network at once, the cores shared out among them; 0: one "
        "a core the server may use, each pass on one core (on a small CPU, two one-core "
        "passes at once outrun one pass on two cores)",
        role=LOCAL,
    )

    runtime: str = setting(
        "auto",
        "onnx (ONNX Runtime, the float32 graph) or torch; onnx-int8: the model's int8 graph "
        "(trained with --int8); auto: the int8 graph where the model has one and this CPU "
        "has int8 dot products (VNNI), else the float32 graph",
        choices=SCORING_RUNTIMES,
        role=LOCAL,
    )

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"expected a port from 1 to 65535, found {self.port}")
        if not 0 < self.max_body_mb <= MOST_BODY_MB:  # NaN and infinity fail too
            raise ValueError(
                f"expected --max-body-mb above 0 and at most {MOST_BODY_MB:g}, found "
                f"{self.max_body_mb}"
            )
        if not self.max_body_mb <= self.max_inflight_mb <= MOST_BODY_MB * MOST_COUNT:
            raise ValueError(
                f"expected --max-inflight-mb from --max-body-mb ({self.max_body_mb:g}) to "
                f"{MOST_BODY_MB * MOST_COUNT:g}, found {self.max_inflight_mb}"
            )
        counts = (self.max_instances, self.max_batch, self.max_connections)
        if not all(1 <= count <= MOST_COUNT for count in counts):
            raise ValueError(
                f"expected --max-instances, --max-batch and --max-connections from 1 to "
                f"{MOST_COUNT}, found {self.max_instances}, {self.max_batch} and "
                f"{self.max_connections}"
            )
        if not 0 < self.max_request_megapixels <= 100_000:
            raise ValueError(
                "expected --max-request-megapixels above 0 and at most 100000, found "
                f"{self.max_request_megapixels}"
            )
        waits = (self.header_timeout_seconds, self.body_timeout_seconds, self.idle_timeout_seconds)
        if not all(0 < wait <= 3600 for wait in waits):
            raise ValueError(
                "expected --header-timeout-seconds, --body-timeout-seconds and "
                f"--idle-timeout-seconds above 0 and at most 3600, found {waits}"
            )
        if not (1 <= self.max_header_kb <= 1024 and 1 <= self.max_headers <= 1000):
            raise ValueError(
                "expected --max-header-kb from 1 to 1024 and --max-headers from 1 to 1000, "
                f"found {self.max_header_kb} and {self.max_headers}"
            )
        if not 0 <= self.forward_passes <= MOST_PASSES:
            raise ValueError(
                f"expected --forward-passes from 0 (one a core) to {MOST_PASSES}, found "
                f"{self.forward_passes}"
            )
        if not 0 <= self.batch_wait_ms <= 1000:
            raise ValueError(f"expected --batch-wait-ms from 0 to 1000, found {self.batch_wait_ms}")

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024**2)
