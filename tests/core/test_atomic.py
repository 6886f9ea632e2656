"""Atomic outputs: a reader sees a file or directory complete or not at all; nothing foreign
is ever replaced."""

from __future__ import annotations

import json
import shutil

import pytest

from components.core import atomic
from components.core.atomic import MARKER


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "record.json"
    atomic.write_json(path, {"b": 1, "a": [2]})
    assert path.read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'
    with pytest.raises(RuntimeError), atomic.atomic_file(path, "w") as handle:
        handle.write("half")
        raise RuntimeError("killed mid-write")
    assert json.loads(path.read_text()) == {"a": [2], "b": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_only_an_empty_folder_or_the_steps_own_output_may_be_replaced(tmp_path):
    atomic.check_replaceable(tmp_path / "absent", "train")
    (tmp_path / "empty").mkdir()
    atomic.check_replaceable(tmp_path / "empty", "train")
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="expected an output directory at .*, found a file"):
        atomic.check_replaceable(tmp_path / "file", "train")
    with atomic.atomic_directory(tmp_path / "out", "preprocess") as staging:
        (staging / "meta.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not written by the train step"):
        atomic.check_replaceable(tmp_path / "out", "train")
    atomic.check_replaceable(tmp_path / "out", "preprocess")
    (tmp_path / "out/notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="the preprocess step did not write: notes.txt"):
        atomic.check_replaceable(tmp_path / "out", "preprocess")


def test_a_marker_that_does_not_read_claims_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for text in ("{", "[]", '"preprocess"'):
        (out / MARKER).write_text(text)
        with pytest.raises(FileExistsError, match="not written by the preprocess step"):
            atomic.check_replaceable(out, "preprocess")


def test_an_atomic_directory_replaces_its_own_output_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out"
    with atomic.atomic_directory(out, "download") as staging:
        (staging / "a.txt").write_text("first")
    assert json.loads((out / MARKER).read_text()) == {"step": "download", "files": ["a.txt"]}
    with pytest.raises(OSError), atomic.atomic_directory(out, "download") as staging:
        (staging / "b.txt").write_text("second")
        raise OSError("No space left on device")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "a.txt"]
    with atomic.atomic_directory(out, "download") as staging:
        (staging / "b.txt").write_text("second")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging left


def test_claiming_a_directory_records_the_files_and_drops_their_abandoned_temporaries(tmp_path):
    out = tmp_path / "model"
    atomic.claim_directory(out, "train", ["model.pt", "checkpoint.pt"])
    (out / "checkpoint.pt").write_bytes(b"weights")
    (out / ".checkpoint.pt.x1y2.tmp").write_bytes(b"half")  # a killed run's write
    atomic.claim_directory(out, "train", ["model.pt", "checkpoint.pt"])
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "checkpoint.pt"]
    assert json.loads((out / MARKER).read_text())["files"] == ["checkpoint.pt", "model.pt"]
    with pytest.raises(FileExistsError, match="not written by the evaluate step"):
        atomic.claim_directory(out, "evaluate", ["metrics.json"])


