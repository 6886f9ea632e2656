"""Scorers: photos in (N×C×S×S float32, 0–255), logits out (N×K), by ONNX Runtime or torch.

On a CPU, ONNX Runtime scores the exported graph two to four times as fast as eager
torch (docs/BENCHMARKS.md); on a GPU, torch runs it. ``--runtime auto`` picks so.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime

from components.core.cores import available_cores
from components.core.names import INT8_RUNTIME, SCORING_RUNTIMES
from components.scoring.onnx_file import INPUT, VIEWS

if TYPE_CHECKING:  # torch loads only where a TorchScorer is made: ONNX scoring runs without it
    import torch

CPU_BATCH = 64  # photos a call on a CPU: its caches then hold the activations
VIEWS_A_CALL = 64  # views (photos × views of each) a session call scores: the cache's fill
# and at most as many pixels as 64 views of 128×128: fewer views of larger photos, whose
# activations grow with their area (two views of 32 photos of 260×260 through
# EfficientNet-Lite2 ask for 415 MB in one tensor)
PIXELS_A_CALL = VIEWS_A_CALL * 128 * 128
# the memory ONNX Runtime may hold for scoring, all sessions of a process together: the
# tutorial preset's ten views at 64 photos a batch use about 250 MB; a graph that asks
# for more (a crafted model) fails its call, the process stays within its bound
SCORING_MEMORY_MB = 1024
# the longest one session call may run: 64 views of resnet18 at 128 px take about a second
# on two cores; a graph that runs longer is stopped, its thread freed
CALL_SECONDS = 60.0


def pick_runtime(name: str, device_type: str) -> str:
    """``name``, with ``auto`` made ``onnx`` on a CPU (``device_type`` "cpu") and
    ``torch`` elsewhere.

    Raises:
        ValueError: ``name`` is none of ``SCORING_RUNTIMES``, or an ONNX one on a GPU.
    """
    if name not in SCORING_RUNTIMES:
        raise ValueError(f"expected a runtime of {', '.join(SCORING_RUNTIMES)}, found {name!r}")
    if name == "auto":
        return "onnx" if device_type == "cpu" else "torch"
    if name in ("onnx", INT8_RUNTIME) and device_type != "cpu":
        raise ValueError(
            f"expected --runtime {name} on a CPU, found device {device_type}: on a GPU the "
            "model runs in torch (--runtime torch or auto)"
        )
    return name


def session_threads(passes: int = 1) -> int:
    """ONNX Runtime's threads for each of ``passes`` forward passes running at once:
    the cores this process may use (its pod's CPU limit) shared between them."""
    return max(1, available_cores() // passes)


class ScoringError(RuntimeError):
    """ONNX Runtime failed a call (a graph that asks for more memory than its bound)."""


class ScoringTimeoutError(ScoringError):
    """A session call ran past ``CALL_SECONDS`` and was stopped."""


class NonFiniteLogitsError(ValueError):
    """The model gave a photo logits that are NaN or infinite: no class can be read."""


def class_probabilities(logits: np.ndarray) -> np.ndarray:
    """Each photo's class probabilities (softmax of its N×K logits).

    Raises:
        NonFiniteLogitsError: a photo's logits are NaN or infinite; an answer read from
            them would be a guess (NaN's argmax is "cat"), so there is none.
    """
    bad = np.flatnonzero(~np.isfinite(logits).all(axis=1))
    if len(bad):
        raise NonFiniteLogitsError(
            f"expected finite logits from the model, found {logits[bad[0]].tolist()} for "
            f"photo {bad[0]} ({len(bad)} of {len(logits)} photos): the model is broken, and "
            "no class is given for them"
        )
    return softmax(logits)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Each row's softmax, in float32."""
    logits = logits.astype(np.float32, copy=False)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities: np.ndarray = shifted / shifted.sum(axis=1, keepdims=True)
    return probabilities


def score_batches(
    scorer: OnnxScorer | TorchScorer, images: np.ndarray, batch_size: int = CPU_BATCH
) -> np.ndarray:
    """Logits (N×K, float32) for N photos, scored ``batch_size`` at a time."""
    chunks = [
        scorer(images[start : start + batch_size].astype(np.float32))
        for start in range(0, len(images), batch_size)
    ]
    return np.concatenate(chunks) if chunks else np.empty((0, 2), np.float32)


def photos_a_call(views_said: object, side: int) -> int:
    """The photos of ``side``×``side`` one call may score so that it scores at most
    ``VIEWS_A_CALL`` views and ``PIXELS_A_CALL`` pixels, from the views of each photo a
    model's metadata says: a number of up to three digits, anything else counts as one
    view (a file may say anything)."""
    said = str(views_said)
    views = int(said) if said.isdigit() and len(said) < 4 else 1
    views_a_call = min(VIEWS_A_CALL, PIXELS_A_CALL // max(1, side * side))
    return max(1, views_a_call // max(1, views))


class TorchScorer:
    """A torch classifier (eval mode, on the CPU) as a scorer.

    ``views_said``: the views of each photo one call of ``model`` puts through its net at
    once, as a logged program's metadata says; each call scores at most ``VIEWS_A_CALL``
    views and ``PIXELS_A_CALL`` pixels, which bounds its memory as ONNX Runtime's.
    """

    runtime = "torch"

    def __init__(self, model: torch.nn.Module, views_said: object = 1):
        self.model = model
        self.views_said = views_said

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        import torch

        step = photos_a_call(self.views_said, pixels.shape[-1])
        with torch.no_grad():
            chunks = [
                self.model(torch.from_numpy(pixels[start : start + step]).float()).numpy()
                for start in range(0, len(pixels), step)
            ]
        logits: np.ndarray = np.concatenate(chunks) if chunks else np.empty((0, 2), np.float32)
        return logits


class OnnxScorer:
    """An ONNX model (checked bytes, see ``onnx_file.read_onnx``) in ONNX Runtime.

    Safe to call from several threads at once; each call runs on ``threads`` cores and
    scores at most ``VIEWS_A_CALL`` views and ``PIXELS_A_CALL`` pixels at a time, which
    bounds its memory.
    """

    runtime = "onnx"

    def __init__(self, model: bytes, threads: int):
        _bounded_arena()
        options = onnxruntime.SessionOptions()
        options.add_session_config_entry("session.use_env_allocators", "1")
        # no busy-waiting between calls: the cores go to decoding and to other processes
        # (as fast here, docs/BENCHMARKS.md)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: its warnings are about its own tuning
        try:
            self.session = onnxruntime.InferenceSession(
                model, options, providers=["CPUExecutionProvider"]
            )
        except Exception as err:  # ONNX Runtime's own error kinds, not Python's
            reason = (str(err).splitlines() or [type(err).__name__])[0]
            raise ValueError(f"ONNX Runtime refused the graph: {reason:.300}") from err
        self.views_said = self.session.get_modelmeta().custom_metadata_map.get(VIEWS, "1")

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        pixels = np.ascontiguousarray(pixels, dtype=np.float32)
        step = photos_a_call(self.views_said, pixels.shape[-1])
        chunks = [self._run(pixels[start : start + step]) for start in range(0, len(pixels), step)]
        logits: np.ndarray = np.concatenate(chunks) if chunks else np.empty((0, 2), np.float32)
        return logits

    def _run(self, pixels: np.ndarray) -> np.ndarray:
        """One session call, stopped by ONNX Runtime's own terminate flag once it has run
        ``CALL_SECONDS``: its thread and cores are free again.

        Raises:
            ScoringTimeoutError: the call ran out of time.
            ScoringError: ONNX Runtime failed the call.
        """
        run = onnxruntime.RunOptions()
        timer = threading.Timer(CALL_SECONDS, setattr, (run, "terminate", True))
        timer.start()
        try:
            logits: np.ndarray = self.session.run(None, {INPUT: pixels}, run)[0]
        except Exception as err:  # ONNX Runtime's own error kinds, not Python's
            if run.terminate:
                raise ScoringTimeoutError(
                    f"expected a call of ONNX Runtime to score {len(pixels)} photos within "
                    f"{CALL_SECONDS:g} s, found it still running; stopped (the model is too "
                    "costly for this machine, or crafted to be)"
                ) from None
            reason = (str(err).splitlines() or [type(err).__name__])[0]
            reason = reason if len(reason) <= 300 else "…" + reason[-300:]  # its end says why
            raise ScoringError(
                f"ONNX Runtime could not score {len(pixels)} photos: {reason}"
            ) from err
        finally:
            timer.cancel()
        return logits

    def input_shape(self) -> list[int | str]:
        """The model's input shape; the batch is a name (a free dimension)."""
        inputs = self.session.get_inputs()
        return list(inputs[0].shape) if len(inputs) == 1 else [f"{len(inputs)} inputs"]


@functools.cache
def _bounded_arena() -> None:
    """Give this process's ONNX Runtime sessions one CPU memory arena of at most
    ``SCORING_MEMORY_MB`` (made once: it is the runtime's, shared by all sessions)."""
    where = onnxruntime.OrtMemoryInfo(
        "Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxruntime.OrtMemType.DEFAULT
    )
    onnxruntime.create_and_register_allocator(
        where, onnxruntime.OrtArenaCfg(SCORING_MEMORY_MB * 2**20, -1, -1, -1)
    )
