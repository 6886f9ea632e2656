"""The test split checked against its source: its photos must be the source's test share
(``components.data.test_share``), as the download step's listing in the tracking store
names them, before a figure on them is reported."""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from components.data.archives import ExtractionLimits
from components.data.kept_photos import left_out_files
from components.data.layout import label_of_name
from components.data.test_share import (
    LISTING_BYTES_A_FILE,
    SourceListing,
    check_test_split,
    source_test_share,
)
from components.tracking.source_listing import listing_digest, recorded_listing
from components.tracking.tags import LISTING_DIGEST_PARAM, SOURCE_LISTING_PARAM

log = logging.getLogger(__name__)
# the largest listing read back: an entry for each file an archive may hold
MOST_LISTING_BYTES = ExtractionLimits.max_files * LISTING_BYTES_A_FILE


def listing_run(given: str | None, params: dict[str, str], run_id: str) -> str | None:
    """The run that records the test split's source listing: the one given (the
    pipeline's download task's), whose listing must be the one the training run recorded
    (a search's trials may have read a download of their own of the same source), else
    the training run's.

    Raises:
        ValueError: the two listings differ.
    """
    recorded = params.get(SOURCE_LISTING_PARAM)
    if given and recorded and given != recorded:
        found = listing_digest(given)
        if found is None or found != params.get(LISTING_DIGEST_PARAM):
            raise ValueError(
                f"refusing to score MLflow run {run_id}'s model: its training recorded the "
                f"source listing of MLflow run {recorded}, this run's download step recorded "
                f"{given}, another listing; evaluate the model on the photos of its own "
                "pipeline run"
            )
    return given or recorded


def check_against_source(
    run: str, meta: dict[str, Any], photos: list[tuple[str, int]], data_dir: Path
) -> dict[str, Any]:
    """Check the test split's ``photos`` (sha256s and labels, as scored) against the
    source listing recorded in MLflow run ``run``; what the report records of it.

    Raises:
        LookupError: the run records no listing.
        ValueError: the split is not the source's test share, or the listing is not the
            one recorded.
    """
    listing = SourceListing.from_bytes(recorded_listing(run, MOST_LISTING_BYTES))
    fraction = float(meta["config"]["test_fraction"])
    label_of = functools.partial(
        label_of_name,
        layout=meta["layout"],
        classes=meta["classes"],
        folders=meta.get("class_folders", []),
    )
    share = source_test_share(listing, label_of, fraction)
    check_test_split(share, photos, listing, left_out_files(data_dir), fraction)
    log.info(
        "the test split holds the source's test share: %d photos of the %d files its "
        "listing names (sha256 %s…, MLflow run %s), %d left out as broken",
        len(photos), len(listing.files), listing.sha256()[:12], run, len(share) - len(photos),
    )  # fmt: skip
    return {"run": run, "sha256": listing.sha256(), "test_fraction": fraction}
