"""Per-session video encoder settings for aiortc.

aiortc 1.16 keeps bitrates as module constants (`aiortc.codecs.h264/vpx`: H.264 1 Mbps in 0.5–3 Mbps, VP8
500 kbps in 0.25–1.5 Mbps, both tuned for 30 fps) and hard-codes a VP8 keyframe interval of 3000 frames.
We leave those modules alone (other peers in the process keep their defaults) and instead give each sender
its own encoder object: subclasses that open the codec themselves with this session's bitrate, bounds, frame
rate and keyframe interval, then let aiortc's code packetize as usual. `install_encoder` puts one on a sender
before its first frame is encoded (aiortc creates its encoder lazily on the first frame, so the sender's
private `__encoder` slot is still empty then); `webrtc.fanout` shares one per codec among a session's peers.
"""

from __future__ import annotations

import fractions
import multiprocessing
import time
from dataclasses import dataclass

import av
from av.video.codeccontext import VideoCodecContext
from aiortc.codecs.h264 import H264Encoder
from aiortc.codecs.vpx import Vp8Encoder, number_of_threads


@dataclass(frozen=True)
class EncoderSettings:
    """bitrate in bit/s (start value; receiver estimates move it within min..max); fps is the session rate;
    keyframe_interval in frames (a lost packet freezes the picture at most this long)."""

    bitrate: int = 2_500_000
    min_bitrate: int = 300_000
    max_bitrate: int = 8_000_000
    fps: float = 30.0
    keyframe_interval: int = 60
    h264_preset: str = "veryfast"

    @classmethod
    def for_session(cls, width: int, height: int, fps: float, bitrate: int | None = None) -> "EncoderSettings":
        """Defaults that scale with the picture: about 0.2 bit per pixel per frame, keyframes every 2 s."""
        auto = int(min(8_000_000, max(600_000, 0.2 * width * height * fps)))
        start = bitrate or auto
        return cls(bitrate=start, min_bitrate=min(start, 300_000), max_bitrate=max(start, 8_000_000),
                   fps=fps, keyframe_interval=max(1, round(2 * fps)))

    def clamp(self, bitrate: int) -> int:
        return int(max(self.min_bitrate, min(bitrate, self.max_bitrate)))


def _needs_new_codec(codec, frame: av.VideoFrame, bitrate: int) -> bool:
    # Same rule as aiortc: reopen on a size change or a bitrate change of more than 10 %.
    return (codec is None or frame.width != codec.width or frame.height != codec.height
            or abs(bitrate - codec.bit_rate) / codec.bit_rate > 0.1)


class _SessionBitrate:
    """The session's bitrate, which the congestion controller may move only within the session's bounds; and
    how long the last frame took to encode (aiortc runs encode() in a worker thread: the latency breakdown)."""

    def __init__(self, settings: EncoderSettings):
        super().__init__()
        self.settings = settings
        self._bitrate = settings.bitrate
        self.last_encode_ms: float | None = None

    def encode(self, frame, force_keyframe: bool = False):
        t0 = time.perf_counter()
        try:
            # a mixin: the aiortc encoder after it in the MRO (H264Encoder, Vp8Encoder) has encode()
            return super().encode(frame, force_keyframe)  # type: ignore[misc]
        finally:
            self.last_encode_ms = (time.perf_counter() - t0) * 1e3

    @property
    def target_bitrate(self) -> int:
        return self._bitrate

    @target_bitrate.setter
    def target_bitrate(self, bitrate: int) -> None:
        self._bitrate = self.settings.clamp(bitrate)


def open_h264(width: int, height: int, bitrate: int, settings: EncoderSettings) -> VideoCodecContext:
    """libx264 as a live session runs it: Baseline, zerolatency, the settings' preset, rate and keyframe
    interval (bench/x264_presets_bench.py opens it the same way to compare presets)."""
    rate = fractions.Fraction(round(settings.fps * 1000), 1000)
    codec = av.CodecContext.create("libx264", "w")
    codec.width, codec.height = width, height
    codec.bit_rate = bitrate
    codec.pix_fmt = "yuv420p"
    codec.framerate = rate
    codec.time_base = 1 / rate
    codec.gop_size = settings.keyframe_interval
    codec.options = {"level": "31", "tune": "zerolatency", "preset": settings.h264_preset, "forced-idr": "1"}
    codec.profile = "Baseline"
    return codec


class SessionH264Encoder(_SessionBitrate, H264Encoder):

    def _encode_frame(self, frame: av.VideoFrame, force_keyframe: bool):
        if _needs_new_codec(self.codec, frame, self._bitrate):
            self.buffer_data = b""
            self.buffer_pts = None
            self.codec = open_h264(frame.width, frame.height, self._bitrate, self.settings)
        yield from super()._encode_frame(frame, force_keyframe)


class SessionVp8Encoder(_SessionBitrate, Vp8Encoder):

    def encode(self, frame, force_keyframe: bool = False):
        if _needs_new_codec(self.codec, frame, self._bitrate):
            codec = av.CodecContext.create("libvpx", "w")
            codec.width, codec.height = frame.width, frame.height
            codec.bit_rate = self._bitrate
            codec.pix_fmt = "yuv420p"
            codec.gop_size = self.settings.keyframe_interval
            codec.qmin, codec.qmax = 2, 56
            # aiortc's real-time CBR options, with this session's bitrate.
            codec.options = {"bufsize": str(self._bitrate), "cpu-used": "-6", "deadline": "realtime",
                             "lag-in-frames": "0", "minrate": str(self._bitrate), "maxrate": str(self._bitrate),
                             "noise-sensitivity": "4", "overshoot-pct": "15", "partitions": "0",
                             "static-thresh": "1", "undershoot-pct": "100"}
            codec.thread_count = number_of_threads(frame.width * frame.height, multiprocessing.cpu_count())
            self.codec = codec
        return super().encode(frame, force_keyframe)


def make_encoder(mime_type: str, settings: EncoderSettings):
    mime = mime_type.lower()
    if mime == "video/h264":
        return SessionH264Encoder(settings)
    if mime == "video/vp8":
        return SessionVp8Encoder(settings)
    raise ValueError(f"no session encoder for {mime_type}")


def install_encoder(sender, encoder):
    """Give `sender` (an RTCRtpSender whose codec is negotiated, before its first frame) this encoder.

    Touches aiortc's private slot on purpose: there is no public API for encoder parameters."""
    sender._RTCRtpSender__encoder = encoder
    return encoder


def prefer_codecs(transceiver, order: tuple[str, ...] = ("video/H264", "video/VP8")) -> None:
    """H.264 first, VP8 as fallback (with their RTX entries), on a video transceiver before the answer."""
    from aiortc import RTCRtpSender

    caps = RTCRtpSender.getCapabilities("video").codecs
    preferred = [c for mime in order for c in caps if c.mimeType.lower() == mime.lower()]
    preferred += [c for c in caps if c.mimeType.lower() == "video/rtx"]
    transceiver.setCodecPreferences(preferred)
