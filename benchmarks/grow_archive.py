"""Grow a photo set N times: each photo as it is, mirrored, cropped and re-encoded, under
new names, in the same folder-per-class layout. For speed and memory figures at scale,
not accuracy ones: the variants are near-copies of one another.

    python -m benchmarks.grow_archive --source ../shared/data/petimages-23k.zip \\
        --output runs/bench/archive92k --times 4
"""

from __future__ import annotations

import argparse
import io
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from PIL import Image, ImageOps

VARIANTS = ("as-is", "mirrored", "cropped", "re-encoded")


def variant(data: bytes, which: int) -> bytes:
    """Photo bytes as variant ``which``: the file itself, or a new JPEG of it mirrored, of
    its middle 90% scaled back to its size, or re-encoded at quality 80."""
    if which % len(VARIANTS) == 0:
        return data
    image = Image.open(io.BytesIO(data)).convert("RGB")
    kind = VARIANTS[which % len(VARIANTS)]
    if kind == "mirrored":
        image = ImageOps.mirror(image)
    elif kind == "cropped":
        width, height = image.size
        box = (width // 20, height // 20, width - width // 20, height - height // 20)
        image = image.crop(box).resize((width, height))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=80 if kind == "re-encoded" else 90)
    return out.getvalue()


def _write(job: tuple[bytes, Path, int]) -> int:
    data, target, which = job
    try:
        target.write_bytes(variant(data, which))
    except OSError:  # a broken photo: written as it is, as the source holds it
        target.write_bytes(data)
    return 1


def grow(source: Path, output: Path, times: int) -> int:
    """Write ``times`` variants of every photo of the archive ``source`` under ``output``."""
    written = 0
    with zipfile.ZipFile(source) as archive, ProcessPoolExecutor(2) as pool:
        members = [m for m in archive.infolist() if not m.is_dir()]
        for start in range(0, len(members), 2000):
            jobs = []
            for member in members[start : start + 2000]:
                path = Path(member.filename)
                folder = output / path.parent
                folder.mkdir(parents=True, exist_ok=True)
                data = archive.read(member)
                jobs += [
                    (data, folder / f"{path.stem}-{which}{path.suffix}", which)
                    for which in range(times)
                ]
            written += sum(pool.map(_write, jobs, chunksize=64))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a .zip of ROOT/CLASS/*.jpg")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--times", type=int, default=4)
    args = parser.parse_args()
    print(f"wrote {grow(args.source, args.output, args.times)} photos under {args.output}")


if __name__ == "__main__":
    main()
