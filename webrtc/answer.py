"""Answering a browser's offer with one send-only video track: the one offer/answer of the studio, for a
session's owner and for its watchers alike.

This is the only reader of aiortc internals: aiortc has no public API for the codec a transceiver negotiated,
which is what picks the per-session encoder (`webrtc.encoders`) before the first frame. tests/
test_aiortc_internals.py checks that `RTCRtpTransceiver._codecs` still holds it, in our preference order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription

from alaya_errors import UserError
from webrtc.encoders import prefer_codecs

log = logging.getLogger("alaya.answer")


class UnusableOffer(UserError):
    """An SDP offer the studio cannot answer (no video m-line, or aiortc refused it)."""


@dataclass(frozen=True)
class SendOnlyAnswer:
    sdp: str                  # the SDP answer for the browser
    sender: RTCRtpSender      # where the per-session encoder goes, before the first frame
    mime_type: str            # the negotiated codec, e.g. "video/H264"


def require_video(sdp: str) -> None:
    """Cheap check before any work is spent on an offer: it must ask for video."""
    if "m=video" not in sdp:
        raise UnusableOffer("the offer has no video m-line; add a recvonly video transceiver", "sdp")


async def close_peer(pc: RTCPeerConnection) -> None:
    """Close a peer whose negotiation failed halfway: aiortc's close() itself can fail then (a transceiver
    left without a transport by an offer that dropped its bundle's m-line), and that must not turn a bad offer
    into a server error."""
    try:
        await pc.close()
    except Exception as exc:  # the peer is unusable either way; its sockets go with it
        log.debug("closing a half-negotiated peer: %s: %s", type(exc).__name__, exc)


async def answer_sendonly(pc: RTCPeerConnection, track, offer_sdp: str) -> SendOnlyAnswer:
    """Add `track` to `pc` send-only (H.264 preferred, VP8 fallback) and answer `offer_sdp`. An offer aiortc
    cannot use closes `pc` and raises UnusableOffer with aiortc's first line."""
    require_video(offer_sdp)
    transceiver = pc.addTransceiver(track, direction="sendonly")
    prefer_codecs(transceiver)
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        await pc.setLocalDescription(await pc.createAnswer())
    except Exception as exc:
        await close_peer(pc)
        raise UnusableOffer(f"the SDP offer could not be used: {exc}".splitlines()[0], "sdp") from None
    codec = transceiver._codecs[0]   # aiortc private (see the module's note): negotiated, in our order
    return SendOnlyAnswer(pc.localDescription.sdp, transceiver.sender, codec.mimeType)
