"""A model's identity: the record of its files' digests, and the check every loader makes."""

from __future__ import annotations

import json

import pytest

from components.core import identity
from components.core.identity import ModelIdentityError


@pytest.fixture
def folder(tmp_path):
    """A model folder of two files, with their record."""
    (tmp_path / "model.pt").write_bytes(b"weights")
    (tmp_path / "data").mkdir()
    (tmp_path / "data/model.pt2").write_bytes(b"program")
    identity.write_record(tmp_path, identity.folder_digests(tmp_path))
    return tmp_path


def test_a_folders_record_names_every_file_but_itself(folder):
    record = identity.read_record(folder)
    assert record == {
        "data/model.pt2": identity.sha256_of_bytes(b"program"),
        "model.pt": identity.sha256_of_bytes(b"weights"),
    }
    identity.verify(folder, record, ["model.pt"], "its record")  # as recorded: no error


def test_a_changed_a_missing_or_an_unrecorded_file_is_refused_naming_it(folder):
    record = identity.read_record(folder)
    (folder / "model.pt").write_bytes(b"other weights")
    with pytest.raises(
        ModelIdentityError, match=r"refusing .*model\.pt: its sha256 is .*, its record records"
    ):
        identity.verify(folder, record, [], "its record")
    (folder / "model.pt").unlink()
    with pytest.raises(ModelIdentityError, match=r"refusing .*model\.pt: its sha256 is nothing"):
        identity.verify(folder, record, ["model.pt"], "its record")
    identity.verify(folder, record, ["data/model.pt2"], "its record")  # not read, not needed
    with pytest.raises(
        ModelIdentityError, match=r"refusing .*model\.onnx: its record records no digest"
    ):
        identity.verify(folder, record, ["model.onnx"], "its record")


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"model.pt": "not a digest"},
        {"../model.pt": "a" * 64},
        {"/etc/passwd": "a" * 64},
        {f"f{i}": "a" * 64 for i in range(65)},
        ["model.pt"],
    ],
    ids=["empty", "not a digest", "outside", "absolute", "too many", "a list"],
)
def test_a_record_that_is_not_names_and_digests_is_refused(folder, record):
    (folder / identity.RECORD).write_text(json.dumps({"sha256": record}))
    with pytest.raises(
        ModelIdentityError, match="expected a record of file names and their sha256"
    ):
        identity.read_record(folder)


def test_a_folder_without_a_record_is_refused(tmp_path):
    with pytest.raises(ModelIdentityError, match="expected identity.json beside the model's files"):
        identity.read_record(tmp_path)
