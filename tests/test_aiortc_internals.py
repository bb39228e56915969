"""The aiortc internals the studio relies on (there is no public API for per-session encoders or the negotiated
codec). aiortc is pinned to the minor version tested; if an upgrade moves any of these, this test names it."""

from __future__ import annotations

import asyncio
import fractions
import inspect

import numpy as np
from aiortc import RTCPeerConnection, RTCRtpSender
from aiortc.codecs.h264 import H264Encoder
from aiortc.codecs.vpx import Vp8Encoder

from gbuffer.formats.pictures import yuv420p
from webrtc.answer import answer_sendonly
from webrtc.encoders import EncoderSettings, SessionH264Encoder, SessionVp8Encoder
from webrtc.track import FrameBuffer, SessionVideoTrack


def _source(obj) -> str:
    return inspect.getsource(obj)


def test_the_sender_still_keeps_its_encoder_in_the_private_slot_we_fill():
    """webrtc/encoders.install_encoder sets `sender._RTCRtpSender__encoder` before the first frame."""
    src = _source(RTCRtpSender)
    assert "self.__encoder" in src, "aiortc internal moved: RTCRtpSender.__encoder (install_encoder sets it)"
    assert "if self.__encoder is None:" in src, (
        "aiortc internal changed: RTCRtpSender no longer creates its encoder lazily, so an encoder set by "
        "install_encoder before the first frame may be replaced")
    assert "target_bitrate" in src, "aiortc internal moved: RTCRtpSender no longer sets encoder.target_bitrate"


def test_the_h264_encoder_still_opens_its_codec_in_encode_frame():
    """SessionH264Encoder overrides `_encode_frame(frame, force_keyframe)` and resets buffer_data/buffer_pts."""
    method = getattr(H264Encoder, "_encode_frame", None)
    assert method is not None, "aiortc internal moved: H264Encoder._encode_frame (SessionH264Encoder overrides it)"
    assert list(inspect.signature(method).parameters) == ["self", "frame", "force_keyframe"], (
        f"aiortc internal changed: H264Encoder._encode_frame{inspect.signature(method)}")
    assert "_encode_frame(" in _source(H264Encoder.encode), (
        "aiortc internal changed: H264Encoder.encode no longer calls _encode_frame")
    fresh = H264Encoder()
    for name in ("buffer_data", "buffer_pts", "codec"):
        assert hasattr(fresh, name), f"aiortc internal moved: H264Encoder.{name}"


def test_the_vp8_encoder_still_keeps_its_codec_in_an_attribute():
    assert hasattr(Vp8Encoder(), "codec"), "aiortc internal moved: Vp8Encoder.codec (SessionVp8Encoder sets it)"
    assert "self.codec" in _source(Vp8Encoder.encode), "aiortc internal changed: Vp8Encoder.encode ignores .codec"


def test_our_encoders_encode_through_aiortc_and_the_negotiated_codec_is_in_transceiver_codecs():
    """End to end on aiortc's own objects: a real offer/answer through `answer_sendonly` (the one reader of
    `transceiver._codecs`) gives the negotiated codec in our preference order, and both session encoders turn a
    frame into RTP payloads through aiortc's packetizers."""

    async def negotiate() -> str:
        offerer, answerer = RTCPeerConnection(), RTCPeerConnection()
        try:
            offerer.addTransceiver("video", direction="recvonly")
            await offerer.setLocalDescription(await offerer.createOffer())
            track = SessionVideoTrack(FrameBuffer(1, asyncio.get_running_loop()), 30.0)
            answer = await answer_sendonly(answerer, track, offerer.localDescription.sdp)
            codecs = getattr(answerer.getTransceivers()[0], "_codecs", None)
            assert codecs, "aiortc internal moved: RTCRtpTransceiver._codecs (the negotiated codecs)"
            assert answer.sender is answerer.getTransceivers()[0].sender
            assert "m=video" in answer.sdp and "a=sendonly" in answer.sdp
            track.stop()
            return answer.mime_type
        finally:
            await offerer.close()
            await answerer.close()

    assert asyncio.run(negotiate()) == "video/H264"
    frame = yuv420p(np.zeros((64, 96, 3), np.uint8))
    frame.pts, frame.time_base = 0, fractions.Fraction(1, 90000)
    for encoder in (SessionH264Encoder(EncoderSettings()), SessionVp8Encoder(EncoderSettings())):
        payloads, _timestamp = encoder.encode(frame, force_keyframe=True)
        assert payloads and all(isinstance(p, bytes) for p in payloads), type(encoder).__name__