def test_only_this_steps_own_leftovers_beside_the_output_are_removed(tmp_path):
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    precious = tmp_path / ".raw.old-2024"  # a user's folder that looks like a leftover
    precious.mkdir()
    (precious / "precious.txt").write_text("x")
    foreign_tmp = tmp_path / f".raw.{dead}.ab.tmp"  # the pattern, but not our staging
    foreign_tmp.mkdir()
    with atomic.atomic_directory(tmp_path / "raw", "download") as staging:
        (staging / "a.txt").write_text("1")
    # a killed run of this step left its staging and its retired output, records and all
    ours_tmp, ours_old = tmp_path / f".raw.{dead}.cd.tmp", tmp_path / f".raw.old-{dead}"
    for leftover, record in ((ours_tmp, atomic.STAGING), (ours_old, atomic.RETIRED)):
        leftover.mkdir()
        made = atomic.leftover_record(leftover, "download", tmp_path / "raw")
        atomic.write_json(leftover / record, made)
    atomic.write_json(ours_old / MARKER, {"step": "download", "files": []})
    other_step = tmp_path / f".raw.old-{dead + 1}"
    other_step.mkdir()
    atomic.write_json(other_step / MARKER, {"step": "preprocess", "files": []})
    # the user's backup of an earlier output, marker and all, named as a leftover would be
    backup = tmp_path / f".raw.old-{dead + 2}"
    shutil.copytree(tmp_path / "raw", backup)
    copied_leftover = tmp_path / f".raw.old-{dead + 3}"
    shutil.copytree(ours_old, copied_leftover)  # even a copy of a real leftover
    with atomic.atomic_directory(tmp_path / "raw", "download") as staging:
        (staging / "b.txt").write_text("2")
    assert (precious / "precious.txt").read_text() == "x"
    assert foreign_tmp.is_dir() and other_step.is_dir()
    assert (backup / "a.txt").read_text() == "1" and copied_leftover.is_dir()
    assert not ours_tmp.exists() and not ours_old.exists()


def test_an_empty_folder_or_a_link_is_something_the_step_did_not_write(tmp_path):
    out = tmp_path / "out"
    (out / "empty").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="not written by the train step"):
        atomic.check_replaceable(out, "train")
    (out / "empty").rmdir()
    (out / "link").symlink_to(tmp_path)
    with pytest.raises(FileExistsError, match="not written by the train step"):
        atomic.check_replaceable(out, "train")
    with pytest.raises(FileExistsError, match="found a file or link"):
        atomic.check_replaceable(out / "link", "train")


def test_a_foreign_folder_is_refused_at_its_first_entry_without_walking_it(tmp_path, monkeypatch):
    home = tmp_path / "home"
    for i in range(50):
        (home / f"project{i}/src").mkdir(parents=True)
        (home / f"project{i}/src/main.py").write_text("x")
    scans = []
    real_scandir = atomic.os.scandir
    monkeypatch.setattr(atomic.os, "scandir", lambda p: scans.append(p) or real_scandir(p))
    with pytest.raises(FileExistsError, match="not written by the download step"):
        atomic.check_replaceable(home, "download")
    assert len(scans) == 1


@pytest.mark.parametrize("where", [".", "/"])
def test_the_current_folder_or_the_root_is_refused_at_once(tmp_path, monkeypatch, where):
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileExistsError, match="refusing to replace /"):
        with atomic.atomic_directory(tmp_path / where if where == "." else where, "download"):
            pytest.fail("nothing is staged for a folder that cannot be replaced")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_second_writer_of_one_output_is_refused_while_the_first_holds_it(tmp_path):
    out = tmp_path / "model"
    with atomic.exclusive(out, "train"):
        atomic.claim_directory(out, "train", ["model.pt"])
        with pytest.raises(FileExistsError, match="another train run is writing into it now"):
            with atomic.exclusive(out, "train"):
                pytest.fail("two writers at once")
    with atomic.exclusive(out, "train"):  # released: the next run may write
        pass
    with pytest.raises(ConnectionError), atomic.exclusive(tmp_path / "failed", "train"):
        atomic.claim_directory(tmp_path / "failed", "train", ["model.pt"])
        raise ConnectionError("the tracking server did not answer")
    assert not (tmp_path / "failed").exists()  # a run that wrote nothing leaves nothing
    (tmp_path / "mine").mkdir()  # a user's empty folder stays, as empty as it was
    with pytest.raises(ConnectionError), atomic.exclusive(tmp_path / "mine", "train"):
        atomic.claim_directory(tmp_path / "mine", "train", ["model.pt"])
        raise ConnectionError("the tracking server did not answer")
    assert list((tmp_path / "mine").iterdir()) == []
