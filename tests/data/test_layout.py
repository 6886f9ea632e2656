"""Finding the labelled photos: PetImages folders, Kaggle names, and what else is found."""

from __future__ import annotations

import pytest

from components.data.layout import find_labelled_files, label_of_name


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
    assert message.startswith("expected ROOT/CLASS/*.jpg (one folder per class, the classes")
    assert "found: photos/, photos/0.jpg" in message and "and 3 more" in message
    with pytest.raises(FileNotFoundError, match="found: an empty directory"):
        find_labelled_files(_empty(tmp_path))
    with pytest.raises(FileNotFoundError, match="expected an input directory at .*nothing there"):
        find_labelled_files(tmp_path / "absent")


def _empty(tmp_path):
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def test_a_folder_per_class_under_an_archives_top_folder_with_files_beside_left_out(tmp_path):
    """TensorFlow's flower_photos: its top folder, a LICENSE.txt beside the class folders,
    and what a Mac's archiver adds; the classes in sorted order, as ImageFolder's."""
    touch(
        tmp_path,
        "flower_photos/tulips/1.jpg",
        "flower_photos/daisy/2.jpg",
        "flower_photos/daisy/notes/3.jpg",
        "flower_photos/roses/Thumbs.db",
        "flower_photos/roses/4.JPEG",
        "flower_photos/LICENSE.txt",
        "flower_photos/.hidden/5.jpg",
        "__MACOSX/flower_photos/._1.jpg",
    )
    found = find_labelled_files(tmp_path)
    assert (found.layout, found.classes) == ("folder per class", ("daisy", "roses", "tulips"))
    assert [(found.name(path), label) for path, label in found.files] == [
        ("flower_photos/daisy/2.jpg", 0),
        ("flower_photos/roses/4.JPEG", 1),
        ("flower_photos/tulips/1.jpg", 2),
    ]
    assert [found.name(p) for p in found.ignored] == [
        "flower_photos/.hidden",
        "flower_photos/LICENSE.txt",
        "flower_photos/daisy/notes",
        "flower_photos/roses/Thumbs.db",
    ]


def test_class_folders_outside_the_limits_are_refused_naming_them(tmp_path):
    touch(tmp_path, *(f"many/c{i:03d}/1.jpg" for i in range(101)))
    with pytest.raises(
        ValueError, match="expected 2 to 100 classes in the class folders of .*many"
    ):
        find_labelled_files(tmp_path / "many")
    touch(tmp_path, "long/a/1.jpg", f"long/{'b' * 51}/1.jpg")
    with pytest.raises(ValueError, match="class names of 1 to 50 characters, found 51 in 'bbb"):
        find_labelled_files(tmp_path / "long")
    touch(tmp_path, "odd/a/1.jpg", "odd/b\tc/1.jpg")
    with pytest.raises(ValueError, match=r"printable characters .*found 'b\\tc'"):
        find_labelled_files(tmp_path / "odd")


def test_one_folder_of_photos_is_no_class_list(tmp_path):
    touch(tmp_path, "top/only/1.jpg")
    with pytest.raises(FileNotFoundError, match=r"expected ROOT/CLASS/\*\.jpg .*found: top/"):
        find_labelled_files(tmp_path)


@pytest.mark.parametrize(
    "names",
    [
        ("PetImages/Cat/1.jpg", "PetImages/Dog/2.png", "PetImages/Dog/Thumbs.db", "x/Cat/3.jpg"),
        (
            "train/cat.1.jpg",
            "train/dog.2.jpeg",
            "train/bird.1.jpg",
            "cat.9.jpg",
            "train/a/cat.3.jpg",
        ),
        ("flowers/daisy/1.jpg", "flowers/rose/2.jpg", "flowers/rose/sub/3.jpg", "flowers/a.jpg"),
    ],
)
def test_a_listed_name_gets_the_label_the_layout_gives_its_file(tmp_path, names):
    """What evaluate labels a source listing's names by, for each layout: the label
    ``find_labelled_files`` gives, or None for every file it leaves out."""
    touch(tmp_path, *names)
    found = find_labelled_files(tmp_path)
    labels = {found.name(path): label for path, label in found.files}
    for name in names:
        given = label_of_name(name, found.layout, list(found.classes), list(found.folders))
        assert given == labels.get(name), name
    assert labels
