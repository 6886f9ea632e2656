"""The source listing in the tracking store: the download step records there which files
it extracted, with their sha256s, and evaluate reads the record back to check a test
split against it. The store, not the artifacts the steps pass on, vouches for it."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from mlflow.exceptions import MlflowException

from components.core.names import DEFAULT_EXPERIMENT
from components.tracking import kfp_tracking, run_log, store
from components.tracking.tags import SOURCE_LISTING_TAG

LISTING_ARTIFACT = "source/listing.json"
SOURCE_TAG = "data.source"  # where the files came from, any secret masked
STEP_TAG = "step"


def record_listing(data: bytes, source: str, experiment: str = DEFAULT_EXPERIMENT) -> str:
    """Record a source listing (its bytes) in the tracking store; the run that holds it.

    Where KFP's MLflow tracking made this task a run, it goes there; else into a run of
    its own in ``experiment``, named ``download`` and ended.
    """
    task = kfp_tracking.kfp_task()
    tags = {STEP_TAG: "download", SOURCE_TAG: source}
    run_id = task.run_id if task else run_log.create_run(experiment, "download", tags)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / Path(LISTING_ARTIFACT).name
        path.write_bytes(data)
        run_log.log_artifacts_into(run_id, [path], str(Path(LISTING_ARTIFACT).parent))
    digest = hashlib.sha256(data).hexdigest()
    run_log.finish_run(
        run_id, {}, {**tags, SOURCE_LISTING_TAG: digest}, status=None if task else "FINISHED"
    )
    return run_id


def listing_digest(run_id: str) -> str | None:
    """The sha256 of the source listing the download step recorded in run ``run_id``."""
    return run_log.run_tag(run_id, SOURCE_LISTING_TAG)


def recorded_listing(run_id: str, most_bytes: int) -> bytes:
    """The bytes of the source listing recorded in run ``run_id``, once they are the ones
    whose digest the download step tagged it with.

    Raises:
        LookupError: no such run, or it records no listing.
        ValueError: the listing is not the one tagged, or larger than ``most_bytes``.
    """
    store.check_server()
    try:
        digest = run_log.run_tag(run_id, SOURCE_LISTING_TAG)
    except MlflowException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise LookupError(
            f"expected MLflow run {run_id}, which records the source listing, in the "
            f"tracking store {store.tracking_uri()}, found no such run; download the photos "
            "again with this tracking store"
        ) from None
    data = run_log.load_run_bytes(run_id, LISTING_ARTIFACT, most_bytes)
    if digest is None or data is None:
        raise LookupError(
            f"expected the download step's source listing {LISTING_ARTIFACT} and its digest "
            f"in tag {SOURCE_LISTING_TAG} of MLflow run {run_id}, found none; download the photos "
            "again with this tracking store"
        )
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(
            f"expected the source listing in MLflow run {run_id} to be the one the download "
            f"step recorded (sha256 {digest[:12]}…), found other bytes"
        )
    return data
