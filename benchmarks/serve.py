"""The model server's speed and memory, with components.predict on the same photos beside it.

python -m benchmarks.serve --sample ../shared/data/petimages-sample.zip [--photos 256]

Serves the CPU preset's network (compact_cnn, RGB 50×50, mirror averaging; fixed random
weights: speed does not depend on them) with ``python -m components.serve`` on 127.0.0.1
and sends real JPEGs of the sample from client threads of this process: single photos
at 1, 8 and 32 concurrent clients, then 32-photo requests. Prints photos per second,
request latency p50/p99 and the server's resident memory idle and at its peak, then
``components.predict`` on the same photos (a process of its own, start-up included, and
its classifying alone, in this process).
"""

from __future__ import annotations

import argparse
import base64
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
import torch

from benchmarks.common import REPO, machine, measure
from components.data.images import decode_bytes
from components.evaluation.predictions import predict_files
from components.training.models import Classifier, build_model, save_classifier

SCENARIOS = [  # (name, concurrent clients, photos a request)
    ("1 client, 1 photo a request", 1, 1),
    ("8 clients, 1 photo a request", 8, 1),
    ("32 clients, 1 photo a request", 32, 1),
    ("1 client, 32 photos a request", 1, 32),
    ("4 clients, 32 photos a request", 4, 32),
]
PREDICT = "/v1/models/dogs-vs-cats:predict"


def sample_photos(sample: Path, count: int) -> list[bytes]:
    """The first ``count`` photos of the sample that decode, cats and dogs alternating."""
    with zipfile.ZipFile(sample) as archive:
        names = sorted(n for n in archive.namelist() if n.lower().endswith(".jpg"))
        by_class = [[n for n in names if f"/{kind}/" in n] for kind in ("Cat", "Dog")]
        photos = []
        for cat, dog in zip(*by_class, strict=False):
            for name in (cat, dog):
                data = archive.read(name)
                try:
                    decode_bytes(data, 50, 3)
                except ValueError:
                    continue
                photos.append(data)
            if len(photos) >= count:
                return photos[:count]
    return photos


def cpu_preset_model(directory: Path) -> Path:
    torch.manual_seed(0)
    net = build_model("compact_cnn", 3, 50)
    spec = {
        "model": "compact_cnn",
        "channels": 3,
        "image_size": 50,
        "mean": [0.48, 0.45, 0.41],
        "std": [0.26, 0.25, 0.25],
        "classes": ["cat", "dog"],
        "mirror_average": True,
    }
    model = Classifier(net, spec["mean"], spec["std"], mirror_average=True)
    directory.mkdir(parents=True, exist_ok=True)
    save_classifier(directory / "model.pt", model, spec)
    return directory


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(field)


class Server:
    def __init__(self, model: Path, port: int, log: Path):
        command = [sys.executable, "-m", "components.serve", "--model", str(model)]
        command += ["--host", "127.0.0.1", "--port", str(port)]  # the default limits
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            command, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=REPO
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/v1/models/dogs-vs-cats", timeout=2).ok:
                    return
            except requests.RequestException:
                time.sleep(0.3)
        raise TimeoutError(log.read_text()[-2000:])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def run_scenario(server: Server, photos: list[bytes], clients: int, per_request: int) -> dict:
    bodies = [
        {"instances": [{"image": {"b64": base64.b64encode(p).decode()}} for p in chunk]}
        for chunk in (photos[i : i + per_request] for i in range(0, len(photos), per_request))
    ]
    sessions = threading.local()
    latencies: list[float] = []

    opened: list[requests.Session] = []

    def send(body: dict) -> None:
        session = getattr(sessions, "s", None)
        if session is None:
            session = sessions.s = requests.Session()
            opened.append(session)
        started = time.perf_counter()
        answer = session.post(server.url + PREDICT, json=body, timeout=120)
        latencies.append(time.perf_counter() - started)
        if answer.status_code != 200:
            raise RuntimeError(answer.text)

    with ThreadPoolExecutor(clients) as pool:  # one connection a client, kept alive
        list(pool.map(send, bodies[:clients]))  # warm-up
        latencies.clear()
        peak = 0.0
        started = time.perf_counter()
        pending = [pool.submit(send, body) for body in bodies]
        while not all(f.done() for f in pending):
            peak = max(peak, rss_mb(server.process.pid))
            time.sleep(0.05)
        for future in pending:
            future.result()
    wall = time.perf_counter() - started
    for session in opened:  # the server counts open connections against its limit
        session.close()
    ordered = sorted(latencies)
    return {
        "photos_per_second": sum(len(b["instances"]) for b in bodies) / wall,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "requests": len(bodies),
        "server_rss_peak_mb": peak,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sample = REPO.parent / "shared/data/petimages-sample.zip"
    parser.add_argument("--sample", type=Path, default=sample)
    parser.add_argument("--photos", type=int, default=256)
    parser.add_argument("--port", type=int, default=18090)
    args = parser.parse_args(argv)
    photos = sample_photos(args.sample, args.photos)
    print(f"model server benchmark on {machine()}: {len(photos)} photos of the sample")
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        model = cpu_preset_model(work / "model")
        files = []
        for index, data in enumerate(photos):
            files.append(work / f"{index}.jpg")
            files[-1].write_bytes(data)
        server = Server(model, args.port, work / "serve.log")
        try:
            idle = rss_mb(server.process.pid)
            print(f"server resident memory idle, model loaded: {idle:.0f} MiB")
            for name, clients, per_request in SCENARIOS:
                row = run_scenario(server, photos, clients, per_request)
                print(
                    f"{name}: {row['photos_per_second']:.1f} photos/s, p50 {row['p50_ms']:.1f} ms, "
                    f"p99 {row['p99_ms']:.1f} ms, resident {row['server_rss_peak_mb']:.0f} MiB "
                    f"at most ({row['requests']} requests)"
                )
            peak = rss_mb(server.process.pid, "VmHWM")
            print(f"server peak resident memory (VmHWM): {peak:.0f} MiB")
        finally:
            server.stop()
        predict = [sys.executable, "-m", "components.predict", "--model", str(model)]
        whole = measure([*predict, *map(str, files)])
        print(
            f"components.predict, one process: {len(files) / whole.wall_seconds:.1f} photos/s "
            f"({whole.wall_seconds:.1f} s with start-up, peak {whole.peak_rss_mb:.0f} MiB)"
        )
        predict_files(str(model), files[:8])  # warm
        started = time.perf_counter()
        predict_files(str(model), files)
        alone = time.perf_counter() - started
        print(f"components.predict's classifying alone: {len(files) / alone:.1f} photos/s")


if __name__ == "__main__":
    main()
