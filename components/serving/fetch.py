"""A registered model's files into a folder, for a model server to load from there."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

from components.core import identity
from components.tracking import logged_models, store

log = logging.getLogger(__name__)

# a version or an alias of a registered model: what the deploy step and the manifest name
REGISTERED = re.compile(r"models:/[\w.-]{1,256}(/[1-9][0-9]{0,8}|@[A-Za-z][\w-]{0,255})")


def fetch_model(source: str, destination: str) -> Path:
    """Download ``source`` into ``destination`` (made if missing, else empty), each file
    checked against the digests the tracking store records, and write that record there
    (``identity.json``); the folder.

    Raises:
        ModelIdentityError: a file that is not the one recorded (changed in the store).
        ValueError: ``source`` is not a registered model's version or alias, or
            ``destination`` holds files already (nothing is overwritten).
        TrackingUnavailableError: the tracking server does not answer.
    """
    if not REGISTERED.fullmatch(source):
        raise ValueError(
            f"expected a registered model as models:/NAME/VERSION or models:/NAME@ALIAS, "
            f"found {source!r:.200}"
        )
    folder = Path(destination)
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise ValueError(
            f"expected an empty folder to fetch {source} into, found files in {folder}"
        )
    store.check_server()
    try:
        where, record = logged_models.download_verified(source, folder)
    except identity.ModelIdentityError:
        for entry in list(folder.iterdir()):  # the folder was empty: all of it was fetched
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        raise
    identity.write_record(where, record)  # what the server checks the folder against
    log.info("fetched %s into %s, every file as the tracking store records it", source, folder)
    return folder
