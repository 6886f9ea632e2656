"""The model server's speed and memory, with components.predict on the same photos beside it.

python -m benchmarks.serve --sample tests/fixtures/petimages-sample.zip [--photos 256]
    [--preset tutorial|pretrained|RECIPE.yaml]

Serves a preset's net at its image size with its views (by default the cpu preset's:
stem16_residual_cnn, RGB 96×96; the tutorial preset's: five_conv_cnn, grey 50×50; ten views both;
fixed random weights: speed does not depend on them), its ONNX graph in ONNX Runtime
unless ``--serve-flags "--runtime torch"``, with ``python -m components.serve`` on 127.0.0.1
and sends real JPEGs of the sample as V1 requests from clients of this process (lean
asyncio ones, ``benchmarks.load``, since they share the cores with the server): single
photos at 1, 8 and 32 concurrent clients, then 32-photo requests. Each round prints
photos per second, request latency p50/p99 and the CPU time a photo cost the server and
the clients, then ``components.predict``'s classifying alone of the same photos (in this
process, the server idle, ONNX Runtime). Then the server's resident memory idle and at its peak,
``components.predict`` as a process of its own (start-up included), and last each row's
median over ``--rounds`` and its ratio to the median of predict's classifying alone.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
import torch

from benchmarks import load
from benchmarks.common import REPO, machine, measure
from components.core import identity
from components.core.names import ONNX_FILE
from components.data.images import decode_bytes
from components.evaluation.predictions import predict_files
from components.networks.models import Classifier, build_model, save_trained
from components.recipes.recipe import recipe_values
from components.training.onnx_graph import OnnxGraph

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


def preset_model(directory: Path, preset: str, size: int = 50) -> Path:
    """A train output (model.pt, model.onnx) of ``preset``'s net and prediction views at
    ``size``×``size``, random weights, batch-norm statistics off their initial values."""
    values = recipe_values(preset)
    channels = int(values["channels"])
    torch.manual_seed(0)
    net = build_model(str(values["model"]), channels, size)
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 2.0)
    spec = {
        "model": values["model"],
        "channels": channels,
        "image_size": size,
        "mean": [0.48, 0.45, 0.41][:channels],
        "std": [0.26, 0.25, 0.25][:channels],
        "classes": ["cat", "dog"],
        "mirror_average": bool(values.get("mirror_average", False)),
        "shift_average": bool(values.get("shift_average", False)),
    }
    model = Classifier(
        net,
        spec["mean"],
        spec["std"],
        mirror_average=spec["mirror_average"],
        shift_average=spec["shift_average"],
    )
    directory.mkdir(parents=True, exist_ok=True)
    digests = save_trained(directory, model.eval(), spec)
    photos = torch.randint(0, 256, (8, channels, size, size)).float()
    graph = OnnxGraph().write(directory / ONNX_FILE, model, photos, spec["classes"])
    # the files' record, as the train step writes it: every loader checks it
    identity.write_record(directory, {**digests, ONNX_FILE: identity.sha256_of_bytes(graph)})
    return directory


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(field)


class Server:
    def __init__(self, model: Path, port: int, log: Path, flags: list[str], code: Path = REPO):
        command = [sys.executable, "-m", "components.serve", "--model", str(model)]
        command += ["--host", "127.0.0.1", "--port", str(port), *flags]
        self.url, self.port = f"http://127.0.0.1:{port}", port
        self.process = subprocess.Popen(
            command, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=code
        )  # python -m imports components from ``code``: another checkout's, for a baseline
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


def v1_body(photos: list[bytes]) -> bytes:
    instances = [{"image": {"b64": base64.b64encode(photo).decode()}} for photo in photos]
    return json.dumps({"instances": instances}).encode()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid``, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_scenario(server: Server, photos: list[bytes], clients: int, per_request: int) -> dict:
    chunks = [photos[i : i + per_request] for i in range(0, len(photos), per_request)]
    posts = [
        load.post("127.0.0.1", server.port, PREDICT, v1_body(chunk), len(chunk)) for chunk in chunks
    ]
    load.send_all("127.0.0.1", server.port, posts[:clients], clients)  # warm-up
    peak = 0.0
    server_cpu, client_cpu = cpu_seconds(server.process.pid), cpu_seconds(os.getpid())
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(load.send_all, "127.0.0.1", server.port, posts, clients)
        while not running.done():
            peak = max(peak, rss_mb(server.process.pid))
            time.sleep(0.05)
        seen = running.result()
    server_cpu = cpu_seconds(server.process.pid) - server_cpu
    client_cpu = cpu_seconds(os.getpid()) - client_cpu
    ordered = sorted(seen.latencies)
    return {
        "photos_per_second": len(photos) / seen.wall_seconds,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "requests": len(posts),
        "server_rss_peak_mb": peak,
        "server_cpu_ms_a_photo": 1000 * server_cpu / len(photos),
        "client_cpu_ms_a_photo": 1000 * client_cpu / len(photos),
    }


def classify_alone(model: Path, files: list[Path]) -> tuple[float, float]:
    """``components.predict``'s classifying in this process, warm: photos/s and CPU ms a photo."""
    predict_files(str(model), files[:8])  # warm
    started, cpu = time.perf_counter(), cpu_seconds(os.getpid())
    predict_files(str(model), files)
    seconds = time.perf_counter() - started
    return len(files) / seconds, 1000 * (cpu_seconds(os.getpid()) - cpu) / len(files)


