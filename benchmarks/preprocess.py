"""Preprocess: the project's parallel decoder against the tutorial's one-file-at-a-time cv2 loop.

Both are timed as whole processes. The decode limit is what one core does with nothing
but libjpeg-turbo's reduced-size decode through Pillow's draft mode (from memory, at the
smallest scale that still covers the target size, as the project decodes JPEGs, now
through simplejpeg without Pillow's parsing): the project's images/s over ``workers``
times that limit says how much of the run is decoding.

python -m benchmarks.preprocess --images runs/bench/archive [--workers 1 2]
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import time
from pathlib import Path

from PIL import Image

from benchmarks.common import base_parser, measure, report
from components.data.images import MODES


def decode_limit(images: Path, size: int, channels: int, passes: int = 3) -> float:
    """Photos/s of the reduced-size decode alone on one core: the best of ``passes``."""
    files = sorted(path for path in (images / "PetImages").glob("*/*") if path.is_file())
    photos = [path.read_bytes() for path in files[:: max(1, len(files) // 2000)]]
    best = 0.0
    for _ in range(passes):
        decoded, started = 0, time.perf_counter()
        for photo in photos:
            try:
                with Image.open(io.BytesIO(photo)) as image:
                    image.draft(MODES[channels], (size, size))
                    image.load()
                decoded += 1
            except Exception:  # noqa: BLE001 - broken files are not part of the limit
                continue
        best = max(best, decoded / (time.perf_counter() - started))
    return best


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--images",
        type=Path,
        required=True,
        help="a folder holding PetImages/Cat and PetImages/Dog",
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--image-size", type=int, default=50)
    parser.add_argument("--channels", type=int, default=1)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)

    baseline = measure(
        [
            sys.executable,
            str(args.baseline),
            "preprocess",
            str(args.images / "PetImages"),
            str(args.workdir / "baseline.npy"),
        ]
    )
    base_json = baseline.last_json()
    rows = [_row("baseline (cv2, 1 process)", base_json["images"], baseline)]
    limit = decode_limit(args.images, args.image_size, args.channels)
    rows.append(
        {"run": "decode limit, 1 core (draft decode from memory)", "images_per_s": round(limit, 1)}
    )
    ratios = {}
    for workers in args.workers:
        output = args.workdir / f"arrays-{workers}"
        shutil.rmtree(output, ignore_errors=True)
        run = measure(
            [
                sys.executable,
                "-m",
                "components.preprocess",
                "--input",
                str(args.images),
                "--output",
                str(output),
                "--image-size",
                str(args.image_size),
                "--channels",
                str(args.channels),
                "--workers",
                str(workers),
            ]
        )
        rows.append(_row(f"project, {workers} workers", _files_decoded(output), run))
        rate = rows[-1]["images_per_s"]
        ratios[f"images/s, project {workers} workers / baseline"] = rate / rows[0]["images_per_s"]
        ratios[f"project {workers} workers / {workers} x the decode limit"] = rate / (
            workers * limit
        )
    report("preprocess", rows, ratios)


def _files_decoded(output: Path) -> int:
    """Every image file the project decoded: kept, skipped as broken, or dropped as a copy."""
    meta = json.loads((output / "meta.json").read_text())
    return sum(meta["kept"].values()) + len(meta["skipped"]) + meta["duplicates_removed"]


def _row(name: str, images: int, run) -> dict:
    return {
        "run": name,
        "images": images,
        "wall_s": round(run.wall_seconds, 2),
        "images_per_s": round(images / run.wall_seconds, 1),
        "peak_rss_mb": round(run.peak_rss_mb, 1),
    }


if __name__ == "__main__":
    main()
