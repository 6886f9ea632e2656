"""Find the labelled image files under a directory, in the layouts the data comes in."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from components.core.names import CLASSES
from components.data.images import IMAGE_SUFFIXES

KAGGLE_NAME = re.compile(r"^(cat|dog)\.\d+\.(jpe?g|png)$", re.IGNORECASE)


@dataclass
class LabelledFiles:
    """Image files with labels (0 = cat, 1 = dog) and the non-image files left aside."""

    root: Path
    layout: str
    files: list[tuple[Path, int]] = field(default_factory=list)
    ignored: list[Path] = field(default_factory=list)

    def name(self, path: Path) -> str:
        """``path`` relative to the root, as used in reports."""
        return path.relative_to(self.root).as_posix()


def find_labelled_files(root: Path) -> LabelledFiles:
    """Find ``PetImages/Cat`` + ``PetImages/Dog`` or Kaggle's ``cat.N.jpg``/``dog.N.jpg``.

    Raises ``FileNotFoundError`` that lists what was found when neither is there.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"expected an input directory at {root}, found nothing there")
    for folder in _petimages_candidates(root):
        class_dirs = _class_dirs(folder)
        if class_dirs:
            return _from_class_dirs(root, class_dirs)
    for folder in (root, root / "train"):
        found = _from_kaggle_names(root, folder)
        if found.files:
            return found
    raise FileNotFoundError(
        f"expected PetImages/Cat and PetImages/Dog, or Kaggle-style cat.N.jpg and dog.N.jpg "
        f"files, under {root}; found: {_describe(root)}"
    )


def _petimages_candidates(root: Path) -> list[Path]:
    return [root, root / "PetImages", *sorted(root.glob("*/PetImages"))]


def _class_dirs(folder: Path) -> dict[int, Path] | None:
    if not folder.is_dir():
        return None
    by_name = {p.name.lower(): p for p in folder.iterdir() if p.is_dir()}
    if all(name in by_name for name in CLASSES):
        return {label: by_name[name] for label, name in enumerate(CLASSES)}
    return None


def _from_class_dirs(root: Path, class_dirs: dict[int, Path]) -> LabelledFiles:
    found = LabelledFiles(root=root, layout="petimages")
    for label, folder in class_dirs.items():
        for path in _files_of(folder):
            if path.suffix.lower() in IMAGE_SUFFIXES:
                found.files.append((path, label))
            else:
                found.ignored.append(path)
    return found


def _from_kaggle_names(root: Path, folder: Path) -> LabelledFiles:
    found = LabelledFiles(root=root, layout="kaggle")
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
