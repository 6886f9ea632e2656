"""Loading a model to score with, from a train output, an MLflow model's folder or an MLflow
URI (runs:/…, models:/…, s3://…): its ONNX graph in ONNX Runtime where it has one and the
runtime is onnx, else its torch program."""

from __future__ import annotations

import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from components.core import identity
from components.core.int8_cpu import multiplies_int8_exactly
from components.core.names import INT8_FILE, INT8_RUNTIME, ONNX_FILE, SPEC_FILE, WEIGHTS_FILE
from components.data.arrays import shape_problems
from components.networks.spec import read_spec
from components.scoring.onnx_file import INPUT, OUTPUT, read_onnx
from components.scoring.scorers import OnnxScorer, TorchScorer, pick_runtime, session_threads

log = logging.getLogger(__name__)

URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # runs:, models:, s3:, file: (not C:)


@dataclass(frozen=True)
class LoadedModel:
    """A scorer, the photos it takes (``channels``×``image_size``² pixels) and the classes
    its logits are of, in order; ``files``: the digest of each file it was read from,
    each checked against the model's record."""

    scorer: OnnxScorer | TorchScorer
    channels: int
    image_size: int
    classes: tuple[str, ...]
    files: dict[str, str]


@dataclass(frozen=True)
class Record:
    """The digests a model's files must have, and where they were read (for errors)."""

    digests: dict[str, str]
    source: str

    def check(self, folder: Path, reads: list[str]) -> dict[str, str]:
        """Verify ``folder`` (``identity.verify``); the digests of the files ``reads``."""
        identity.verify(folder, self.digests, reads, self.source)
        return {name: self.digests[name] for name in reads}


def load_scorer(model: str, runtime: str = "auto", passes: int = 1) -> LoadedModel:
    """The model at ``model`` as a scorer on this CPU, with the input it takes, once the
    files it reads are those its record names (``components.core.identity``).

    Args:
        model: a train output folder, an MLflow model's folder (what
            ``components.fetch_model`` writes) or an MLflow model URI (``runs:/``,
            ``models:/``, ``file:`` of a folder).
        runtime: onnx, onnx-int8, torch or auto: the int8 graph where the model has one
            and this CPU multiplies int8 exactly (``components.core.int8_cpu``), else
            the float32 one. A model without an int8 graph is scored by its float32
            one, one without an ONNX file by torch, and the log says so.
        passes: forward passes that run at once, sharing the cores (ONNX Runtime).

    Raises:
        FileNotFoundError: ``model`` is neither a URI nor an existing folder.
        ModelIdentityError: a file that is not the one recorded, or no record.
        ValueError: a file, a model outside the data contract, or an ONNX file refused.
        TrackingUnavailableError: a ``runs:/`` or ``models:/`` URI whose tracking server
            does not answer (at once, not after MLflow's retries).
    """
    if runtime != "auto":
        runtime = pick_runtime(runtime, "cpu")
    if model.startswith("file:"):
        model = urlparse(model).path
    elif URI_SCHEME.match(model):
        return _from_uri(model, runtime, passes)
    folder = Path(model)
    if not folder.is_dir():
        found = "a file" if folder.exists() else "nothing there"
        raise FileNotFoundError(
            f"expected a train output folder, an MLflow model's folder or an MLflow "
            f"model URI (runs:/RUN/model, models:/NAME@ALIAS) as --model, found {found}: "
            f"{model}"
        )
    return _from_folder(folder, runtime, passes, model, folder_record(folder))


def folder_record(folder: Path) -> Record:
    """The record a model folder's files are checked against: its ``identity.json``; for
    an MLflow model's folder without one, what the tracking store records for the logged
    model its MLmodel file names."""
    if (folder / identity.RECORD).exists() or not (folder / "MLmodel").is_file():
        return Record(identity.read_record(folder), str(folder / identity.RECORD))
    from components.tracking import logged_models

    model_id = logged_models.logged_model_of(folder)
    return Record(logged_models.recorded_identity(model_id), f"MLflow model {model_id}'s record")


def _from_uri(uri: str, runtime: str, passes: int) -> LoadedModel:
    """An MLflow URI's model: its files fetched once and checked against the tracking
    store's record, for ONNX Runtime or torch."""
    from components.tracking import logged_models, store

    store.check_server()
    with tempfile.TemporaryDirectory(prefix="model-") as scratch:
        folder, digests = logged_models.download_verified(uri, Path(scratch))
        return _from_folder(folder, runtime, passes, uri, Record(digests, "the tracking store"))


def _from_folder(
    folder: Path, runtime: str, passes: int, shown: str, record: Record
) -> LoadedModel:
    """A model folder's ONNX graph in ONNX Runtime (``graph_to_score``); its torch
    program for ``torch`` or where it has no ONNX file. ``shown``: the model as the user
    named it, for the log."""
    graph = None if runtime == "torch" else graph_to_score(folder, runtime, shown)
    if graph:
        return _from_onnx(folder, graph, passes, record)
    if runtime != "torch":
        log.warning("%s holds no %s: scoring with torch", shown, ONNX_FILE)
    return _torch_from_folder(folder, record)


