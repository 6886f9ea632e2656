"""The trained model as an MLflow logged model: logged with its graphs, read back, its files'
digests recorded in the tracking store, and loaded or downloaded only as recorded.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import mlflow
import numpy as np
from mlflow.models import Model, ModelSignature, infer_signature
from mlflow.types import ColSpec, Schema

from components.core import identity
from components.core.file_size import files_written_at_most
from components.tracking import store
from components.tracking.store import tracking_uri
from components.tracking.tags import IDENTITY_TAG

if TYPE_CHECKING:  # torch loads where a model is logged or loaded
    import torch

MODEL_NAME = "model"
MOST_MODEL_BYTES = 512 * 2**20  # a logged model's files together: a net's are 1–150 MB
MOST_UNRECORDED_BYTES = 2**20  # a file no digest names: MLflow's MLmodel, environment files
VIEWS_KEY = "views"  # the metadata key of the views a call scores per photo


def signature(example: np.ndarray, output: np.ndarray, classes: list[str]) -> ModelSignature:
    """Pixels in (N×C×S×S, 0–255), one logit column per class out, named in label order."""
    if output.shape[1:] != (len(classes),):
        raise ValueError(f"expected {len(classes)} logits an image, found shape {output.shape}")
    columns = Schema([ColSpec("float", f"logit_{name}") for name in classes])
    return ModelSignature(inputs=infer_signature(example).inputs, outputs=columns)


def log_model(
    model: torch.nn.Module,
    example: np.ndarray,
    output_digests: dict[str, str],
    beside: list[Path],
    classes: list[str],
    views: int,
) -> str:
    """Log ``model`` of ``classes`` with a signature and input example, and ``beside`` (its
    spec and ONNX graphs) beside its MLmodel file; read it back, check it predicts, and
    record its identity.
    ``views``: the views of each photo one call of ``model`` scores, in its metadata (a
    scorer bounds the photos a call by it).

    The identity (``record_identity``): ``output_digests`` (the train step's ``model.pt``
    and graphs, from the bytes it wrote) and the digest of every file of the logged model
    as read back. Returns the model URI.
    """
    import torch

    # a CPU copy with the weights in the default layout: torch.export's packaging does not
    # recognise channels-last weights as whole tensors (the input still runs channels-last)
    model = copy.deepcopy(model).cpu().eval().to(memory_format=torch.contiguous_format)
    with torch.no_grad():
        expected = model(torch.from_numpy(example)).numpy()
    info = mlflow.pytorch.log_model(
        model,
        name=MODEL_NAME,
        serialization_format="pt2",  # torch.export: loading it runs no pickle
        signature=signature(example, expected, classes),
        input_example=example,
        metadata={
            "classes": classes,
            "output": "logits, one column per class",
            VIEWS_KEY: views,
        },
        pip_requirements=[f"torch=={torch.__version__.split('+')[0]}", "numpy"],
        validate_serving_input=False,  # reloaded and checked below, as served: one load, not two
    )
    for file in beside:
        store.client().log_model_artifact(info.model_id, str(file))
    with tempfile.TemporaryDirectory(prefix="logged-") as scratch:
        folder = download_model(info.model_uri, Path(scratch))
        logged = identity.folder_digests(folder)
        changed = [
            name
            for name in output_digests
            if logged.get(name, output_digests[name]) != output_digests[name]
        ]
        if changed:
            raise RuntimeError(f"the model logged at {info.model_uri} holds other {changed}")
        loaded = load_model(folder.as_uri())
        with torch.no_grad():
            again = loaded(torch.from_numpy(example)).numpy()
    if not np.allclose(again, expected, atol=1e-5):
        raise RuntimeError(f"the model logged at {info.model_uri} predicts differently on reload")
    record_identity(info.model_id, {**logged, **output_digests})
    return str(info.model_uri)


def record_identity(model_id: str, digests: dict[str, str]) -> None:
    """The digests of a logged model's files as its tags (``sha256.FILE``), in the
    tracking store: out of reach of whoever can write its artifacts."""
    tags = {f"{IDENTITY_TAG}{name}": digest for name, digest in digests.items()}
    store.client().set_logged_model_tags(model_id, tags)


def recorded_identity(model_id: str) -> dict[str, str]:
    """The digests the tracking store records for logged model ``model_id``'s files.

    Raises:
        ModelIdentityError: it records none (a model logged without them).
    """
    tags = store.client().get_logged_model(model_id).tags or {}
    found = {
        key.removeprefix(IDENTITY_TAG): value
        for key, value in tags.items()
        if key.startswith(IDENTITY_TAG)
    }
    if not found:
        raise identity.ModelIdentityError(
            f"MLflow model {model_id} at {tracking_uri()} records no digests of its files, so "
            "they cannot be checked and are not loaded; train it again"
        )
    return identity.parse_digests(found, f"MLflow model {model_id}'s tags")


def model_id_of(uri: str) -> str:
    """The logged model (``m-…``) a ``models:/`` or ``runs:/RUN/model`` URI names.

    Raises:
        ValueError: another kind of URI, whose files no tracking store vouches for.
    """
    mlflow.set_tracking_uri(tracking_uri())
    client = store.client()
    if uri.startswith("runs:/"):
        return logged_model_id(uri.removeprefix("runs:/").split("/")[0])
    reference = uri.removeprefix("models:/") if uri.startswith("models:/") else None
    if reference is None:
        raise ValueError(
            f"expected a model as models:/NAME@ALIAS, models:/NAME/VERSION or "
            f"runs:/RUN/model, whose files the tracking store records, found {uri!r:.200}"
        )
    if reference.startswith("m-") and "/" not in reference:
        return reference
    name, at, alias = reference.rpartition("@")
    if at:
        version = client.get_model_version_by_alias(name, alias)
    else:
        name, _, number = reference.rpartition("/")
        version = client.get_model_version(name, number)
    # MLflow's stores leave model_id empty; the version's source names the logged model
    source = str(version.source or "").removeprefix("models:/")
    model_id = version.model_id or (source if re.fullmatch(r"m-[0-9a-f]{32}", source) else None)
    if not model_id:
        raise identity.ModelIdentityError(
            f"{uri} names a model version registered from no logged model (its source is "
            f"{version.source!r:.200}); its files cannot be checked"
        )
    return str(model_id)


def logged_model_of(folder: Path) -> str:
    """The logged model (``m-…``) an MLflow model folder's MLmodel file says it is.

    Raises:
        ModelIdentityError: its MLmodel names none.
    """
    model_id = Model.load(str(folder / "MLmodel")).model_id
    if not isinstance(model_id, str) or not model_id.startswith("m-"):
        raise identity.ModelIdentityError(
            f"expected {identity.RECORD} in {folder}, or an MLmodel file naming the logged "
            f"model whose record the tracking store holds, found neither: the files cannot "
            "be checked, so they are not loaded"
        )
    return model_id


def download_verified(uri: str, folder: Path) -> tuple[Path, dict[str, str]]:
    """A logged or registered model's files into ``folder``, each checked against the
    digests the tracking store records for it; the folder that holds them, and the record.

    Raises:
        ModelIdentityError: a file that is not the one recorded.
    """
    model_id = model_id_of(uri)
    record = recorded_identity(model_id)
    check_listed_sizes(model_id, record)
    where = download_model(uri, folder)
    reads = identity.folder_digests(where)
    identity.verify(where, record, reads, f"the tracking store (MLflow model {model_id})")
    return where, record


def check_listed_sizes(model_id: str, record: dict[str, str]) -> None:
    """Refuse, before anything is downloaded, a logged model whose files the artifact store
    lists larger than a model's: a file no digest names over ``MOST_UNRECORDED_BYTES``, or
    all of them over ``MOST_MODEL_BYTES``.

    Raises:
        ModelIdentityError: such a file, or such a total.
    """
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    location = store.client().get_logged_model(model_id).artifact_location
    repository, pending, sizes = get_artifact_repository(location), [""], {}
    while pending:
        for info in repository.list_artifacts(pending.pop() or None):
            if info.is_dir:
                pending.append(info.path)
            else:
                sizes[info.path] = info.file_size or 0
    unrecorded = [name for name, size in sizes.items() if name not in record]
    large = [name for name in unrecorded if sizes[name] > MOST_UNRECORDED_BYTES]
    if large or sum(sizes.values()) > MOST_MODEL_BYTES:
        raise identity.ModelIdentityError(
            f"refusing MLflow model {model_id}: expected its files to hold at most "
            f"{MOST_MODEL_BYTES // 2**20} MiB, each file no digest names at most "
            f"{MOST_UNRECORDED_BYTES // 2**20} MiB, found {sum(sizes.values()) / 2**20:.0f} MiB"
            + (f" and {large[0]!r:.100} of {sizes[large[0]] / 2**20:.0f} MiB" if large else "")
            + "; nothing was downloaded"
        )


def load_model(uri: str) -> torch.nn.Module:
    """Load a logged model by URI onto the CPU; a pickled model is refused, never run.

    Raises:
        mlflow.exceptions.MlflowException: the model is saved with pickle; a model
            from a registry or a bucket is untrusted, and unpickling it runs its code.
    """
    mlflow.set_tracking_uri(tracking_uri())
    with _pickle_refused():
        model: torch.nn.Module = mlflow.pytorch.load_model(uri, map_location="cpu")
        return model


@contextlib.contextmanager
def _pickle_refused() -> Iterator[None]:
    """MLflow's own switch against unpickling models, off (its default is on) for a block."""
    key = "MLFLOW_ALLOW_PICKLE_DESERIALIZATION"
    before = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def download_model(uri: str, folder: Path) -> Path:
    """A logged or registered model's files into ``folder``, as MLflow resolves ``uri``;
    the folder that holds them: ``folder`` for ``models:/``, a folder in it named as the
    URI's last part for the others (``runs:/RUN/model``: ``folder/model``).

    Raises:
        ValueError: what arrived is not an MLflow model (no MLmodel file), or a file
            grew past a model's bound as it arrived.
    """
    mlflow.set_tracking_uri(tracking_uri())
    # each file stops at a model's bound as it arrives, whatever the store listed
    with files_written_at_most(MOST_MODEL_BYTES, f"the files of {uri}", folder):
        where = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(folder)))
    if not (where / "MLmodel").is_file():
        raise ValueError(f"expected an MLflow model at {uri}, found no MLmodel file in it")
    return where


