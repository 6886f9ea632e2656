"""Finding the labelled photos: PetImages folders, Kaggle names, and what else is found."""

from __future__ import annotations

import pytest

from components.data.layout import find_labelled_files


def touch(root, *names):
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")


def test_petimages_folders_in_any_case_and_one_level_down_with_non_photos_aside(tmp_path):
    touch(
        tmp_path, "kagglecatsanddogs/PetImages/cat/2.jpg", "kagglecatsanddogs/PetImages/cat/1.JPG"
    )
    touch(
        tmp_path,
        "kagglecatsanddogs/PetImages/DOG/3.png",
        "kagglecatsanddogs/PetImages/DOG/Thumbs.db",
    )
    found = find_labelled_files(tmp_path)
    assert found.layout == "petimages"
    names = [(found.name(path), label) for path, label in found.files]
    assert names == [
        ("kagglecatsanddogs/PetImages/cat/1.JPG", 0),
        ("kagglecatsanddogs/PetImages/cat/2.jpg", 0),
        ("kagglecatsanddogs/PetImages/DOG/3.png", 1),
    ]
    assert [found.name(p) for p in found.ignored] == ["kagglecatsanddogs/PetImages/DOG/Thumbs.db"]


def test_kaggle_names_at_the_root_or_under_train(tmp_path):
    touch(tmp_path, "train/cat.1.jpg", "train/dog.2.jpeg", "train/Dog.3.PNG", "train/bird.1.jpg")
    found = find_labelled_files(tmp_path)
    assert found.layout == "kaggle"
    assert [(p.name, label) for p, label in found.files] == [
        ("Dog.3.PNG", 1),
        ("cat.1.jpg", 0),
        ("dog.2.jpeg", 1),
    ]


def test_neither_layout_says_what_was_expected_and_what_is_there(tmp_path):
    touch(tmp_path, *(f"photos/{i}.jpg" for i in range(12)))
    with pytest.raises(FileNotFoundError) as err:
        find_labelled_files(tmp_path)
    message = str(err.value)
    assert message.startswith("expected PetImages/Cat and PetImages/Dog, or Kaggle-style")
    assert "found: photos/, photos/0.jpg" in message and "and 3 more" in message
    with pytest.raises(FileNotFoundError, match="found: an empty directory"):
        find_labelled_files(_empty(tmp_path))
    with pytest.raises(FileNotFoundError, match="expected an input directory at .*nothing there"):
        find_labelled_files(tmp_path / "absent")


def _empty(tmp_path):
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"
