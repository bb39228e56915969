"""ICE on the server side: the aiortc peer built from the studio's `IceConfig`, the check that a relay-only
studio really got a relay address, and the routes that give the page the same servers (`GET /api/webrtc/ice`)
and the page's ICE helper script (`GET /webrtc/ice.js`)."""

from __future__ import annotations

import logging
from importlib.resources import files

from aiortc import RTCPeerConnection
from fastapi import APIRouter, Request
from fastapi.responses import Response

from webrtc.answer import close_peer
from webrtc.ice import IceConfig

log = logging.getLogger("alaya.ice")
router = APIRouter(tags=["webrtc"])


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


@router.get("/api/webrtc/ice")
async def ice_configuration(request: Request) -> dict:
    """The RTCConfiguration for `new RTCPeerConnection(...)`: the studio's STUN/TURN servers (with TURN REST
    credentials minted for this request when the studio has a secret) and its transport policy."""
    return request.app.state.settings.ice.for_browser()


@router.get("/webrtc/ice.js", include_in_schema=False)
async def ice_script() -> Response:
    return Response(files("studio.server").joinpath("ice.js").read_text(), media_type="text/javascript",
                    headers={"Cache-Control": "no-cache"})
