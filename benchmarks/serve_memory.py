"""The model server's resident memory under the heaviest load its defaults admit.

python -m benchmarks.serve_memory --sample tests/fixtures/petimages-sample.zip
    [--preset pretrained | --model DIR] [--clients 32] [--requests 2] [--photos 64]

Serves a preset's net at its image size (random weights: memory does not depend on them),
or a train output (``--model``, the graph its default runtime picks),
with ``python -m components.serve`` on 127.0.0.1, then ``--clients`` clients each post
``--requests`` V1 requests of ``--photos`` JPEGs of ``--width``×``--height`` (sample photos
scaled up, at JPEG quality ``--quality``, progressive with ``--progressive``) at once, and
afterwards one request of one photo. Prints every answer's status, the server's peak
resident memory (VmHWM) against the pod's 2 GiB limit, and whether the one-photo request
was answered.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import io
import json
import shlex
import tempfile
import time
from pathlib import Path

from PIL import Image

from benchmarks import load
from benchmarks.common import machine
from benchmarks.serve import PREDICT, Server, preset_model, rss_mb, sample_photos, v1_body
from components.core.names import SPEC_FILE
from components.recipes.recipe import recipe_values

POD_LIMIT_MB = 2048  # manifests/serving: the model server's memory limit


def large_photos(
    sample: Path, count: int, size: tuple[int, int], quality: int, progressive: bool
) -> list[bytes]:
    """``count`` sample photos scaled up to ``size`` JPEGs."""
    photos = []
    for photo in sample_photos(sample, count):
        with Image.open(io.BytesIO(photo)) as image:
            large = image.convert("RGB").resize(size, Image.Resampling.BICUBIC)
        encoded = io.BytesIO()
        large.save(encoded, "JPEG", quality=quality, progressive=progressive)
        photos.append(encoded.getvalue())
    return photos


async def post_all(port: int, bodies: list[bytes]) -> list[tuple[int, dict[str, str]]]:
    """Each body posted on a connection of its own, all at once: (status, headers) each."""

    async def one(body: bytes) -> tuple[int, dict[str, str]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(load.post("127.0.0.1", port, PREDICT, body, 0).data)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
            await reader.readexactly(int(headers.get("content-length", "0")))
            return int(lines[0].split()[1]), headers
        except (ConnectionError, asyncio.IncompleteReadError):
            return 0, {}  # closed without an answer
        finally:
            writer.close()

    return list(await asyncio.gather(*(one(body) for body in bodies)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, required=True)
    parser.add_argument("--preset", default="pretrained")
    parser.add_argument(
        "--model",
        type=Path,
        help="a train output to serve (its default runtime's graph) instead of the preset's "
        "net with random weights",
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2)
    parser.add_argument("--photos", type=int, default=64)
    parser.add_argument("--quality", type=int, default=70)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--height", type=int, default=1200)
    parser.add_argument("--progressive", action="store_true")
    parser.add_argument("--serve-flags", default="", help="more flags for components.serve")
    args = parser.parse_args()
    size = int(recipe_values(args.preset)["image_size"])
    if args.model:
        size = int(json.loads((args.model / SPEC_FILE).read_text())["image_size"])
    shape = (args.width, args.height)
    photos = large_photos(args.sample, args.photos, shape, args.quality, args.progressive)
    body = v1_body(photos)
    print(machine())
    kind = "progressive JPEGs" if args.progressive else "JPEGs"
    served = args.model or f"{args.preset} net"
    print(
        f"{served} at {size}×{size}; a request: {args.photos} {kind} of "
        f"{args.width}×{args.height}, {len(body) / 2**20:.1f} MiB of body; server flags: "
        f"{args.serve_flags or 'none'}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model or preset_model(Path(scratch) / "model", args.preset, size)
        flags = shlex.split(args.serve_flags)
        server = Server(model, 18433, Path(scratch) / "server.log", flags)
        try:
            idle = rss_mb(server.process.pid)
            started = time.perf_counter()
            statuses: collections.Counter[str] = collections.Counter()
            for _ in range(args.requests):
                answers = asyncio.run(post_all(server.port, [body] * args.clients))
                for status, headers in answers:
                    retry = headers.get("retry-after")
                    statuses[f"{status or 'no answer'}{f' retry {retry}' if retry else ''}"] += 1
            seconds = time.perf_counter() - started
            one = asyncio.run(post_all(server.port, [v1_body(photos[:1])]))[0][0]
            peak = rss_mb(server.process.pid, "VmHWM")
        finally:
            server.stop()
        scoring = [line for line in (Path(scratch) / "server.log").read_text().splitlines()
                   if "scoring with ONNX Runtime" in line]  # fmt: skip
    print("\n".join(scoring))
    print(f"answers in {seconds:.1f} s: {dict(statuses)}")
    print(f"one photo afterwards: {one}")
    print(f"server resident memory: idle {idle:.0f} MiB, peak {peak:.0f} MiB "
          f"({peak / POD_LIMIT_MB:.0%} of the pod's {POD_LIMIT_MB} MiB)")  # fmt: skip
    print(json.dumps({"stage": "serve-memory", "preset": args.preset, "statuses": statuses,
                      "idle_mb": idle, "peak_mb": peak, "one_photo_after": one}))  # fmt: skip


if __name__ == "__main__":
    main()