def graph_to_score(folder: Path, runtime: str, shown: str) -> str | None:
    """The ONNX file of ``folder`` that ``runtime`` (onnx, onnx-int8 or auto) scores: the
    int8 graph for onnx-int8, and for auto where this CPU multiplies int8 exactly; else
    the float32 graph; None where there is none. The log says why where the choice is
    not the one asked for."""
    has_int8 = (folder / INT8_FILE).is_file()
    if runtime == INT8_RUNTIME and not has_int8:
        log.warning("%s holds no %s: scoring its float32 graph", shown, INT8_FILE)
    elif runtime != "onnx" and has_int8:
        if multiplies_int8_exactly():
            return INT8_FILE
        if runtime == INT8_RUNTIME:
            log.warning(
                "scoring %s's int8 graph on a CPU without int8 dot products (VNNI): its "
                "products may saturate, and its answers differ from those it was judged by",
                shown,
            )
            return INT8_FILE
        log.warning(
            "scoring %s's float32 graph, not its int8 one: this CPU has no int8 dot "
            "products (VNNI), without which int8 products may saturate",
            shown,
        )
    return ONNX_FILE if (folder / ONNX_FILE).is_file() else None


def _torch_from_folder(folder: Path, record: Record) -> LoadedModel:
    """A train output's or an MLflow model folder's torch program."""
    if (folder / "MLmodel").is_file():  # fetched by components.fetch_model, say
        files = record.check(folder, list(identity.folder_digests(folder)))
        return _from_mlflow(folder.resolve().as_uri(), record, files)
    from components.networks.models import load_classifier

    files = record.check(folder, [WEIGHTS_FILE])
    classifier, spec = load_classifier(folder)
    classes = tuple(spec["classes"])
    return LoadedModel(
        TorchScorer(classifier), spec["channels"], spec["image_size"], classes, files
    )


def _from_onnx(folder: Path, name: str, passes: int, record: Record) -> LoadedModel:
    """An ONNX file, checked against its record and as data, in ONNX Runtime; its input
    and output checked."""
    files = record.check(folder, [name])
    path = folder / name
    threads = session_threads(passes)
    scorer = OnnxScorer(read_onnx(path), threads)
    inputs, outputs = scorer.session.get_inputs(), scorer.session.get_outputs()
    shape = list(inputs[0].shape) if len(inputs) == 1 else []
    fits = (
        len(inputs) == len(outputs) == 1
        and (inputs[0].name, outputs[0].name) == (INPUT, OUTPUT)
        and inputs[0].type == "tensor(float)"
        and len(shape) == 4
        and all(isinstance(side, int) for side in shape[1:])
        and shape[2] == shape[3]
        and len(outputs[0].shape) == 2
    )
    problems = shape_problems(shape[1], shape[2]) if fits else ["its input and output"]
    if problems:
        found = [(i.name, i.type, i.shape) for i in inputs] + [(o.name, o.shape) for o in outputs]
        raise ValueError(
            f"expected an ONNX model at {path} with one float input {INPUT!r} of N×C×S×S "
            f"photos and one output {OUTPUT!r} of N×K logits, within the data contract "
            f"({'; '.join(problems)}), found {found!s:.300}"
        )
    log.info(
        "scoring with ONNX Runtime (%s, sha256 %s…): %d forward passes at once, %d threads each",
        path.name, files[name][:12], passes, threads,
    )  # fmt: skip
    spec = _weights_spec(folder, record, files)
    taken = (spec["channels"], spec["image_size"], len(spec["classes"]))
    if taken != (shape[1], shape[2], outputs[0].shape[1]):
        raise ValueError(
            f"expected {path} to take the {taken[0]}×{taken[1]}² photos and answer the "
            f"{taken[2]} classes its spec names, found a graph of {shape[1]}×{shape[2]}² "
            f"photos and {outputs[0].shape[1]} logits"
        )
    return LoadedModel(scorer, shape[1], shape[2], tuple(spec["classes"]), files)


def _weights_spec(folder: Path, record: Record, files: dict[str, str]) -> dict[str, Any]:
    """The spec a model's weights were saved with (its classes, the photos it takes): its
    ``spec.json`` where the record holds that file's digest (torch stays unloaded), else
    read from ``model.pt``. ``files`` takes the digest of what was read.

    Raises:
        ValueError: the folder holds neither (an MLflow model logged without its spec).
    """
    if SPEC_FILE in record.digests:
        files |= record.check(folder, [SPEC_FILE])
        return read_spec(folder / SPEC_FILE)
    if not (folder / WEIGHTS_FILE).is_file():
        raise ValueError(
            f"expected {SPEC_FILE} (its classes and input) beside the graph in {folder}, "
            "found none in its record; train the model again"
        )
    from components.networks.models import load_classifier

    files |= record.check(folder, [WEIGHTS_FILE])
    return load_classifier(folder)[1]


def _from_mlflow(uri: str, record: Record, files: dict[str, str]) -> LoadedModel:
    """A logged model's torch program (no pickle), its input read from its signature and
    its classes from its spec."""
    from components.tracking import logged_models

    shape, views_said = logged_models.model_input(uri)
    square = len(shape) == 4 and shape[2] == shape[3]
    problems = shape_problems(shape[1], shape[2]) if square else ["square N×C×S×S images"]
    if problems:
        raise ValueError(
            f"expected a model at {uri} that takes {'; '.join(problems)}, found input shape {shape}"
        )
    spec = _weights_spec(Path(urlparse(uri).path), record, files)
    scorer = TorchScorer(logged_models.load_model(uri), views_said)
    return LoadedModel(scorer, shape[1], shape[2], tuple(spec["classes"]), files)
