"""ONNX Runtime against eager torch on a CPU: scoring, predict end to end, validation.

python -m benchmarks.scoring [--archive ../shared/data/petimages-23k.zip] [--photos 2300]
    [--rounds 3]

For the tutorial and the cpu preset's nets (their image shapes and views; fixed random
weights, batch-norm statistics moved off their initial values: speed does not depend on
them), on the same real photos decoded once, alternating in each round:
- scoring alone: the scorer over the decoded photos, 64 a batch, photos/s;
- ``components.predict`` in this process (decode and score) on the first 512 photos;
- validation: the tutorial preset's per-epoch val pass over ``--photos`` photos (the
  23,000-photo set's val split is 2,300), torch's ``predict_logits`` against the epoch's
  weights swapped into the export and a session made, as training does; the one export
  the run makes is timed apart.
Each row's median over the rounds, and the ratio of the medians, come last, with the
bound on float32 scoring here: each net's multiply-adds a photo (its convolutions and
linear layers, every view), the rate each scorer reaches, and the rate of ONNX Runtime's
and torch's own float32 matrix multiply (1,024², the threads the scorers use).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch

from benchmarks.common import REPO, machine
from benchmarks.serve import preset_model, sample_photos
from components.data.images import decode_bytes
from components.evaluation.predictions import predict_files
from components.networks.models import load_classifier
from components.recipes.recipe import recipe_values
from components.scoring.loading import load_scorer
from components.scoring.onnx_export import export_graph
from components.scoring.scorers import score_batches, session_threads
from components.training.batches import DeviceSplit
from components.training.inference import predict_logits
from components.training.onnx_graph import OnnxGraph


def rate(count: int, work: Callable[..., object], *args: object) -> float:
    """``count`` photos over the seconds ``work(*args)`` takes, photos/s."""
    started = time.perf_counter()
    work(*args)
    return count / (time.perf_counter() - started)


def multiply_adds(model: torch.nn.Module, channels: int, size: int) -> int:
    """Multiply-adds of one photo through ``model`` in eval mode, every view: its
    convolutions' and linear layers' (the rest is a few percent)."""
    counted = 0

    def count(module: torch.nn.Module, _: object, output: torch.Tensor) -> None:
        nonlocal counted
        if isinstance(module, torch.nn.Conv2d):
            fan_in = module.in_channels // module.groups * math.prod(module.kernel_size)
            counted += output.numel() * fan_in
        elif isinstance(module, torch.nn.Linear):
            counted += output.numel() * module.in_features

    hooks = [module.register_forward_hook(count) for module in model.modules()]
    with torch.no_grad():
        model.eval()(torch.zeros(1, channels, size, size))
    for hook in hooks:
        hook.remove()
    return counted


def matmul_rates(side: int = 1024, calls: int = 20) -> dict[str, float]:
    """Float32 multiply-adds a second of a side×side matrix product, by ONNX Runtime (the
    scorers' thread count) and by torch: the most a float32 scorer can reach here."""
    weights = onnx.numpy_helper.from_array(np.random.rand(side, side).astype(np.float32), "w")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["a", "w"], ["out"])],
        "matmul",
        [onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [side, side])],
        [onnx.helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [side, side])],
        [weights],
    )
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = session_threads()
    session = onnxruntime.InferenceSession(
        onnx.helper.make_model(graph).SerializeToString(), options
    )
    left = np.random.rand(side, side).astype(np.float32)
    work = {
        "onnx": lambda: session.run(None, {"a": left}),
        "torch": lambda: torch.mm(torch.from_numpy(left), torch.from_numpy(left)),
    }
    rates = {}
    for name, multiply in work.items():
        multiply()
        best = min(_seconds(multiply) for _ in range(calls))
        rates[name] = side**3 / best
    return rates


