"""The peak memory of loading a crafted graph of allowed operators through ``predict``, by
how its weights are laid out: one inline tensor, 30 external files, or one external file
named by 30 tensors. What the ONNX size bound (``MOST_ONNX_MB``) is set from.

    python -m benchmarks.onnx_load_peak --mb 128 256 --photo PHOTO.jpg
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from components.scoring import onnx_file

LAYOUTS = ("inline", "thirty-files", "one-file-thirty-times")
TENSORS = 30


def crafted(folder: Path, layout: str, megabytes: int) -> onnx.ModelProto:
    """``pixels`` in, ``logits`` out, through Adds of ``megabytes`` of float weights."""
    photo = 3 * 192 * 192  # floats of a photo: each weight is a stack of photos to add
    stack = max(1, megabytes * 2**18 // (1 if layout == "inline" else TENSORS) // photo)
    count = stack * photo
    tensors, nodes, last = [], [], ""
    for index in range(1 if layout == "inline" else TENSORS):
        if layout == "inline":
            weight = numpy_helper.from_array(
                np.zeros((stack, 3, 192, 192), np.float32), f"w{index}"
            )
        else:
            name = "weights.bin" if layout == "one-file-thirty-times" else f"w{index}.bin"
            if not (folder / name).exists():
                (folder / name).write_bytes(b"\0" * (count * 4))
            weight = TensorProto(
                name=f"w{index}", data_type=TensorProto.FLOAT, dims=[stack, 3, 192, 192]
            )
            weight.data_location = TensorProto.EXTERNAL
            weight.external_data.add(key="location", value=name)
        tensors.append(weight)
        if last:
            nodes.append(helper.make_node("Add", [last, f"w{index}"], [f"a{index}"]))
        last = f"a{index}" if last else f"w{index}"
    # the weights' mean (a scalar) added to two of the photo's channel means: N×2 logits
    tensors += [
        numpy_helper.from_array(np.array([2, 3], np.int64), "spatial"),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
        numpy_helper.from_array(np.array([1], np.int64), "channel_axis"),
    ]
    nodes += [
        helper.make_node("ReduceMean", [last], ["weights_mean"], keepdims=0),
        helper.make_node("ReduceMean", ["pixels", "spatial"], ["means"], keepdims=0),
        helper.make_node("Slice", ["means", "zero", "two", "channel_axis"], ["two_means"]),
        helper.make_node("Add", ["two_means", "weights_mean"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "crafted",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 3, 192, 192])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 2])],
        tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def peak_mb(folder: Path, photo: Path) -> tuple[int, str]:
    """predict's exit status line and its peak resident memory, in MB."""
    measured = (
        "import resource, subprocess, sys\n"
        f"done = subprocess.run([sys.executable, '-m', 'components.predict', '--model', "
        f"{str(folder)!r}, {str(photo)!r}], capture_output=True, text=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
        "print((done.stderr.strip().splitlines() or [''])[-1][:160])\n"
    )
    done = subprocess.run([sys.executable, "-c", measured], capture_output=True, text=True)
    peak, said = (done.stdout.splitlines() + ["", ""])[:2]
    return int(peak), said


def served_peak_mb(folder: Path) -> tuple[int, str]:
    """The model server's peak resident memory (VmHWM) once it has loaded ``folder`` and
    answers ready, or once it has exited; in MB, with its readiness."""
    from tests.support.servers import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "components.serve", "--model", str(folder), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak, said = 0, "not ready in 120 s"
    try:
        for _ in range(240):
            status = Path(f"/proc/{server.pid}/status")
            if server.poll() is not None:
                said = f"exited {server.returncode}"
                break
            peak = max(peak, _high_water_mb(status))
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/dogs-vs-cats") as r:
                    said = f"ready ({r.status})"
                    peak = max(peak, _high_water_mb(status))
                    break
            except OSError:
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(30)
    return peak, said


def _high_water_mb(status: Path) -> int:
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, nargs="+", default=[128])
    parser.add_argument("--photo", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True, help="a trained model folder")
    args = parser.parse_args()
    print(f"bound: {onnx_file.MOST_ONNX_MB} MB")
    for megabytes in args.mb:
        for layout in LAYOUTS:
            with tempfile.TemporaryDirectory() as scratch:
                folder = Path(scratch) / "model"
                subprocess.run(["cp", "-r", str(args.model), str(folder)], check=True)
                for stale in ("model.int8.onnx",):
                    (folder / stale).unlink(missing_ok=True)
                onnx.save(crafted(folder, layout, megabytes), folder / "model.onnx")
                from tests.support.models import rerecord

                rerecord(folder)
                peak, said = peak_mb(folder, args.photo)
                served, ready = served_peak_mb(folder)
            print(f"{megabytes} MB {layout}: predict's peak {peak} MB; {said}")
            print(f"{megabytes} MB {layout}: the server's peak {served} MB; {ready}")
    print(f"this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")


if __name__ == "__main__":
    main()