def describe(name: str, row: dict) -> str:
    return (
        f"{name}: {row['photos_per_second']:.1f} photos/s, p50 {row['p50_ms']:.1f} ms, "
        f"p99 {row['p99_ms']:.1f} ms, resident {row['server_rss_peak_mb']:.0f} MiB at most "
        f"({row['requests']} requests); CPU a photo: server {row['server_cpu_ms_a_photo']:.2f} "
        f"ms, clients {row['client_cpu_ms_a_photo']:.2f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sample = REPO / "tests/fixtures/petimages-sample.zip"
    parser.add_argument("--sample", type=Path, default=sample)
    parser.add_argument("--photos", type=int, default=256)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of every scenario and predict's classifying, one after the other; "
        "ratios are of the medians",
    )
    parser.add_argument("--port", type=int, default=18090)
    parser.add_argument(
        "--preset",
        default="cpu",
        help="whose net to serve: a preset's name or a recipe file (default: cpu)",
    )
    parser.add_argument(
        "--serve-flags",
        default="",
        help="flags for components.serve beyond the model and address (default: none, its "
        'defaults), e.g. "--forward-passes 1"',
    )
    args = parser.parse_args(argv)
    photos = sample_photos(args.sample, args.photos)
    print(
        f"model server benchmark on {machine()}: {len(photos)} photos of the sample, "
        f"the {args.preset} preset's net"
    )
    served: dict[str, list[dict]] = {name: [] for name, _, _ in SCENARIOS}
    alone: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        size = int(recipe_values(args.preset)["image_size"])
        model = preset_model(work / "model", args.preset, size)
        files = []
        for index, data in enumerate(photos):
            files.append(work / f"{index}.jpg")
            files[-1].write_bytes(data)
        server = Server(model, args.port, work / "serve.log", shlex.split(args.serve_flags))
        try:
            idle = rss_mb(server.process.pid)
            print(f"server resident memory idle, model loaded: {idle:.0f} MiB")
            for round_ in range(1, args.rounds + 1):
                for name, clients, per_request in SCENARIOS:
                    row = run_scenario(server, photos, clients, per_request)
                    served[name].append(row)
                    print(f"round {round_}, {describe(name, row)}")
                rate, cpu = classify_alone(model, files)  # the server idle meanwhile
                alone.append(rate)
                print(
                    f"round {round_}, components.predict's classifying alone: {rate:.1f} "
                    f"photos/s (CPU a photo: {cpu:.2f} ms)"
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
    baseline = statistics.median(alone)
    print(f"median of {args.rounds} rounds; predict's classifying alone: {baseline:.1f} photos/s")
    for name, rows in served.items():
        rate = statistics.median(row["photos_per_second"] for row in rows)
        p99 = statistics.median(row["p99_ms"] for row in rows)
        print(f"{name}: {rate:.1f} photos/s, p99 {p99:.1f} ms, {rate / baseline:.2f}x predict's")


if __name__ == "__main__":
    main()
