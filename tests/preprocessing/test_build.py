"""The preprocess step on the real PetImages sample and on small generated JPEGs."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from components import preprocess
from components.core.atomic import MARKER, RETIRED, STAGING, leftover_record, write_json
from components.core.names import TEST_PHOTOS_DIR
from components.data.arrays import SPLITS, load_split, read_meta
from components.data.images import decode_bytes
from components.data.test_share import in_test_share
from components.preprocessing import build as building
from components.preprocessing import decoder as decoding
from components.preprocessing import plan as planning
from components.preprocessing import slices as slicing
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from tests.support.helpers import write_jpeg
from tests.support.processes import HANG_SECONDS

BROKEN = {
    "PetImages/Cat/666.jpg": "empty file",
    "PetImages/Dog/11702.jpg": "empty file",
    "PetImages/Cat/5000.jpg": "truncated",
    "PetImages/Dog/5004.jpg": "not an image",
}


def build(input_dir, output_dir, **fields) -> dict:
    """The preprocess step from ``input_dir`` into ``output_dir``; its meta.json."""
    return build_arrays(PreprocessConfig(input=str(input_dir), output=str(output_dir), **fields))


def test_sample_keeps_exactly_the_good_images(sample_arrays):
    meta = read_meta(sample_arrays)
    assert meta["kept"] == {"cat": 1001, "dog": 1002}
    assert {s["file"]: s["reason"] for s in meta["skipped"]}.keys() == BROKEN.keys()
    for entry in meta["skipped"]:
        assert BROKEN[entry["file"]] in entry["reason"]
    assert sorted(meta["ignored"]) == ["PetImages/Cat/Thumbs.db", "PetImages/Dog/Thumbs.db"]
    assert meta["duplicates_removed"] == 0


def test_sample_arrays_follow_the_contract(sample_arrays):
    meta = read_meta(sample_arrays)
    total = 0
    for split in SPLITS:
        images, labels = load_split(sample_arrays, split)
        assert images.dtype == np.uint8 and images.shape[1:] == (1, 40, 40)
        assert labels.dtype == np.int64 and set(labels.tolist()) == {0, 1}
        assert meta["counts"][split] == {
            "cat": int((labels == 0).sum()),
            "dog": int((labels == 1).sum()),
        }
        total += len(images)
    assert total == 2003
    # the test share: the photos whose sha256 falls in the lowest tenth, about 10% a class
    assert meta["counts"]["test"] == {"cat": 98, "dog": 104}
    kept = sorted((sample_arrays / TEST_PHOTOS_DIR).iterdir())
    digests = [hashlib.sha256(f.read_bytes()).hexdigest() for f in kept]
    assert len(digests) == 202 and all(in_test_share(d, 0.1) for d in digests)
    assert 0.2 < meta["mean"][0] < 0.8 and 0.1 < meta["std"][0] < 0.4


def test_no_image_appears_in_two_splits(sample_arrays):
    seen = {}
    for split in SPLITS:
        images, _ = load_split(sample_arrays, split)
        for row in images:
            seen.setdefault(hashlib.sha256(row.tobytes()).hexdigest(), set()).add(split)
    assert all(len(splits) == 1 for splits in seen.values())


def test_odd_formats_saved_as_jpg_are_kept(sample_images):
    folder = sample_images / "PetImages"
    for name in ("Dog/5001.jpg", "Cat/5005.jpg", "Cat/5002.jpg", "Dog/5003.jpg"):
        pixels = decode_bytes((folder / name).read_bytes(), size=16, channels=3)
        assert pixels.shape == (3, 16, 16) and pixels.std() > 0


@pytest.mark.slow
def test_same_seed_gives_identical_output_whatever_the_workers(sample_images, tmp_path):
    for workers, out in ((1, "a"), (2, "b")):
        build(
            sample_images, tmp_path / out, image_size=24, channels=3, split_seed=7, workers=workers
        )
    names = sorted(path.name for path in (tmp_path / "a").glob("*_*_*.npy"))
    assert len(names) == 2 * len(SPLITS)
    assert names == sorted(path.name for path in (tmp_path / "b").glob("*_*_*.npy"))
    for name in [*names, "meta.json"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def make_kaggle_folder(root, cats=6, dogs=6):
    for i in range(cats):
        write_jpeg(root / "train" / f"cat.{i}.jpg", seed=i)
    for i in range(dogs):
        write_jpeg(root / "train" / f"dog.{i}.jpg", seed=100 + i, mode="L")
    return root


def test_kaggle_layout_with_duplicates(tmp_path):
    root = make_kaggle_folder(tmp_path / "in")
    dup = (root / "train/cat.0.jpg").read_bytes()
    (root / "train/cat.50.jpg").write_bytes(dup)
    (root / "train/dog.50.jpg").write_bytes((root / "train/dog.1.jpg").read_bytes())
    (root / "train/dog.51.jpg").write_bytes((root / "train/dog.1.jpg").read_bytes())
    meta = build(
        root,
        tmp_path / "out",
        image_size=16,
        channels=3,
        workers=1,
        val_fraction=0.2,
        test_fraction=0.2,
    )
    assert meta["layout"] == "kaggle"
    assert meta["duplicates_removed"] == 3
    assert meta["kept"] == {"cat": 6, "dog": 6}
    assert sum(c["cat"] + c["dog"] for c in meta["counts"].values()) == 12


def test_each_splits_photos_digest_is_the_same_at_any_size_and_names_its_photos(tmp_path):
    """Models preprocessed at other sizes from one archive are scored on the same test
    photos: the digest says so, and changes when one photo of the split does."""
    root = make_kaggle_folder(tmp_path / "in")
    split = dict(workers=1, val_fraction=0.2, test_fraction=0.2)
    grey = build(root, tmp_path / "grey", image_size=16, channels=1, **split)
    rgb = build(root, tmp_path / "rgb", image_size=24, channels=3, **split)
    assert grey["photos_sha256"] == rgb["photos_sha256"]
    assert len(set(grey["photos_sha256"].values())) == 3
    write_jpeg(root / "train/cat.0.jpg", seed=99)  # another photo in one split
    changed = build(root, tmp_path / "changed", image_size=24, channels=3, **split)
    assert changed["photos_sha256"] != rgb["photos_sha256"]


def test_same_file_under_both_classes_is_dropped(tmp_path):
    root = make_kaggle_folder(tmp_path / "in")
    (root / "train/dog.60.jpg").write_bytes((root / "train/cat.2.jpg").read_bytes())
    meta = build(root, tmp_path / "out", image_size=16, workers=1)
    reasons = {s["file"]: s["reason"] for s in meta["skipped"]}
    assert set(reasons) == {"train/cat.2.jpg", "train/dog.60.jpg"}
    assert meta["kept"] == {"cat": 5, "dog": 6}


def test_truncated_jpeg_is_skipped_not_padded(tmp_path):
    root = make_kaggle_folder(tmp_path / "in")
    whole = (root / "train/cat.3.jpg").read_bytes()
    (root / "train/cat.3.jpg").write_bytes(whole[: len(whole) // 2])
    meta = build(root, tmp_path / "out", image_size=16, workers=1)
    assert [s["file"] for s in meta["skipped"]] == ["train/cat.3.jpg"]
    assert "truncated" in meta["skipped"][0]["reason"]


def test_grey_and_rgb_conversion_and_resize():
    buffer = io.BytesIO()
    Image.new("RGB", (300, 200), (200, 10, 10)).save(buffer, "JPEG")
    rgb = decode_bytes(buffer.getvalue(), size=20, channels=3)
    grey = decode_bytes(buffer.getvalue(), size=20, channels=1)
    assert rgb.shape == (3, 20, 20) and grey.shape == (1, 20, 20)
    assert abs(int(rgb[0].mean()) - 200) < 6 and rgb[1].mean() < 20
    assert abs(int(grey.mean()) - 66) < 6  # ITU-R 601 luma of (200, 10, 10)


def test_unknown_layout_says_what_was_expected_and_found(tmp_path):
    (tmp_path / "in/PetImages/cats").mkdir(parents=True)
    with pytest.raises(FileNotFoundError) as err:
        build(tmp_path / "in", tmp_path / "out", workers=1)
    assert "expected ROOT/CLASS/*.jpg (one folder per class" in str(err.value)
    assert "PetImages/cats/" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_failure_leaves_previous_output_untouched(tmp_path, monkeypatch):
    root = make_kaggle_folder(tmp_path / "in")
    build(root, tmp_path / "out", image_size=16, workers=1)
    before = (tmp_path / "out/meta.json").read_text()

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(building, "write_json", disk_full)
    with pytest.raises(OSError, match="No space"):
        build(root, tmp_path / "out", image_size=20, workers=1)
    assert (tmp_path / "out/meta.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cli_writes_meta(tmp_path):
    root = make_kaggle_folder(tmp_path / "in")
    preprocess.main(
        [
            "--input",
            str(root),
            "--output",
            str(tmp_path / "out"),
            "--image-size",
            "12",
            "--channels",
            "3",
            "--workers",
            "2",
        ]
    )
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["channels"] == 3 and meta["image_size"] == 12
    assert len(meta["mean"]) == 3


@pytest.mark.parametrize(
    ("cats", "broken_dogs", "found"),
    [
        (4, 0, r"class 'dog' .* found 0 \(0 files skipped in all\)"),  # one class only
        (0, 0, r"class 'cat' .* found 0 \(0 files skipped in all\)"),  # empty class folders
        (4, 3, r"class 'dog' .* found 0 \(3 files skipped in all\)"),  # dogs that don't decode
    ],
)
def test_a_class_without_photos_is_refused_naming_it(tmp_path, cats, broken_dogs, found):
    root = tmp_path / "in"
    for folder in ("Cat", "Dog"):
        (root / "PetImages" / folder).mkdir(parents=True)
    for i in range(cats):
        write_jpeg(root / "PetImages/Cat" / f"{i}.jpg", seed=i)
    for i in range(broken_dogs):
        (root / "PetImages/Dog" / f"{i}.jpg").write_bytes(b"\xff\xd8 not a jpeg %d" % i)
    with pytest.raises(ValueError, match=f"expected enough photos of {found}"):
        build(root, tmp_path / "out", **SMALL)
    assert not (tmp_path / "out").exists()


def test_a_shard_too_big_for_memory_is_refused_before_decoding(tmp_path, monkeypatch):
    root = make_kaggle_folder(tmp_path / "in")
    monkeypatch.setattr(planning, "available_memory", lambda: 100_000)  # 100 KB left
    decoded = []
    monkeypatch.setattr(decoding.images, "decode_file", lambda *a, **k: decoded.append(a))
    with pytest.raises(MemoryError, match=r"12 images at 3×64×64 need about 0.0 GiB"):
        build(root, tmp_path / "out", image_size=64, channels=3, workers=1)
    assert decoded == [] and not (tmp_path / "out").exists()


SMALL = {"image_size": 16, "workers": 1}


@pytest.mark.parametrize(
    "planted",
    [
        {"meta.json": "{}", "thesis.docx": "years of work"},  # a stray marker name
        {"model.pt": "weights", "notes.txt": "mine"},
        {"download.json": "{}", "photos/1.jpg": "x"},
    ],
    ids=["meta.json", "model.pt", "download.json"],
)
def test_a_folder_this_step_did_not_write_is_never_replaced(tmp_path, planted):
    root = make_kaggle_folder(tmp_path / "in")
    out = tmp_path / "users-folder"
    for name, text in planted.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    with pytest.raises(FileExistsError, match="not written by the preprocess step"):
        build(root, out, **SMALL)
    assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == set(planted)


def test_an_output_with_a_file_added_by_hand_is_not_replaced(tmp_path):
    root = make_kaggle_folder(tmp_path / "in")
    out = tmp_path / "arrays"
    build(root, out, **SMALL)
    (out / "my-notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="did not write: my-notes.txt"):
        build(root, out, **SMALL)
    assert (out / "my-notes.txt").read_text() == "keep me" and (out / "meta.json").is_file()
    (out / "my-notes.txt").unlink()
    build(root, out, **SMALL)  # its own output: replaced


def test_another_steps_output_is_not_replaced(tmp_path, sample_zip):
    from components.downloading.fetch import fetch

    raw = tmp_path / "raw"
    fetch(str(sample_zip), raw)
    with pytest.raises(FileExistsError, match="not written by the preprocess step"):
        build(raw, raw, **SMALL)
    assert (raw / "download.json").is_file()


def test_staging_left_by_a_killed_run_is_cleaned_and_a_live_ones_is_not(tmp_path):
    root = make_kaggle_folder(tmp_path / "in")
    dead = 2**22 + 12345  # above Linux's default pid_max: no such process
    abandoned = [tmp_path / f".arrays.{dead}.x1.tmp", tmp_path / f".arrays.old-{dead}"]
    live = tmp_path / ".arrays.1.x2.tmp"  # pid 1 is alive
    for folder in (*abandoned, live):
        folder.mkdir()
        (folder / "train_images.npy").write_bytes(b"half")
    # what this step leaves: records naming it, the output and the very folder they are in
    output = tmp_path / "arrays"
    write_json(abandoned[0] / STAGING, leftover_record(abandoned[0], "preprocess", output))
    write_json(live / STAGING, leftover_record(live, "preprocess", output))
    write_json(abandoned[1] / RETIRED, leftover_record(abandoned[1], "preprocess", output))
    write_json(abandoned[1] / MARKER, {"step": "preprocess", "files": ["train_images.npy"]})
    build(root, tmp_path / "arrays", **SMALL)
    assert not any(folder.exists() for folder in abandoned)
    assert live.is_dir()


def test_tiff_photos_are_kept_like_the_others(tmp_path):
    root = tmp_path / "in"
    for i in range(4):
        for folder, mode in (("Cat", "RGB"), ("Dog", "L")):
            jpeg = write_jpeg(
                root / "PetImages" / folder / f"{i}.jpg", seed=i + len(folder), mode=mode
            )
            Image.open(jpeg).save(jpeg.with_suffix(".tiff"))
            jpeg.unlink()
    meta = build(root, tmp_path / "out", **SMALL)
    assert meta["kept"] == {"cat": 4, "dog": 4} and meta["ignored"] == []


def test_photos_of_one_flat_colour_are_refused_not_scaled_by_zero(tmp_path):
    root = tmp_path / "in"
    for i in range(6):
        for offset, folder in enumerate(("Cat", "Dog")):
            path = root / "PetImages" / folder / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            size = (32 + i + 10 * offset, 32)  # other bytes each, the same grey once scaled
            Image.new("RGB", size, (90, 90, 90)).save(path)
    with pytest.raises(ValueError, match="one flat colour"):
        build(root, tmp_path / "out", image_size=16, channels=3, workers=1)
    assert not (tmp_path / "out").exists()


def test_more_workers_than_cores_start_no_more_processes_than_cores(tmp_path, monkeypatch):
    root = make_kaggle_folder(tmp_path / "in")
    started = []
    real_pool = decoding.ProcessPoolExecutor
    monkeypatch.setattr(decoding, "available_cores", lambda: 2)
    monkeypatch.setattr(
        decoding, "ProcessPoolExecutor", lambda n, **kw: started.append(n) or real_pool(n, **kw)
    )
    build(root, tmp_path / "out", image_size=16, workers=16)
    assert started == [2]


@pytest.mark.parametrize("threads, method", [(1, "fork"), (3, "forkserver")])
def test_workers_fork_from_a_process_of_one_thread_else_from_a_forkserver(
    tmp_path, monkeypatch, threads, method
):
    """fork copies other threads' held locks into the child: only a lone thread forks. Forked
    workers write the pixels into the shared array, others send them back: the same arrays
    as one process's either way."""
    root = make_kaggle_folder(tmp_path / "in")
    methods = []
    real_pool = decoding.ProcessPoolExecutor
    monkeypatch.setattr(decoding.threading, "active_count", lambda: threads)
    monkeypatch.setattr(
        decoding,
        "ProcessPoolExecutor",
        lambda n, mp_context, **shared: (
            methods.append(mp_context.get_start_method())
            or real_pool(n, mp_context=mp_context, **shared)
        ),
    )
    meta = build(root, tmp_path / "out", image_size=16, workers=2)
    alone = build(root, tmp_path / "alone", image_size=16, workers=1)
    assert methods == [method] and meta["kept"] == alone["kept"] == {"cat": 6, "dog": 6}
    for split in SPLITS:
        assert np.array_equal(
            load_split(tmp_path / "out", split)[0], load_split(tmp_path / "alone", split)[0]
        )


