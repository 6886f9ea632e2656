"""The classifier as a KServe model: each photo decoded as the preprocess step decodes it."""

from __future__ import annotations

import asyncio
import os

import numpy as np
import torch
from kserve import Model
from kserve.errors import InvalidInput
from kserve.protocol.infer_type import InferRequest

from components.core.names import CLASSES
from components.data.images import decode_bytes, decode_pixels
from components.evaluation.predictions import load_any
from components.serving import payloads
from components.serving.batching import MicroBatcher
from components.serving.config import MODEL_NAME, ServeConfig

# photos decoded at once: each may hold up to MAX_PIXELS while it decodes
DECODE_SLOTS = max(1, min(4, os.cpu_count() or 1))


class DogsVsCats(Model):
    """``dogs-vs-cats``: photos in, a class and its probability out, in V1 or v2 form."""

    def __init__(self, cfg: ServeConfig):
        super().__init__(MODEL_NAME)
        self.cfg = cfg
        self.net: torch.nn.Module | None = None
        self.channels = self.image_size = 0
        self.batcher: MicroBatcher | None = None
        self._decoding: asyncio.Semaphore | None = None

    def load(self) -> bool:
        """Load the model as ``components.predict`` does (no pickle); ready once loaded.

        A train output loads in eval mode; an MLflow URI as the ``torch.export`` program
        it was logged as, which has no modes (``.eval()`` on it raises).
        """
        self.net, self.channels, self.image_size = load_any(self.cfg.model)
        wait = self.cfg.batch_wait_ms / 1000
        self.batcher = MicroBatcher(self._probabilities, self.cfg.max_batch, wait)
        self.ready = True
        return self.ready

    def _probabilities(self, pixels: np.ndarray) -> np.ndarray:
        assert self.net is not None
        with torch.no_grad():
            return torch.softmax(self.net(torch.from_numpy(pixels).float()), dim=1).numpy()

    async def predict(self, payload, headers=None, response_headers=None):
        """Answer a V1 body (a dict) or a v2 ``InferRequest``, one answer per photo, in order."""
        v2 = isinstance(payload, InferRequest)
        limit = self.cfg.max_instances
        photos = payloads.v2_images(payload, limit) if v2 else payloads.v1_images(payload, limit)
        await self._check_work(photos)
        pixels = np.stack(await asyncio.gather(*(self._decode(p, i) for i, p in enumerate(photos))))
        assert self.batcher is not None
        rows = await self.batcher.run(pixels)
        classes = [CLASSES[int(row.argmax())] for row in rows]
        probabilities = [float(row.max()) for row in rows]
        if v2:
            return payloads.v2_answer(self.name, payload, classes, probabilities)
        return payloads.v1_answer(classes, probabilities)

    async def _check_work(self, photos: list[bytes]) -> None:
        """Refuse a request whose photos would take more decoding than one may, read from
        their headers before any is decoded."""
        loop = asyncio.get_running_loop()
        total = await loop.run_in_executor(
            None, _request_pixels, photos, self.image_size, self.channels
        )
        most = self.cfg.max_request_megapixels * 1e6
        if total > most:
            raise InvalidInput(
                f"expected the photos of one request to decode to at most "
                f"{self.cfg.max_request_megapixels:g} million pixels together, found "
                f"{total / 1e6:.0f} million: send fewer or smaller photos a request"
            )

    async def _decode(self, photo: bytes, index: int) -> np.ndarray:
        if self._decoding is None:
            self._decoding = asyncio.Semaphore(DECODE_SLOTS)
        async with self._decoding:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(
                    None, decode_bytes, photo, self.image_size, self.channels
                )
            except ValueError as err:  # not an image, truncated, too many pixels
                raise InvalidInput(f"instance {index}: {err}") from None

    def get_input_types(self) -> list[dict]:
        return [{"name": "image", "datatype": "BYTES", "shape": [-1]}]

    def get_output_types(self) -> list[dict]:
        return [
            {"name": "class", "datatype": "BYTES", "shape": [-1]},
            {"name": "probability", "datatype": "FP32", "shape": [-1]},
        ]


def _request_pixels(photos: list[bytes], size: int, channels: int) -> int:
    """The pixels all ``photos`` decode to, from their headers.

    Raises:
        InvalidInput: (400) a photo whose header does not read as one.
    """
    total = 0
    for index, photo in enumerate(photos):
        try:
            total += decode_pixels(photo, size, channels)
        except ValueError as err:
            raise InvalidInput(f"instance {index}: {err}") from None
    return total
