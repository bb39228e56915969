"""ICE on the server side: the aiortc peer built from the studio's `IceConfig` and the check that a relay-only
studio really got a relay address. The page gets the same servers from `GET /api/webrtc/ice` (routes.py)."""

from __future__ import annotations

import logging

from aiortc import RTCPeerConnection

from webrtc.answer import close_peer
from webrtc.ice import IceConfig

log = logging.getLogger("alaya.ice")


class IceFailed(Exception):
    """The studio's own peer cannot gather the candidates its ICE policy needs; answered with HTTP 502."""


def peer_connection(ice: IceConfig, label: str) -> RTCPeerConnection:
    """A server peer with the studio's ICE servers; `label` names it in minted TURN usernames (no secret)."""
    return RTCPeerConnection(ice.for_aiortc(label))


async def require_relay(pc: RTCPeerConnection, ice: IceConfig) -> None:
    """After setLocalDescription: a relay-only studio whose TURN server gave no address fails now, with a
    message naming the server, instead of leaving the browser to wait for ICE that cannot succeed."""
    problem = ice.relay_missing(pc.localDescription.sdp)
    if problem is not None:
        await close_peer(pc)
        raise IceFailed(problem)
