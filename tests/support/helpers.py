"""Small real inputs for the tests: JPEG files, archives, a scriptable HTTP server."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import struct
import sys
import tarfile
import time
import zipfile
import zlib
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
from PIL import Image

from tests.support.local_http import LocalHTTPServer


def write_jpeg(path: Path, seed: int, size=(64, 48), mode="RGB") -> Path:
    """A real JPEG of random-but-seeded noise blocks."""
    rng = np.random.default_rng(seed)
    channels = 3 if mode == "RGB" else 1
    blocks = rng.integers(0, 256, (size[1] // 8, size[0] // 8, channels), dtype=np.uint8)
    pixels = np.kron(blocks, np.ones((8, 8, 1), np.uint8)).squeeze()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels, mode).save(path, "JPEG", quality=90)
    return path


def zip_bytes(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def zip_with_symlink(name: str, target: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        info = zipfile.ZipInfo(name)
        info.external_attr = 0o120777 << 16
        zf.writestr(info, target)
    return buffer.getvalue()


def tar_gz_bytes(entries: dict[str, bytes], symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return buffer.getvalue()


class ScriptedServer(LocalHTTPServer):
    """An HTTP server on 127.0.0.1 that serves one payload and misbehaves on cue.

    ``script`` holds one action per request, then ``ok`` for ever: ``ok``, ``503``,
    ``404``, ``429:N`` (Retry-After: N), ``drop:N`` (send the headers and N bytes, then
    close the socket),
    ``trickle`` (one byte every 0.1 s, for up to 20 s), ``hang`` (say nothing for 5 s),
    ``endless`` (no length announced, zeros until the client hangs up, 256 MiB at most)
    or ``redirect:LOCATION``.
    Range requests are honoured when ``ranges`` is true, and ``If-Range`` is checked
    against the payload's ETag (sent when ``etag`` is true) as RFC 9110 says. After
    the first ``drop``, the payload becomes ``then`` when given: a file that changed.
    ``gzip`` is ``"accepted"`` to send the body gzip-encoded when the request accepts
    that (as many servers do), ``"always"`` to send it so whatever the request says.
    """

    def __init__(
        self,
        payload: bytes,
        script: list[str] | None = None,
        ranges: bool = True,
        etag: bool = True,
        then: bytes | None = None,
        gzip: str = "never",
    ):
        self.payload = payload
        self.gzip = gzip
        self.script = list(script or [])
        self.ranges = ranges
        self.etag = etag
        self.then = then
        self.requests: list[dict] = []
        self._bind()

    def url(self, name: str = "archive.zip") -> str:
        return f"{self.base_url}/{name}"

    def current_etag(self) -> str:
        return '"' + hashlib.sha256(self.payload).hexdigest()[:16] + '"'

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep the test output quiet
                pass

            def do_GET(self) -> None:
                headers = {k: self.headers.get(k) for k in ("Range", "If-Range", "Authorization")}
                server.requests.append(
                    {"path": self.path, **{k.lower(): v for k, v in headers.items()}}
                )
                action = server.script.pop(0) if server.script else "ok"
                if action in ("503", "404"):
                    self.send_error(int(action))
                    return
                if action.startswith("429:"):  # too many requests; come back in N seconds
                    self.send_response(429)
                    self.send_header("Retry-After", action.removeprefix("429:"))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if action == "hang":
                    time.sleep(5)
                    return
                if action == "endless":
                    self._endless()
                    return
                if action.startswith("redirect:"):
                    self.send_response(302)
                    self.send_header("Location", action.removeprefix("redirect:"))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = self._start(headers)
                body = server.payload[start:]
                self.send_response(206 if start else 200)
                if start:
                    total = len(server.payload)
                    self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
                if server.etag:
                    self.send_header("ETag", server.current_etag())
                accepted = "gzip" in (self.headers.get("Accept-Encoding") or "")
                if server.gzip == "always" or server.gzip == "accepted" and accepted:
                    body = gzip.compress(body)
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if action.startswith("drop:"):
                    self.wfile.write(body[: int(action.split(":")[1])])
                    self.wfile.flush()
                    self.close_connection = True
                    server.payload = server.then or server.payload
                    return
                if action == "trickle":
                    self._trickle(body)
                    return
                self.wfile.write(body)

            def _start(self, headers: dict) -> int:
                if not server.ranges or not headers["Range"]:
                    return 0
                if headers["If-Range"] and headers["If-Range"] != server.current_etag():
                    return 0  # changed since: the whole new file
                return int(headers["Range"].removeprefix("bytes=").split("-")[0])

            def _endless(self) -> None:
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                with contextlib.suppress(OSError):
                    for _ in range(4096):
                        self.wfile.write(bytes(1 << 16))

            def _trickle(self, body: bytes) -> None:
                with contextlib.suppress(OSError):
                    for byte in body[:200]:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.1)
                self.close_connection = True

        return Handler


def train_cli(args: list[str]) -> list[str]:
    """The train step's command line, as a user types it."""
    return [sys.executable, "-m", "components.train", *args]


def run_to_end(args: list[str]) -> None:
    """Run the train step's command line ``args`` to its end in this process, in its
    working folder and environment (a test's own, as ``mlflow_store`` sets them): the
    command a user types, without a second start-up of torch, MLflow and the exporter.
    """
    from components import train

    train.main(args)


def train_config(sample_arrays, output, **overrides):
    """A TrainConfig over ``sample_arrays`` into ``output``."""
    from components.training.config import TrainConfig

    return TrainConfig(data=str(sample_arrays), output=str(output), **overrides)


def png_of_zeros(width: int, height: int, bit_depth: int = 8) -> bytes:
    """A valid grey PNG of ``width``×``height`` black pixels (8 or 16 bits each): a few
    kilobytes per 10⁷."""
    packer = zlib.compressobj(9)
    row = bytes(width * bit_depth // 8 + 1)  # the filter byte, then the pixels
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)  # grey
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")
    )


def plant_shard_file(directory: Path, name: str, content: bytes) -> None:
    """Write ``content`` as shard file ``name`` of the arrays in ``directory`` and record
    its sha256 in their meta.json, as someone who writes the whole output would: what the
    reader checks past the digests is reached."""
    (directory / name).write_bytes(content)
    meta = json.loads((directory / "meta.json").read_text())
    for records in meta["shards"].values():
        for record in records:
            for kind in ("images", "labels"):
                if record[kind] == name:
                    record[f"{kind}_sha256"] = hashlib.sha256(content).hexdigest()
    (directory / "meta.json").write_text(json.dumps(meta))


def npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    """``array`` as the bytes of a .npy file."""
    handle = io.BytesIO()
    np.save(handle, array, allow_pickle=allow_pickle)
    return handle.getvalue()
