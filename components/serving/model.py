"""The classifier as a KServe model: each photo decoded as the preprocess step decodes it."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
from kserve import Model
from kserve.errors import InvalidInput
from kserve.protocol.infer_type import InferRequest, InferResponse

from components.core.cores import available_cores
from components.data.images import decode_bytes, decode_pixels
from components.scoring.loading import load_scorer
from components.scoring.scorers import CALL_SECONDS, OnnxScorer, TorchScorer, class_probabilities
from components.serving import payloads
from components.serving.batching import MicroBatcher
from components.serving.config import MODEL_NAME, ServeConfig

T = TypeVar("T")
log = logging.getLogger(__name__)
# a scoring call this long is held: ONNX Runtime stops its own calls at CALL_SECONDS
STUCK_SECONDS = CALL_SECONDS + 30


class ClientGone(Exception):
    """A request's decoding stopped because its client left (no one reads the error)."""


class DogsVsCats(Model):
    """``dogs-vs-cats``: photos in, a class (by the name the model was trained with) and
    its probability out, in V1 or v2 form."""

    def __init__(self, cfg: ServeConfig):
        super().__init__(MODEL_NAME)
        self.cfg = cfg
        self.scorer: OnnxScorer | TorchScorer | None = None
        self.channels = self.image_size = 0
        self.classes: tuple[str, ...] = ()
        self.batcher: MicroBatcher | None = None
        # a request's photos are decoded by one thread, a thread a core: one client's
        # large request holds one of them, and the decodes running at once stay few
        self.decoding = ThreadPoolExecutor(available_cores(), "decode")
        self.held_calls, self._holding = 0, threading.Lock()  # scoring calls past their bound

    def load(self) -> bool:
        """Load the model as ``components.predict`` does (no pickle, an ONNX file checked
        as data); ready once loaded."""
        cores = available_cores()
        passes = self.cfg.forward_passes or cores
        loaded = load_scorer(self.cfg.model, self.cfg.runtime, passes)
        self.scorer, self.channels, self.image_size = (
            loaded.scorer,
            loaded.channels,
            loaded.image_size,
        )
        self.classes = loaded.classes
        log.info("answering with the classes %s", ", ".join(self.classes)[:500])
        wait = self.cfg.batch_wait_ms / 1000
        threads = max(1, cores // passes)  # torch's threads for each pass
        setup = _torch_threads(threads) if isinstance(self.scorer, TorchScorer) else None
        self.batcher = MicroBatcher(self._probabilities, self.cfg.max_batch, wait, passes, setup)
        self.ready = True
        return self.ready

    def _probabilities(self, pixels: np.ndarray) -> np.ndarray:
        """The photos' class probabilities; a call still running ``STUCK_SECONDS`` after
        it began (past ONNX Runtime's own time bound, which frees its thread) makes the
        model not ready until it ends: the readiness probe then sends no more requests
        to a server whose workers are held."""
        assert self.scorer is not None
        fired = threading.Event()

        def held() -> None:
            fired.set()
            self._held(+1)

        watch = threading.Timer(STUCK_SECONDS, held)
        watch.start()
        try:
            return class_probabilities(self.scorer(pixels.astype(np.float32, copy=False)))
        finally:
            watch.cancel()
            if fired.is_set():
                self._held(-1)

    def _held(self, change: int) -> None:
        with self._holding:
            self.held_calls += change
            self.ready = self.held_calls == 0
        if change > 0:
            log.error("a scoring call runs past %g s: not ready until it ends", STUCK_SECONDS)

    async def predict(
        self,
        payload: dict[str, Any] | InferRequest,
        headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> dict[str, Any] | InferResponse:
        """Answer a V1 body (a dict) or a v2 ``InferRequest``, one answer per photo, in order."""
        v2 = isinstance(payload, InferRequest)
        limit = self.cfg.max_instances
        photos = payloads.v2_images(payload, limit) if v2 else payloads.v1_images(payload, limit)
        loop, gone = asyncio.get_running_loop(), threading.Event()
        try:
            pixels = await loop.run_in_executor(self.decoding, self._decode, photos, gone)
        except asyncio.CancelledError:  # its client left: no other photo of it starts
            gone.set()
            raise
        assert self.batcher is not None
        rows = await self.batcher.run(pixels)
        classes = [self.classes[int(row.argmax())] for row in rows]
        probabilities = [float(row.max()) for row in rows]
        if v2:
            return payloads.v2_answer(self.name, payload, classes, probabilities)
        return payloads.v1_answer(classes, probabilities)

    def _decode(self, photos: list[bytes], gone: threading.Event) -> np.ndarray:
        """The photos of one request decoded, N×C×S×S, once their headers show that they
        take no more decoding than one request may; none after ``gone`` is set.

        Raises:
            InvalidInput: (400) a photo that does not decode, or too much to decode.
            ClientGone: ``gone`` was set before the last photo.
        """
        size, channels = self.image_size, self.channels
        total = sum(
            _read(decode_pixels, photo, index, size, channels) for index, photo in enumerate(photos)
        )
        most = self.cfg.max_request_megapixels * 1e6
        if total > most:
            raise InvalidInput(
                f"expected the photos of one request to decode to at most "
                f"{self.cfg.max_request_megapixels:g} million pixels together, found "
                f"{total / 1e6:.0f} million: send fewer or smaller photos a request"
            )
        decoded = []
        for index, photo in enumerate(photos):
            if gone.is_set():
                raise ClientGone
            decoded.append(_read(decode_bytes, photo, index, size, channels))
        return np.stack(decoded)

    def get_input_types(self) -> list[dict[str, Any]]:
        return [{"name": "image", "datatype": "BYTES", "shape": [-1]}]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [
            {"name": "class", "datatype": "BYTES", "shape": [-1]},
            {"name": "probability", "datatype": "FP32", "shape": [-1]},
        ]


def _read(read: Callable[..., T], photo: bytes, index: int, *args: int) -> T:
    """``read(photo, *args)``, its ``ValueError`` (not an image, truncated, too many
    pixels) a 400 that names the photo."""
    try:
        return read(photo, *args)
    except ValueError as err:
        raise InvalidInput(f"instance {index}: {err}") from None


def _torch_threads(threads: int) -> Callable[[], None]:
    """What sets a forward thread's torch threads (ONNX Runtime's sessions hold their own)."""

    def setup() -> None:
        import torch

        torch.set_num_threads(threads)

    return setup
