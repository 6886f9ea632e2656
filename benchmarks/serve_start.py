"""The model server's start and idle memory: a train output folder against the MLflow
model's folder that KServe's storage initializer fetches (``components.fetch_model``).

    python -m benchmarks.serve_start [--preset tutorial] [--rounds 3] [--baseline CHECKOUT]

The same net (a preset's, random weights) both ways, served by ONNX Runtime; with
``--baseline CHECKOUT``, by that checkout's ``components.serve`` too. The starts alternate.
Each prints the seconds to ready, the server's CPU seconds by then and its resident
memory idle.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import mlflow
import numpy as np

from benchmarks.common import REPO, machine
from benchmarks.serve import Server, cpu_seconds, preset_model, rss_mb
from components import fetch_model
from components.core import identity
from components.core.names import ONNX_FILE, SPEC_FILE
from components.networks.models import OneBatchOfViews, load_classifier
from components.recipes.recipe import recipe_values
from components.tracking import logged_models


def logged_and_fetched(train_output: Path, work: Path) -> Path:
    """``train_output`` logged to a SQLite store in ``work`` as the train step logs it and
    registered, then fetched into a folder of its own as the storage initializer fetches it."""
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'mlflow.db'}"
    model, spec = load_classifier(train_output)
    side = spec["image_size"]
    example = np.full((2, spec["channels"], side, side), 128, np.float32)
    batched = OneBatchOfViews(model)
    with mlflow.start_run():
        uri = logged_models.log_model(
            batched,
            example,
            identity.read_record(train_output),
            [train_output / SPEC_FILE, train_output / ONNX_FILE],
            spec["classes"],
            views=batched.view_count(),
        )
    version = mlflow.register_model(uri, "serve-start").version
    fetch_model.main([f"models:/serve-start/{version}", str(work / "fetched")])
    return work / "fetched"


def start(model: Path, port: int, log: Path, code: Path) -> dict[str, float]:
    """Serve ``model`` with ``code``'s server until ready: the seconds, the server's CPU
    seconds, its memory."""
    began = time.monotonic()
    server = Server(model, port, log, [], code)
    try:
        return {
            "ready_s": time.monotonic() - began,
            "cpu_s": cpu_seconds(server.process.pid),
            "idle_rss_mb": rss_mb(server.process.pid),
        }
    finally:
        server.stop()


def describe(row: dict[str, float]) -> str:
    return (
        f"ready in {row['ready_s']:.2f} s, {row['cpu_s']:.2f} CPU-s, "
        f"{row['idle_rss_mb']:.0f} MiB resident idle"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=["cpu", "tutorial"], default="tutorial")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=18091)
    parser.add_argument("--baseline", type=Path, help="another checkout, served beside this one")
    args = parser.parse_args(argv)
    codes = {"this checkout": REPO}
    if args.baseline:
        codes[str(args.baseline)] = args.baseline
    print(f"model server start on {machine()}: the {args.preset} preset's net")
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        size = int(recipe_values(args.preset)["image_size"])
        folders = {"train output": preset_model(work / "model", args.preset, size)}
        folders["MLflow model folder"] = logged_and_fetched(folders["train output"], work)
        runs = [
            (f"{name}, {code}", folder, path)
            for name, folder in folders.items()
            for code, path in codes.items()
        ]
        rows: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in runs}
        for round_ in range(1, args.rounds + 1):
            for name, folder, code in runs:
                row = start(folder, args.port, work / "serve.log", code)
                rows[name].append(row)
                print(f"round {round_}, {name}: {describe(row)}")
    for name, measured in rows.items():
        median = {key: statistics.median(row[key] for row in measured) for key in measured[0]}
        print(f"median, {name}: {describe(median)}")


if __name__ == "__main__":
    main()
