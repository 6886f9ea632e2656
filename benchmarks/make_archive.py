"""Build a full-scale stand-in for PetImages from the sample: 500×375 JPEGs, N per class.

The sample holds 1,000 photos per class; each is re-encoded under several new names
with a different crop, so sizes and decode costs match the full archive (most photos
there are near 500×375). Good for speed figures, not accuracy ones: the images repeat.

    python -m benchmarks.make_archive --sample tests/fixtures/petimages-sample.zip \\
        --output runs/bench/archive --per-class 12500
"""

from __future__ import annotations

import argparse
import io
import zipfile
from pathlib import Path

from PIL import Image

SIZE = (500, 375)


def build(sample: Path, output: Path, per_class: int) -> int:
    photos = _good_photos(sample)
    written = 0
    for cls, sources in photos.items():
        folder = output / "PetImages" / cls
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            source = sources[index % len(sources)]
            variant = index // len(sources)
            _variant(source, variant).save(folder / f"{index}.jpg", "JPEG", quality=90)
            written += 1
    return written


def _good_photos(sample: Path) -> dict[str, list[Image.Image]]:
    photos: dict[str, list[Image.Image]] = {"Cat": [], "Dog": []}
    with zipfile.ZipFile(sample) as zf:
        for name in sorted(zf.namelist()):
            parts = name.split("/")
            if len(parts) != 3 or parts[1] not in photos or not parts[2][:-4].isdigit():
                continue
            if int(parts[2][:-4]) >= 1000:  # the deliberately odd files
                continue
            try:
                image = Image.open(io.BytesIO(zf.read(name))).convert("RGB")
            except OSError:
                continue
            photos[parts[1]].append(image)
    return photos


def _variant(image: Image.Image, variant: int) -> Image.Image:
    """A different crop per variant (so no two files are the same), resized to 500×375."""
    width, height = image.size
    inset = variant * width // 60
    return image.crop((inset, inset // 2, width - inset // 2, height)).resize(SIZE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--per-class", type=int, default=12_500)
    args = parser.parse_args()
    print(f"wrote {build(args.sample, args.output, args.per_class)} JPEGs under {args.output}")


if __name__ == "__main__":
    main()
