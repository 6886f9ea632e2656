"""JPEGs whose markers promise more decoding than a photo takes: refused from the markers,
before libjpeg-turbo or Pillow decodes a byte (``components.data.jpeg``, ``check_jpeg``)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import simplejpeg
from PIL import Image

from components.data import images
from components.data.images import TooManyPixels, check_jpeg, decode_bytes, decode_file
from components.data.jpeg import read_structure


def jpeg(progressive: bool, mode: str = "RGB", size=(64, 48), seed: int = 0) -> bytes:
    noise = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(noise).convert(mode).save(out, "JPEG", quality=90, progressive=progressive)
    return out.getvalue()


def segments(data: bytes) -> list[tuple[int, int, int]]:
    """(marker, offset of the marker, offset past its segment) up to the first scan."""
    found, at = [], 2
    while data[at + 1] != 0xDA:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        found.append((marker, at, at + 2 + length))
        at += 2 + length
    return found


def with_frame(data: bytes, width: int, height: int, marker: int | None = None) -> bytes:
    """``data`` whose frame header claims ``width``×``height`` (and ``marker``)."""
    ((found, at, _),) = [s for s in segments(data) if s[0] in (0xC0, 0xC2)]
    patched = bytearray(data)
    patched[at + 1] = marker or found
    patched[at + 5 : at + 7] = height.to_bytes(2, "big")
    patched[at + 7 : at + 9] = width.to_bytes(2, "big")
    return bytes(patched)


def with_last_scan_repeated(data: bytes, times: int) -> bytes:
    last = data.rindex(b"\xff\xda")
    scan = data[last:-2]  # the last SOS and its data, up to EOI
    return data[:-2] + scan * times + data[-2:]


@pytest.fixture
def no_decoder(monkeypatch):
    """Any decoder reached fails the test: every refusal here comes from the markers."""

    def refused(*args, **kwargs):
        raise AssertionError("a decoder was reached")

    monkeypatch.setattr(simplejpeg, "decode_jpeg", refused)
    monkeypatch.setattr(images.Image, "open", refused)


def test_a_tiny_progressive_jpeg_claiming_a_huge_frame_is_refused_by_its_coefficient_buffer(
    no_decoder,
):
    bomb = with_frame(jpeg(progressive=True, mode="L", size=(16, 16)), 17800, 10000)
    assert len(bomb) < 1000
    with pytest.raises(TooManyPixels, match=r"17800×10000 pixels would take 339 MiB to decode"):
        decode_bytes(bomb, 64, 3)


def test_an_arithmetic_coded_jpeg_is_refused_whatever_its_size(no_decoder):
    for data in (jpeg(progressive=False), with_frame(jpeg(progressive=True), 17800, 10000)):
        arithmetic = with_frame(data, 64, 48, marker=0xC9)
        with pytest.raises(ValueError, match="arithmetic-coded JPEG .* no camera or web browser"):
            decode_bytes(arithmetic, 64, 3)


def test_a_progressive_jpeg_of_thousands_of_scans_is_refused_by_its_decoding_work(no_decoder):
    bomb = with_frame(with_last_scan_repeated(jpeg(progressive=True), 2000), 9000, 9000)
    structure = read_structure(bomb)
    assert structure is not None and structure.scans > 2000
    assert structure.coefficient_bytes < images.MAX_DECODED_BYTES  # memory alone lets it by
    with pytest.raises(TooManyPixels, match=r"9000×9000 pixels in \d+ scans: more decoding work"):
        decode_bytes(bomb, 64, 3)


def test_a_header_claiming_more_pixels_than_its_data_holds_is_truncated_or_inconsistent(
    tmp_path, no_decoder
):
    liar = with_frame(jpeg(progressive=False), 4000, 3000)
    (tmp_path / "liar.jpg").write_bytes(liar)
    decoded = decode_file(tmp_path / "liar.jpg", 40, 1)  # preprocess skips it, saying why
    assert decoded.pixels is None
    assert decoded.reason.startswith("a truncated or inconsistent JPEG: ")
    assert "cannot hold the 4000×3000 pixels its header claims" in decoded.reason


def test_markers_cut_short_are_named():
    data = jpeg(progressive=False)
    ((_, _, end),) = [s for s in segments(data) if s[0] == 0xC0]
    with pytest.raises(ValueError, match=r"truncated .* \(a JPEG cut short inside its markers\)"):
        check_jpeg(data[: end - 3])


@pytest.mark.parametrize("progressive", [False, True])
def test_real_photos_pass_and_what_they_need_is_counted(progressive, sample_images):
    photo = sample_images / "PetImages/Cat/1.jpg"
    with Image.open(photo) as opened:
        out = io.BytesIO()
        opened.save(out, "JPEG", quality=90, progressive=progressive)
    structure = check_jpeg(out.getvalue())
    assert structure is not None and (structure.width, structure.height) == opened.size
    assert structure.buffered == progressive and structure.scans >= (2 if progressive else 1)
    assert check_jpeg(b"\x89PNG\r\n\x1a\n") is None  # not a JPEG: the other decoders' to name
