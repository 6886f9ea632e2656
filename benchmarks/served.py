"""Trained models served side by side: each graph's photos/s, p99 and peak memory.

python -m benchmarks.served --model pretrained=DIR --model tutorial=DIR [--photos 512]

Serves each named train output (``model.onnx``, and ``model.int8.onnx`` where it has one)
with ``python -m components.serve --runtime onnx`` and, where it has an int8 graph,
``--runtime onnx-int8``, one server at a time on 127.0.0.1, and sends real JPEGs of the
sample as V1 requests of one photo each (``benchmarks.load``'s clients, in this process):
one client alone, 8 clients and 32 clients at once. Prints a table of photos/s alone and
at 32 clients, p99 latency at 8 clients and the server's peak resident memory (VmHWM),
and beside it ``components.predict``'s classifying of the same photos in this process.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, machine
from benchmarks.serve import Server, rss_mb, run_scenario, sample_photos
from components.core.names import INT8_FILE, INT8_RUNTIME
from components.evaluation.predictions import predict_files

ROUNDS = (("alone", 1), ("8 clients", 8), ("32 clients", 32))  # one photo a request


def named_model(text: str) -> tuple[str, Path]:
    name, _, folder = text.partition("=")
    if not folder or not Path(folder, "model.onnx").is_file():
        raise argparse.ArgumentTypeError(f"expected NAME=DIR of a train output, found {text!r}")
    return name, Path(folder)


def predict_rate(model: Path, runtime: str, files: list[Path]) -> float:
    """``components.predict``'s classifying in this process, warm: photos/s."""
    predict_files(str(model), files[:8], runtime)
    started = time.perf_counter()
    predict_files(str(model), files, runtime)
    return len(files) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=named_model, action="append", required=True)
    parser.add_argument("--sample", type=Path, default=REPO / "tests/fixtures/petimages-sample.zip")
    parser.add_argument("--photos", type=int, default=512)
    parser.add_argument("--port", type=int, default=18091)
    args = parser.parse_args(argv)
    photos = sample_photos(args.sample, args.photos)
    print(f"served models benchmark on {machine()}: {len(photos)} photos of the sample")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        files = []
        for index, data in enumerate(photos):
            files.append(work / f"{index}.jpg")
            files[-1].write_bytes(data)
        for name, folder in args.model:
            runtimes = ["onnx"] + ([INT8_RUNTIME] if (folder / INT8_FILE).is_file() else [])
            for runtime in runtimes:
                log = work / f"{name}-{runtime}.log"
                server = Server(folder, args.port, log, ["--runtime", runtime])
                try:
                    seen = {}
                    for label, clients in ROUNDS:
                        seen[label] = run_scenario(server, photos, clients, 1)
                        print(f"{name} {runtime}, {label}: {seen[label]}", flush=True)
                    peak = rss_mb(server.process.pid, "VmHWM")
                finally:
                    server.stop()
                graph = "int8" if "model.int8.onnx" in log.read_text() else "float32"
                predicted = predict_rate(folder, runtime, files)
                rows.append(
                    f"| {name} | {graph} | {seen['alone']['photos_per_second']:.1f} | "
                    f"{seen['32 clients']['photos_per_second']:.1f} | "
                    f"{seen['8 clients']['p99_ms']:.0f} | {peak:.0f} | {predicted:.1f} |"
                )
                print(rows[-1], flush=True)
    print("| model | graph | photos/s alone | photos/s, 32 clients | p99 ms, 8 clients "
          "| peak MiB | predict photos/s |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