def test_the_arrays_record_where_their_photos_came_from(sample_images, sample_arrays, tmp_path):
    download = json.loads((sample_images / "download.json").read_text())
    meta = json.loads((sample_arrays / "meta.json").read_text())
    keys = ("source", "sha256", "bytes", "listing", "listing_run")
    assert meta["source"] == {k: download[k] for k in keys}
    no_record = build(make_kaggle_folder(tmp_path / "in"), tmp_path / "out", **SMALL)
    assert no_record["source"] is None  # a folder no download step wrote


def test_channel_stats_summed_a_shard_at_a_time_are_those_of_the_whole():
    pixels = np.random.default_rng(0).integers(0, 256, (50, 3, 8, 8), dtype=np.uint8)
    shards = []
    for start in range(0, len(pixels), 7):  # shards of 7, the last of 1
        sums, squares = slicing.channel_sums(pixels[start : start + 7], chunk_bytes=400)
        labels = [0] * len(pixels[start : start + 7])
        shards.append(slicing.WrittenShard(0, {}, labels, [], [], sums.tolist(), squares.tolist()))
    whole = pixels.transpose(1, 0, 2, 3).reshape(3, -1) / 255.0
    assert building.channel_stats(shards, side=8) == (
        whole.mean(axis=1).round(6).tolist(),
        whole.std(axis=1).round(6).tolist(),
    )


