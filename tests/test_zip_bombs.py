"""Archives read with bounds (issue 42, finding 3): a 305 KB .gbuf.zip whose manifest inflated to 300 MB took the
studio from 677 MB to 1,333 MB of RSS before its 400. Every member is judged by its declared size and ratio before
it is inflated, and a frame's PNG by the pixels its header declares before it is decoded: each bomb below gets
one line, and the reader's peak memory grows by less than the issue's 64 MB. The upload route is tried too, over a
real socket, with a visitor streaming beside it."""

from __future__ import annotations

import json
import struct
import threading
import zipfile
import zlib
from pathlib import Path

import httpx
import psutil
import pytest

from gbuffer.formats import GbufZipSource, GbufZipWriter
from gbuffer.frame import GBufferError
from helpers.browser import studio_with_ui
from helpers.bystander import Bystander
from renderer.reference.synthetic import synthetic_gbuffer

RSS_BOUND = 64 * 2**20


class PeakRss:
    """The process's highest RSS while the block ran, sampled every 2 ms on a thread of its own."""

    def __init__(self):
        self.process = psutil.Process()
        self.start = self.peak = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.002)

    def __enter__(self) -> "PeakRss":
        self.start = self.peak = self.process.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def growth(self) -> int:
        return self.peak - self.start


def png_of_zeros(width: int, height: int) -> bytes:
    """A valid RGB8 PNG of `width` x `height` black pixels, compressed row by row so that making it costs no
    more memory than one row (the 8000x20000 one is 480 MB of pixels in ~470 KB)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    packer, row, parts = zlib.compressobj(9), bytes(1 + width * 3), []
    for _ in range(height):
        parts.append(packer.compress(row))
    parts.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")


def honest_archive(path: Path) -> Path:
    with GbufZipWriter(path, fps=30) as writer:
        for i in range(2):
            writer.write(synthetic_gbuffer(32, 16, i / 30, i))
    return path


def rewritten(source: Path, target: Path, replace: dict[str, bytes]) -> Path:
    """`source` with the named members' bytes replaced, the rest copied. PNGs are stored as they are (their own
    compression is the bomb, and stored they pass the archive's ratio check); anything else is deflated."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            data = replace.get(info.filename, src.read(info))
            png = data[:4] == b"\x89PNG"
            dst.writestr(info.filename, data, zipfile.ZIP_STORED if png else zipfile.ZIP_DEFLATED)
    return target


def zeros_member(size: int) -> bytes:
    return bytes(size)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("bombs")
    honest = honest_archive(tmp / "honest.gbuf.zip")
    with zipfile.ZipFile(honest) as z:
        manifest = json.loads(z.read("manifest.json"))
    huge = dict(manifest, width=8000, height=4000)        # its frames would be 8000 x 20000 stacked
    return {
        "manifest": rewritten(honest, tmp / "manifest.gbuf.zip", {"manifest.json": zeros_member(300 * 2**20)}),
        "frame": rewritten(honest, tmp / "frame.gbuf.zip", {"frames/000000.png": zeros_member(300 * 2**20)}),
        "png": rewritten(honest, tmp / "png.gbuf.zip", {"frames/000000.png": png_of_zeros(8000, 20000)}),
        "size": rewritten(honest, tmp / "size.gbuf.zip", {"manifest.json": json.dumps(huge).encode(),
                                                          "frames/000000.png": png_of_zeros(8000, 20000)}),
    }


EXPECTED = {"manifest": "manifest.json inflates to 314572800 bytes",
            "frame": "frames/000000.png inflates to 314572800 bytes",
            "png": "image is 8000x20000, expected 32x80",
            "size": "8000x4000 is larger than this reader accepts"}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_bomb_is_one_line_and_memory_stays_bounded(bombs, kind):
    with PeakRss() as rss, pytest.raises(GBufferError) as refused:
        with GbufZipSource(bombs[kind]) as source:
            source[0]
    message = str(refused.value)
    assert EXPECTED[kind] in message and "\n" not in message, message
    assert rss.growth < RSS_BOUND, f"{kind}: RSS grew {rss.growth / 2**20:.0f} MB"


def test_a_member_compressed_past_the_ratio_is_refused_before_inflating(tmp_path):
    """Under the size limit but 1000:1: refused by its ratio, from the header alone."""
    honest = honest_archive(tmp_path / "honest.gbuf.zip")
    bomb = rewritten(honest, tmp_path / "ratio.gbuf.zip", {"frames/000000.json": zeros_member(900_000)})
    with pytest.raises(GBufferError, match=r"frames/000000.json is compressed \d+:1, more than 200:1"):
        with GbufZipSource(bomb) as source:
            source[0]


def test_honest_archives_read_as_before(tmp_path):
    with GbufZipSource(honest_archive(tmp_path / "honest.gbuf.zip")) as source:
        assert len(source) == 2 and source[1].data.shape == (5, 16, 32, 3)


def test_an_uploaded_bomb_is_a_400_while_a_visitor_streams_on(bombs, tmp_path):
    """Over a real socket as a visitor: one line, no server path, memory bounded, and the victim unharmed."""
    with studio_with_ui(tmp_path / "cache", data_dir=tmp_path / "data") as server, Bystander(server) as victim:
        for kind in ("manifest", "png"):
            with PeakRss() as rss:
                answer = httpx.put(f"{server.url}/api/ui/uploads/{kind}.gbuf.zip", headers=victim.viewer.auth,
                                   content=bombs[kind].read_bytes(), timeout=60)
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert "\n" not in error and str(tmp_path) not in answer.text, error
            assert rss.growth < RSS_BOUND, f"{kind}: RSS grew {rss.growth / 2**20:.0f} MB"
        assert not list((tmp_path / "data" / "uploads").glob("*.gbuf.zip"))
        victim.assert_unharmed()
