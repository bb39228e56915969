"""ICE servers (STUN/TURN) shared by the page's RTCPeerConnection and the server's aiortc peers.

One `IceConfig` per server, from `alaya-studio serve --ice-server URL ... --turn-user/--turn-password |
--turn-secret --ice-transport-policy all|relay`. With a static user, every peer gets that user. With a secret,
every peer gets its own time-limited credentials minted by the TURN REST API convention that coturn's
`use-auth-secret` implements: username = "<unix expiry>:<label>", password = base64(HMAC-SHA1(secret, username)).

Credentials never reach a log: `IceConfig` and `IceServer` hide them from repr(), and the messages below name
servers by URL only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Literal

from aiortc import RTCConfiguration, RTCIceServer
from aiortc.rtcconfiguration import RTCIceTransportPolicy

from alaya_errors import UserError

POLICIES = ("all", "relay")
# stun:host[:port], turn:host[:port][?transport=udp|tcp], turns:host[:port][?transport=tcp]
URL_PATTERN = re.compile(r"^(stun|turns?):(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?(\?transport=(udp|tcp))?$")
DEFAULT_TTL_S = 24 * 3600  # TURN REST credentials: valid a day (a session never lasts longer; coturn checks it)


class IceConfigError(UserError):
    """An ICE server setting that cannot work (bad URL, missing or conflicting credentials)."""


def check_url(url: str) -> str:
    m = URL_PATTERN.match(url)
    if not m:
        raise IceConfigError(f"{url!r} is not a stun:, turn: or turns: URL (e.g. turn:turn.example.org:3478)",
                             "--ice-server")
    if m.group(3) and not 1 <= int(m.group(3)[1:]) <= 65535:
        raise IceConfigError(f"{url!r}: port out of range", "--ice-server")
    if m.group(1) == "stun" and m.group(4):
        raise IceConfigError(f"{url!r}: a stun: URL takes no transport", "--ice-server")
    return url


def is_turn(url: str) -> bool:
    return url.startswith("turn")


def turn_rest_credentials(secret: str, label: str, ttl_s: int = DEFAULT_TTL_S,
                          now: float | None = None) -> tuple[str, str]:
    """(username, password) valid until now + ttl_s, as coturn's `--use-auth-secret` checks them."""
    expiry = int(now if now is not None else time.time()) + ttl_s
    username = f"{expiry}:{label}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return username, base64.b64encode(digest).decode()


@dataclass(frozen=True)
class IceServer:
    """One RTCIceServer as the browser's RTCConfiguration spells it."""

    urls: tuple[str, ...]
    username: str | None = field(default=None, repr=False)
    credential: str | None = field(default=None, repr=False)

    def for_browser(self) -> dict:
        out: dict = {"urls": list(self.urls)}
        if self.username is not None:
            out.update(username=self.username, credential=self.credential)
        return out


@dataclass(frozen=True)
class IceConfig:
    servers: tuple[str, ...] = ()
    turn_user: str | None = field(default=None, repr=False)
    turn_password: str | None = field(default=None, repr=False)
    turn_secret: str | None = field(default=None, repr=False)
    policy: Literal["all", "relay"] = "all"
    ttl_s: int = DEFAULT_TTL_S

    def __post_init__(self) -> None:
        for url in self.servers:
            check_url(url)
        if self.policy not in POLICIES:
            raise IceConfigError(f"{self.policy!r} is not 'all' or 'relay'", "--ice-transport-policy")
        turn = [u for u in self.servers if is_turn(u)]
        static = self.turn_user is not None or self.turn_password is not None
        if static and self.turn_secret is not None:
            raise IceConfigError("give either --turn-user/--turn-password or --turn-secret, not both",
                                 "--turn-secret")
        if static and (not self.turn_user or not self.turn_password):
            raise IceConfigError("--turn-user and --turn-password go together", "--turn-password")
        if turn and not (static or self.turn_secret):
            raise IceConfigError(f"{turn[0]} needs credentials: --turn-user/--turn-password or --turn-secret",
                                 "--ice-server")
        if (static or self.turn_secret) and not turn:
            raise IceConfigError("TURN credentials were given but no turn: or turns: --ice-server", "--ice-server")
        if self.policy == "relay" and not turn:
            raise IceConfigError("relay needs a turn: or turns: --ice-server to relay through",
                                 "--ice-transport-policy")

    @property
    def turn_urls(self) -> tuple[str, ...]:
        return tuple(u for u in self.servers if is_turn(u))

    def ice_servers(self, label: str | None = None) -> list[IceServer]:
        """The servers with credentials for one peer; `label` names the peer in minted TURN usernames."""
        out = []
        stun = tuple(u for u in self.servers if not is_turn(u))
        if stun:
            out.append(IceServer(stun))
        if self.turn_urls:
            user: str | None
            password: str | None
            if self.turn_secret is not None:
                user, password = turn_rest_credentials(self.turn_secret, label or secrets.token_hex(6), self.ttl_s)
            else:
                user, password = self.turn_user, self.turn_password
            out.append(IceServer(self.turn_urls, user, password))
        return out

    def for_browser(self, label: str | None = None) -> dict:
        """An RTCConfiguration for the page: `new RTCPeerConnection(config)`."""
        return {"iceServers": [s.for_browser() for s in self.ice_servers(label)],
                "iceTransportPolicy": self.policy}

    def for_aiortc(self, label: str | None = None) -> RTCConfiguration:
        """The server peer's configuration. No servers → no STUN at all (aiortc would otherwise ask Google's)."""
        servers = [RTCIceServer(list(s.urls), s.username, s.credential) for s in self.ice_servers(label)]
        return RTCConfiguration(iceServers=servers, iceTransportPolicy=RTCIceTransportPolicy(self.policy))

    def link_header(self, label: str | None = None) -> str | None:
        """The servers as WHIP/WHEP `Link: <url>; rel="ice-server"` entries (one header, comma-separated), for
        players that take their ICE servers from the endpoint; None without servers."""
        links = []
        for server in self.ice_servers(label):
            for url in server.urls:
                link = f'<{url}>; rel="ice-server"'
                if server.username is not None:
                    link += f'; username="{server.username}"; credential="{server.credential}"; ' \
                            'credential-type="password"'
                links.append(link)
        return ", ".join(links) or None

    def relay_missing(self, sdp: str) -> str | None:
        """When relay is required and `sdp` (our own answer) has no relay candidate: the message that says so."""
        if self.policy != "relay" or " typ relay" in sdp:
            return None
        return ice_failed_message(self.turn_urls)


def ice_failed_message(turn_urls: tuple[str, ...]) -> str:
    """What to check when no relay address came: named by server URL, never by credential."""
    return (f"ICE failed: the TURN server {', '.join(turn_urls)} gave no relay address; check that it is "
            "running and reachable (UDP/TCP port) and that the studio's --turn-user/--turn-password or "
            "--turn-secret match its configuration")
