"""A JPEG's structure read from its markers alone, before any decoder sees it.

libjpeg (under libjpeg-turbo, simplejpeg and Pillow alike) decodes a progressive or
multi-scan JPEG into a coefficient buffer of the whole image at full size, whatever the
reduced size asked for, and goes over all of it once a scan. A few hundred bytes can
claim a buffer of a gigabyte, and a few kilobytes thousands of scans. The markers tell
both before a byte is decoded, and also how little entropy-coded data a header's claim
would need.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

SOI, EOI, SOS = 0xD8, 0xD9, 0xDA
# start-of-frame markers: C0–CF but DHT (C4), JPG (C8) and DAC (CC)
SOF = {m for m in range(0xC0, 0xD0)} - {0xC4, 0xC8, 0xCC}
PROGRESSIVE = {0xC2, 0xC6, 0xCA, 0xCE}
ARITHMETIC = {0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
STANDALONE = {0x01, *range(0xD0, 0xD8)}  # TEM and the restart markers: no length
# a marker ending entropy-coded data: 0xFF, then neither a stuffed 0x00, a restart
# marker nor another fill byte
SEGMENT_END = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")
CUT_SHORT = "truncated or corrupt image data (a JPEG cut short inside its markers)"
COEFFICIENT_BYTES = 64 * 2  # a block of 64 coefficients, 16 bits each (libjpeg's JCOEF)


@dataclass(frozen=True)
class JpegStructure:
    """What the markers of a JPEG say: its size, each component's sampling, its coding,
    how many scans it has and how many bytes of entropy-coded data they hold."""

    width: int
    height: int
    sampling: tuple[tuple[int, int], ...]  # (horizontal, vertical) factor a component
    marker: int  # its start-of-frame marker
    scans: int
    entropy_bytes: int

    @property
    def blocks(self) -> tuple[int, ...]:
        """The 8×8 blocks of each component at full size, as libjpeg counts them."""
        h_max = max(h for h, _ in self.sampling)
        v_max = max(v for _, v in self.sampling)
        return tuple(
            math.ceil(math.ceil(self.width * h / h_max) / 8)
            * math.ceil(math.ceil(self.height * v / v_max) / 8)
            for h, v in self.sampling
        )

    @property
    def buffered(self) -> bool:
        """Whether libjpeg decodes it through a whole-image coefficient buffer."""
        return self.marker in PROGRESSIVE or self.scans > 1

    @property
    def coefficient_bytes(self) -> int:
        """The coefficient buffer libjpeg allocates for it (0 for a single-scan one)."""
        return sum(self.blocks) * COEFFICIENT_BYTES if self.buffered else 0

    @property
    def block_scans(self) -> int:
        """The decoding work: every block, once a scan."""
        return sum(self.blocks) * self.scans


def read_structure(data: bytes) -> JpegStructure | None:
    """The structure of the JPEG in ``data``; None when ``data`` is not a JPEG.

    Raises:
        ValueError: a JPEG whose markers are cut short or out of order.
    """
    if data[:2] != b"\xff\xd8":
        return None
    frame: tuple[int, int, int, tuple[tuple[int, int], ...]] | None = None
    scans = entropy = 0
    at = 2
    while at < len(data):
        if data[at] != 0xFF:
            raise ValueError(
                f"truncated or corrupt image data (a JPEG's markers break at byte {at})"
            )
        while at < len(data) and data[at] == 0xFF:  # fill bytes before a marker
            at += 1
        if at >= len(data):
            break
        marker, at = data[at], at + 1
        if marker == EOI:
            break
        if marker in STANDALONE:
            continue
        if at + 2 > len(data):
            raise ValueError(CUT_SHORT)
        length = int.from_bytes(data[at : at + 2], "big")
        if length < 2 or at + length > len(data):
            raise ValueError(CUT_SHORT)
        segment, at = data[at + 2 : at + length], at + length
        if marker in SOF:
            frame = _frame(marker, segment)
        elif marker == SOS:
            if frame is None:
                raise ValueError("a JPEG with image data before its frame header")
            scans += 1
            end = SEGMENT_END.search(data, at)
            stop = end.start() if end else len(data)
            entropy += stop - at
            at = stop
    if frame is None:
        raise ValueError("a JPEG without a frame header")
    marker, width, height, sampling = frame
    return JpegStructure(width, height, sampling, marker, scans, entropy)


def _frame(marker: int, segment: bytes) -> tuple[int, int, int, tuple[tuple[int, int], ...]]:
    if len(segment) < 6:
        raise ValueError("a JPEG whose frame header is cut short")
    height = int.from_bytes(segment[1:3], "big")
    width = int.from_bytes(segment[3:5], "big")
    count = segment[5]
    if not 1 <= count <= 4 or len(segment) < 6 + 3 * count:
        raise ValueError(f"a JPEG frame header with {count} components")
    sampling = tuple((segment[7 + 3 * i] >> 4, segment[7 + 3 * i] & 0x0F) for i in range(count))
    if not all(1 <= h <= 4 and 1 <= v <= 4 for h, v in sampling):
        raise ValueError("a JPEG frame header with sampling factors outside 1 to 4")
    return marker, width, height, sampling
