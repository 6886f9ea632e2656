"""Find the labelled image files under a directory: one folder per class, as torchvision's
``ImageFolder`` and TensorFlow's ``flower_photos`` lay them out (PetImages among them), or
Kaggle's ``cat.N.jpg`` and ``dog.N.jpg``."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from components.core.names import CLASSES
from components.data.classes import MIN_CLASSES, check_classes
from components.data.images import IMAGE_SUFFIXES

KAGGLE_NAME = re.compile(r"^(cat|dog)\.\d+\.(jpe?g|png)$", re.IGNORECASE)
# what archives made on a Mac or by Windows Explorer carry beside the photos: never classes
SYSTEM_FOLDERS = frozenset({"__MACOSX", "$RECYCLE.BIN", "System Volume Information"})
LAYOUTS = (
    "ROOT/CLASS/*.jpg (one folder per class, the classes in sorted order; files beside the "
    "class folders are left out), PetImages/Cat and PetImages/Dog, or Kaggle-style "
    "cat.N.jpg and dog.N.jpg"
)


@dataclass
class LabelledFiles:
    """Image files with labels (the index of their class in ``classes``) and what was
    left aside: files that are not photos, and files and folders beside the classes."""

    root: Path
    layout: str
    classes: tuple[str, ...] = CLASSES
    folders: tuple[str, ...] = ()  # each class's folder under the root ("" for the root)
    files: list[tuple[Path, int]] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)

    def name(self, path: Path) -> str:
        """``path`` relative to the root, as used in reports."""
        return path.relative_to(self.root).as_posix()


def label_of_name(name: str, layout: str, classes: list[str], folders: list[str]) -> int | None:
    """The label ``find_labelled_files`` gives the file ``name`` (relative to the root, as
    a source listing names it) in a layout of ``classes`` in ``folders``; None for a file
    it leaves out."""
    folder, _, base = name.rpartition("/")
    if PurePosixPath(base).suffix.lower() not in IMAGE_SUFFIXES:
        return None
    if layout == "kaggle":
        match = KAGGLE_NAME.match(base)
        return CLASSES.index(match.group(1).lower()) if match and folder in folders else None
    return folders.index(folder) if folder in folders else None


def find_labelled_files(root: Path) -> LabelledFiles:
    """Find the photos under ``root`` and their classes.

    PetImages's ``Cat`` and ``Dog`` folders anywhere in the first two levels are ``cat``
    and ``dog``; Kaggle's names at the root or under ``train/`` the same. Else the classes
    are the folders of the first folder (going down while there is one folder and no photo)
    that holds two or more.

    Raises:
        FileNotFoundError: no such layout, listing what was found.
        ValueError: class folders outside the limits (components.data.classes).
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"expected an input directory at {root}, found nothing there")
    for candidate in _petimages_candidates(root):
        petimages = _petimages_dirs(candidate)
        if petimages:
            return _from_class_dirs(root, "petimages", CLASSES, petimages)
    for folder in (root, root / "train"):
        found = _from_kaggle_names(root, folder)
        if found.files:
            return found
    folder = _class_parent(root)
    class_dirs = _subfolders(folder)
    if len(class_dirs) < MIN_CLASSES:
        raise FileNotFoundError(f"expected {LAYOUTS}, under {root}; found: {_describe(root)}")
    names = sorted(class_dirs)
    check_classes(names, f"the class folders of {folder}")
    found = _from_class_dirs(root, "folder per class", tuple(names), [class_dirs[n] for n in names])
    found.ignored[:0] = sorted(path for path in folder.iterdir() if path.name not in class_dirs)
    return found


def _petimages_candidates(root: Path) -> list[Path]:
    return [root, root / "PetImages", *sorted(root.glob("*/PetImages"))]


def _petimages_dirs(folder: Path) -> list[Path] | None:
    if not folder.is_dir():
        return None
    by_name = {p.name.lower(): p for p in folder.iterdir() if p.is_dir()}
    if all(name in by_name for name in CLASSES):
        return [by_name[name] for name in CLASSES]
    return None


def _class_parent(root: Path) -> Path:
    """The folder whose folders are the classes: down from ``root`` while a folder holds
    one folder and no photo (an archive's top folder, ``flower_photos``)."""
    folder = root
    while True:
        folders = _subfolders(folder)
        photos = [p for p in _files_of(folder) if p.suffix.lower() in IMAGE_SUFFIXES]
        if len(folders) != 1 or photos:
            return folder
        folder = next(iter(folders.values()))


def _subfolders(folder: Path) -> dict[str, Path]:
    """The folders of ``folder`` that may be classes, by name: not hidden, not a system's."""
    with os.scandir(folder) as entries:
        return {
            entry.name: folder / entry.name
            for entry in entries
            if entry.is_dir(follow_symlinks=False)
            and not entry.name.startswith(".")
            and entry.name not in SYSTEM_FOLDERS
        }


def _from_class_dirs(
    root: Path, layout: str, classes: tuple[str, ...], class_dirs: list[Path]
) -> LabelledFiles:
    folders = tuple(_relative(folder, root) for folder in class_dirs)
    found = LabelledFiles(root=root, layout=layout, classes=classes, folders=folders)
    for label, folder in enumerate(class_dirs):
        for path in _files_of(folder):
            if path.suffix.lower() in IMAGE_SUFFIXES:
                found.files.append((path, label))
            else:
                found.ignored.append(path)
        found.ignored += sorted(_subfolders(folder).values())
    return found


def _relative(folder: Path, root: Path) -> str:
    relative = folder.relative_to(root).as_posix()
    return "" if relative == "." else relative


def _from_kaggle_names(root: Path, folder: Path) -> LabelledFiles:
    found = LabelledFiles(root=root, layout="kaggle", folders=(_relative(folder, root),) * 2)
    if not folder.is_dir():
        return found
    for path in _files_of(folder):
        match = KAGGLE_NAME.match(path.name)
        if match:
            found.files.append((path, CLASSES.index(match.group(1).lower())))
    return found


def _describe(root: Path, limit: int = 10) -> str:
    entries = sorted(root.rglob("*"))
    shown = [p.relative_to(root).as_posix() + ("/" if p.is_dir() else "") for p in entries[:limit]]
    more = f" and {len(entries) - limit} more" if len(entries) > limit else ""
    return (", ".join(shown) + more) if shown else "an empty directory"


def _files_of(folder: Path) -> list[Path]:
    """The files of ``folder`` (a link to a file counts), by name: one directory read, the
    types it gives, a stat only for links."""
    with os.scandir(folder) as entries:
        names = sorted(entry.name for entry in entries if entry.is_file())
    return [folder / name for name in names]