@pytest.mark.slow
def test_preprocess_holds_one_shard_not_the_arrays(sample_images, tmp_path):
    """The photos are decoded and written a shard at a time: the peak grows by about a
    shard's size (8 MiB here), not by the arrays' (over 150 MB)."""

    def peak_bytes(side: int) -> int:
        probe = (
            "import resource, sys\n"
            "from components.preprocessing.build import build_arrays\n"
            "from components.preprocessing.config import PreprocessConfig\n"
            f"build_arrays(PreprocessConfig(input={str(sample_images)!r}, "
            f"output={str(tmp_path / str(side))!r}, image_size={side}, channels=3, "
            "shard_mb=8, workers=2))\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_SECONDS
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    large, small = peak_bytes(192), peak_bytes(24)
    shards = list((tmp_path / "192").glob("train_images_*.npy"))
    arrays = sum(path.stat().st_size for path in (tmp_path / "192").glob("*_images_*.npy"))
    grown = large - small
    assert len(shards) > 10 and arrays > 150e6 and grown < arrays / 4, (grown, arrays)


def test_inputs_that_are_links_are_kept_as_the_photos_they_name(tmp_path):
    """A folder of symbolic links to photos elsewhere: the kept photos are those photos'
    files, which evaluate's check reads as kept photos, not links to links."""
    from components.data.arrays import load_split
    from components.data.kept_photos import replace_with_kept_photos

    real = make_kaggle_folder(tmp_path / "real")
    linked = tmp_path / "in/train"
    linked.mkdir(parents=True)
    for photo in (real / "train").iterdir():
        (linked / photo.name).symlink_to(photo)
    meta = build(tmp_path / "in", tmp_path / "out", workers=1, val_fraction=0.2, test_fraction=0.2)
    kept = sorted((tmp_path / "out" / TEST_PHOTOS_DIR).iterdir())
    assert kept and not any(photo.is_symlink() for photo in kept)
    images, labels = load_split(tmp_path / "out", "test")
    assert (
        replace_with_kept_photos(tmp_path / "out", images, labels) == meta["photos_sha256"]["test"]
    )


def test_kept_test_photos_are_links_where_the_file_system_allows_else_copies(tmp_path, monkeypatch):
    """Either way each kept photo holds its input's bytes, and the photos digest is the
    same; a link refused (another file system, protected_hardlinks) falls back to a copy."""
    root = make_kaggle_folder(tmp_path / "in")
    split = dict(workers=1, val_fraction=0.2, test_fraction=0.2)
    linked = build(root, tmp_path / "linked", **split)

    def refused(source, target):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(building.os, "link", refused)
    copied = build(root, tmp_path / "copied", **split)
    assert linked["photos_sha256"] == copied["photos_sha256"]
    inputs = {path.stat().st_ino: path.read_bytes() for path in (root / "train").iterdir()}
    for name in ("linked", "copied"):
        kept = sorted((tmp_path / name / TEST_PHOTOS_DIR).iterdir())
        assert len(kept) == sum(linked["counts"]["test"].values()) > 0
        shared = [photo.stat().st_ino in inputs for photo in kept]
        assert all(shared) if name == "linked" else not any(shared)
        assert all(photo.read_bytes() in inputs.values() for photo in kept)


def test_three_classes_split_stratified_with_a_small_one_reported(tmp_path, caplog):
    root = tmp_path / "in/shop"
    for name, count in (("bolts", 20), ("nuts", 20), ("washers", 3)):
        for i in range(count):
            write_jpeg(root / name / f"{i}.jpg", seed=100 * len(name) + i)
    (root / "README").write_text("what the photos are")
    meta = build(tmp_path / "in", tmp_path / "out", **SMALL)
    assert meta["classes"] == ["bolts", "nuts", "washers"] and meta["ignored"] == ["shop/README"]
    # the test share: the photos below a tenth, and a class with none gives its lowest
    assert meta["counts"]["test"] == {"bolts": 4, "nuts": 2, "washers": 1}
    assert meta["counts"]["val"] == {"bolts": 2, "nuts": 2, "washers": 1}
    assert meta["small_classes"] == ["washers"]
    assert "class 'washers' has 3 photos, fewer than 20% of the largest class's 20" in caplog.text


def test_a_class_too_small_for_every_split_is_refused_naming_it(tmp_path):
    root = tmp_path / "in"
    for name, count in (("bolts", 10), ("nuts", 2)):
        for i in range(count):
            write_jpeg(root / name / f"{i}.jpg", seed=i + 50 * len(name))
    with pytest.raises(ValueError, match="enough photos of class 'nuts' .* one each, found 2"):
        build(root, tmp_path / "out", **SMALL)