def model_input(uri: str) -> tuple[tuple[int, ...], str]:
    """A logged model's N×C×H×W input shape, from its signature (N is -1), and the views
    of each photo one call scores as its metadata says them ("1" where it says none)."""
    mlflow.set_tracking_uri(tracking_uri())
    parsed = urlparse(uri)
    if parsed.scheme == "file":  # a model's folder: its MLmodel file, no tracking server
        model = Model.load(parsed.path)
        signature, metadata = model.signature, model.metadata
    else:
        info = mlflow.models.get_model_info(uri)
        signature, metadata = info.signature, info.metadata
    inputs = signature.inputs.to_dict() if signature else []
    if len(inputs) != 1 or "tensor-spec" not in inputs[0]:
        raise ValueError(
            f"expected a model logged with the signature of one input tensor at {uri}, "
            f"found {inputs or 'no signature'}"
        )
    return tuple(inputs[0]["tensor-spec"]["shape"]), str((metadata or {}).get(VIEWS_KEY, 1))


def logged_model_id(run_id: str) -> str:
    """The id (``m-…``) of the model the run logged last.

    Raises:
        LookupError: the run logged no model.
    """
    client = store.client()
    run = client.get_run(run_id)
    found = client.search_logged_models(
        experiment_ids=[run.info.experiment_id],
        filter_string=f"source_run_id = '{run_id}' AND name = '{MODEL_NAME}'",
        order_by=[{"field_name": "creation_time", "ascending": False}],
        max_results=1,
    )
    if not found:
        raise LookupError(f"expected a model logged by MLflow run {run_id}, found none")
    return found[0].model_id
