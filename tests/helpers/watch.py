"""Pieces shared by the tests of watch links and WHEP: a real offer's SDP, a live owner session."""

from __future__ import annotations

from aiortc import RTCPeerConnection

from webrtc.client import StudioViewer


async def recvonly_offer_sdp(data_channel: bool = False) -> str:
    """What a receiving peer (browser, WHEP player) offers: a recvonly video m-line, optionally a data channel."""
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    if data_channel:
        pc.createDataChannel("control")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


async def start_owner(url: str, **options) -> StudioViewer:
    """A session's owner, streaming (a few frames decoded) before it returns."""
    owner = await StudioViewer(url, keep_pixels=False, **options).start()
    await owner.wait_frames(3)
    return owner