def _seconds(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def preset_rows(preset: str, photos: list[bytes], work: Path, rounds: int) -> dict[str, list]:
    """Each round's photos/s of scoring and of predict, by torch and by ONNX Runtime."""
    values = recipe_values(preset)
    size, channels = int(values["image_size"]), int(values["channels"])
    model = preset_model(work / preset, preset, size)
    pixels = np.stack([decode_bytes(photo, size, channels) for photo in photos]).astype(np.float32)
    files = []
    for index, photo in enumerate(photos[:512]):
        files.append(work / f"{index}.jpg")
        files[-1].write_bytes(photo)
    scorers = {runtime: load_scorer(str(model), runtime).scorer for runtime in ("torch", "onnx")}
    rows: dict[str, list] = {}
    for scorer in scorers.values():
        score_batches(scorer, pixels[:128])  # warm
    for round_ in range(1, rounds + 1):
        for runtime, scorer in scorers.items():
            scored = rate(len(pixels), score_batches, scorer, pixels)
            predicted = rate(len(files), predict_files, str(model), files, runtime)
            rows.setdefault(f"{preset} scoring, {runtime}", []).append(scored)
            rows.setdefault(f"{preset} predict, {runtime}", []).append(predicted)
            print(
                f"round {round_}, {preset} preset, {runtime}: scoring {scored:.0f} photos/s, "
                f"predict {predicted:.0f} photos/s"
            )
    return rows


def validation_rows(photos: list[bytes], work: Path, rounds: int) -> dict[str, list]:
    """Each round's seconds of the tutorial preset's val pass, by torch and ONNX Runtime."""
    model_dir = preset_model(work / "validation", "tutorial", 50)
    model, _ = load_classifier(model_dir)
    images = torch.from_numpy(np.stack([decode_bytes(photo, 50, 1) for photo in photos]))
    data = DeviceSplit(images, torch.zeros(len(images), dtype=torch.long))
    started = time.perf_counter()
    export_graph(model, images[:4].float())  # what a run's first validation does
    print(f"validation: the run's one export took {time.perf_counter() - started:.1f} s")
    graph = OnnxGraph()
    rows: dict[str, list] = {"validation, torch": [], "validation, onnx": []}
    for round_ in range(1, rounds + 1):
        started = time.perf_counter()
        predict_logits(model, data)
        rows["validation, torch"].append(time.perf_counter() - started)
        started = time.perf_counter()
        score_batches(graph.scorer(model, images), images.numpy())
        rows["validation, onnx"].append(time.perf_counter() - started)
        print(
            f"round {round_}, the tutorial preset's validation of {len(images)} photos: torch "
            f"{rows['validation, torch'][-1]:.2f} s, onnx {rows['validation, onnx'][-1]:.2f} s"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    archive = REPO.parent / "shared/data/petimages-23k.zip"
    parser.add_argument("--archive", type=Path, default=archive)
    parser.add_argument("--photos", type=int, default=2300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    costs = {}
    for preset in ("tutorial", "cpu"):
        values = recipe_values(preset)
        size, channels = int(values["image_size"]), int(values["channels"])
        with tempfile.TemporaryDirectory() as scratch:
            model, _ = load_classifier(preset_model(Path(scratch), preset, size))
        costs[preset] = multiply_adds(model, channels, size)
    photos = sample_photos(args.archive, args.photos)
    print(f"scoring benchmark on {machine()}, torch threads {torch.get_num_threads()}")
    print(f"{len(photos)} photos of {args.archive.name}")
    rows: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for preset in ("tutorial", "cpu"):
            rows |= preset_rows(preset, photos, Path(scratch), args.rounds)
        rows |= validation_rows(photos, Path(scratch), args.rounds)
    medians = {name: statistics.median(values) for name, values in rows.items()}
    print(f"medians of {args.rounds} rounds:")
    for name in sorted(medians):
        unit = "s" if name.startswith("validation") else "photos/s"
        print(f"  {name}: {medians[name]:.2f} {unit}")
    for what in ("tutorial scoring", "tutorial predict", "cpu scoring", "cpu predict"):
        ratio = medians[f"{what}, onnx"] / medians[f"{what}, torch"]
        print(f"{what}: onnx {ratio:.2f}x torch's photos/s")
    share = medians["validation, onnx"] / medians["validation, torch"]
    print(f"validation: onnx takes {share:.2f} of torch's time")
    matmul = matmul_rates()
    print(
        f"float32 matrix product, 1024²: ONNX Runtime {matmul['onnx'] / 1e9:.0f}, torch "
        f"{matmul['torch'] / 1e9:.0f} billion multiply-adds/s"
    )
    for preset, cost in costs.items():
        for runtime in ("torch", "onnx"):
            reached = medians[f"{preset} scoring, {runtime}"] * cost
            print(
                f"{preset} net, {cost / 1e6:.1f}M multiply-adds a photo, {runtime}: "
                f"{reached / 1e9:.0f} billion/s, {reached / max(matmul.values()):.2f} of the "
                "faster matrix product's rate"
            )


if __name__ == "__main__":
    main()
