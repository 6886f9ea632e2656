"""Pack the 23,000-photo set small enough to travel to a lent GPU machine (64 MiB a call).

Each photo is re-encoded at the accurate preset's size (128×128, JPEG quality 85, or
WebP) and dealt, by its sorted place in its class folder, into ``--parts`` balanced
halves (or thirds …): ``DIR/part-N/photos.zip`` in the PetImages layout, with the
tutorial script beside it. Undecodable files are kept as they are, for the preprocess to
skip. As WebP at quality 70 the whole set fits one call (about 48 MiB), without the
wheels, for ``benchmarks.gpu accuracy``, which runs without MLflow.

    python -m benchmarks.gpu_data --archive ../shared/data/petimages-23k.zip --output .gpu-data
    python -m benchmarks.gpu_data --archive ../shared/data/petimages-23k.zip \
        --output .gpu-data-all --parts 1 --format webp --quality 70
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from PIL import Image, UnidentifiedImageError

from benchmarks.common import base_parser
from components.core.names import CLASSES


def reencode(data: bytes, size: int, quality: int, form: str = "JPEG") -> bytes:
    """``data`` as a ``size``-square photo in ``form``; as it was where it does not decode."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            small = image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    except (UnidentifiedImageError, OSError):
        return data
    out = io.BytesIO()
    small.save(out, form, quality=quality)
    return out.getvalue()


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, required=True, help="petimages-23k.zip")
    parser.add_argument("--output", type=Path, required=True, help="an ignored folder")
    parser.add_argument("--parts", type=int, default=2)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--quality", type=int, default=85)
    parser.add_argument("--format", choices=["jpeg", "webp"], default="jpeg")
    args = parser.parse_args()
    folders = {name.capitalize() for name in CLASSES}
    parts = [args.output / f"part-{n + 1}" for n in range(args.parts)]
    for part in parts:
        part.mkdir(parents=True, exist_ok=False)
        shutil.copy(args.baseline, part / args.baseline.name)
    writers = [zipfile.ZipFile(part / "photos.zip", "w", zipfile.ZIP_STORED) for part in parts]
    with zipfile.ZipFile(args.archive) as archive:
        members = sorted(
            (PurePosixPath(info.filename), info)
            for info in archive.infolist()
            if not info.is_dir() and PurePosixPath(info.filename).parent.name in folders
        )
        counts = dict.fromkeys(folders, 0)
        for path, info in members:
            folder = path.parent.name
            target = writers[counts[folder] % args.parts]
            counts[folder] += 1
            photo = reencode(archive.read(info), args.size, args.quality, args.format.upper())
            name = path.name if args.format == "jpeg" else path.with_suffix(".webp").name
            target.writestr(f"PetImages/{folder}/{name}", photo)
    for writer in writers:
        writer.close()
    for part in parts:
        print(part, f"{(part / 'photos.zip').stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
