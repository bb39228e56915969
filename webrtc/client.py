"""A Python viewer for the studio: what a browser does, with aiortc. Used by the tests and the benchmark.

    async with StudioViewer("http://127.0.0.1:7860", stamp=True, size="160x96") as v:
        await v.wait_frames(90)
        await v.send({"type": "preset", "name": "volcano"})

Decoded frames are kept as `ReceivedFrame`s (stamp read back when the session stamps frames); data-channel
messages from the server are kept in `messages`.

`WhepViewer` watches a running session the way a WHEP player does (POST /whep/{session}, DELETE when done);
with `status=True` it also opens a data channel for the session's status, as the watch page does.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx
import numpy as np
from aiortc import RTCDataChannel, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from gbuffer.formats.pictures import rgb24
from webrtc.stamp import read_stamp


class OfferRefused(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(f"HTTP {status}: {body.get('error')}")
        self.status = status
        self.body = body


@dataclass
class ReceivedFrame:
    stamp: int | None      # frame index read from the picture, if stamped
    received_at: float     # time.time() when decoded
    rgb: np.ndarray | None


class StudioViewer:
    def __init__(self, base_url: str, *, keep_pixels: bool = True, codecs: tuple[str, ...] | None = None,
                 direct_only: bool = False, key: str | None = None, **options: Any):
        """`options` are the offer's session options; `codecs` limits what this viewer offers, e.g.
        ("video/VP8",) to act like a browser without H.264; `direct_only` drops the studio's relay (TURN)
        candidates from its answer, so this viewer's media never goes through a TURN server (with aggressive
        nomination the first check to succeed wins, which is not always the direct one)."""
        self.base_url = base_url.rstrip("/")
        self.codecs = codecs
        self.direct_only = direct_only
        self.offer_key = key                 # an owner key to present on the offer: a session of that visitor
        self.options = options
        self.keep_pixels = keep_pixels
        self.frames: list[ReceivedFrame] = []
        self.messages: list[dict] = []
        self.session_id: str | None = None
        self.owner_key: str | None = None    # from the offer's answer: what the session's REST routes need
        self.codec: str | None = None
        self.offer_started: float | None = None
        self.pc: RTCPeerConnection | None = None
        self.channel: RTCDataChannel | None = None
        self._changed = asyncio.Event()
        self._reader: asyncio.Task | None = None

    wants_channel = True

    async def start(self) -> "StudioViewer":
        self.pc = pc = RTCPeerConnection()
        transceiver = pc.addTransceiver("video", direction="recvonly")
        if self.codecs:
            caps = RTCRtpSender.getCapabilities("video").codecs
            transceiver.setCodecPreferences([c for c in caps if c.mimeType in self.codecs])
        opened = asyncio.Event()
        if self.wants_channel:
            self.channel = channel = pc.createDataChannel("control")
            channel.on("open", opened.set)
            channel.on("message", self._on_message)

        @pc.on("track")
        def _on_track(track) -> None:
            self._reader = asyncio.get_running_loop().create_task(self._read(track), name="viewer-reader")

        await pc.setLocalDescription(await pc.createOffer())
        self.offer_started = time.time()
        try:
            answer = await self._exchange(pc.localDescription.sdp)
        except OfferRefused:
            await pc.close()
            raise
        if self.direct_only:
            answer = "".join(line for line in answer.splitlines(keepends=True)
                             if not (line.startswith("a=candidate:") and " typ relay" in line))
        await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
        if self.channel is not None:
            await asyncio.wait_for(opened.wait(), 20)
        return self

    async def _exchange(self, offer_sdp: str) -> str:
        """Signalling: the offer goes to the studio, its answer's SDP comes back (or OfferRefused)."""
        async with httpx.AsyncClient(timeout=60) as http:
            res = await http.post(f"{self.base_url}/api/webrtc/offer",
                                  json={"sdp": offer_sdp, "type": "offer", **self.options},
                                  headers={"Authorization": f"Bearer {self.offer_key}"} if self.offer_key else {})
        if res.status_code != 200:
            raise OfferRefused(res.status_code, res.json())
        answer = res.json()
        self.session_id = answer["session_id"]
        self.owner_key = answer.get("owner_key")
        return answer["sdp"]

    @property
    def auth(self) -> dict[str, str]:
        """Headers for the session's REST routes (`Authorization: Bearer OWNER_KEY`)."""
        return {"Authorization": f"Bearer {self.owner_key}"} if self.owner_key else {}

    def _on_message(self, text: str) -> None:
        self.messages.append(json.loads(text))
        self._changed.set()

    async def _read(self, track) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            rgb = rgb24(frame)
            self.frames.append(ReceivedFrame(read_stamp(rgb), time.time(), rgb if self.keep_pixels else None))
            self._changed.set()

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition"):
        """Wait until `predicate()` is truthy; returns its value or raises TimeoutError naming `what`."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
            except asyncio.TimeoutError:
                pass
        return value

    # The default timeouts bound a hang, not a speed: on a saturated 2-core machine a stream can drop to a few
    # frames per second and still be a correct stream.
    async def wait_frames(self, n: int, timeout: float = 180.0) -> list[ReceivedFrame]:
        await self.wait_until(lambda: len(self.frames) >= n, timeout, f"{n} frames (got {len(self.frames)})")
        return self.frames

    async def wait_message(self, kind: str, timeout: float = 60.0, after: int = 0, **fields: Any) -> dict:
        def find():
            for m in self.messages[after:]:
                if m.get("type") == kind and all(m.get(k) == v for k, v in fields.items()):
                    return m
            return None
        return await self.wait_until(find, timeout, f"a {kind!r} message {fields or ''}")

    async def send(self, message: dict | str | bytes) -> int:
        """Send a message; returns the index in `messages` from which its answer can be looked for."""
        if self.channel is None:
            raise RuntimeError("no control channel: connect() first, with wants_channel")
        mark = len(self.messages)
        self.channel.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
        return mark

    def statuses(self) -> list[dict]:
        return [m for m in self.messages if m.get("type") == "status"]

    async def close(self) -> None:
        if self.pc is not None:
            await self.pc.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> "StudioViewer":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()


class WhepViewer(StudioViewer):
    """A WHEP player of session `session_id`, presenting `key` as its bearer token."""

    def __init__(self, base_url: str, session_id: str, key: str | None, *, status: bool = False, **kwargs: Any):
        super().__init__(base_url, **kwargs)
        self.session_id = session_id
        self.key = key
        self.wants_channel = status
        self.location: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key is not None else {}

    async def _exchange(self, offer_sdp: str) -> str:
        async with httpx.AsyncClient(timeout=60) as http:
            res = await http.post(f"{self.base_url}/whep/{self.session_id}", content=offer_sdp,
                                  headers={"Content-Type": "application/sdp", **self.headers()})
        if res.status_code != 201:
            raise OfferRefused(res.status_code, res.json())
        self.location = res.headers["location"]
        return res.text

    async def stop(self) -> httpx.Response:
        """DELETE the playback resource (WHEP's way to end), then close the peer."""
        async with httpx.AsyncClient(timeout=30) as http:
            res = await http.delete(f"{self.base_url}{self.location}", headers=self.headers())
        await self.close()
        return res
