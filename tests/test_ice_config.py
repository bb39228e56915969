"""ICE settings: `serve --ice-server ... --turn-user/--turn-password | --turn-secret --ice-transport-policy`,
TURN REST credentials as coturn checks them, what the page and the server's peer get, and what never leaks."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from studio.cli import build_parser, main
from studio.commands.serve import settings_from_args
from webrtc.ice import IceConfig, IceConfigError, turn_rest_credentials


def test_turn_rest_credentials_follow_coturns_use_auth_secret():
    user, password = turn_rest_credentials("s3cret", "peer1", ttl_s=600, now=1_700_000_000)
    assert user == "1700000600:peer1"
    assert password == base64.b64encode(hmac.new(b"s3cret", user.encode(), hashlib.sha1).digest()).decode()


def test_static_users_reach_the_page_and_the_server_peer_alike():
    ice = IceConfig(("stun:stun.example.org", "turn:turn.example.org:3478?transport=tcp"), turn_user="u",
                    turn_password="p", policy="relay")
    page = ice.for_browser("x")
    assert page == {"iceServers": [{"urls": ["stun:stun.example.org"]},
                                   {"urls": ["turn:turn.example.org:3478?transport=tcp"], "username": "u",
                                    "credential": "p"}], "iceTransportPolicy": "relay"}
    server = ice.for_aiortc("x")
    assert server.iceTransportPolicy.value == "relay"
    assert [(s.urls, s.username, s.credential) for s in server.iceServers] == \
        [(["stun:stun.example.org"], None, None), (["turn:turn.example.org:3478?transport=tcp"], "u", "p")]


def test_a_secret_mints_fresh_credentials_per_peer_and_is_never_shown():
    ice = IceConfig(("turns:turn.example.org",), turn_secret="do-not-leak")
    a, b = (ice.for_browser(label)["iceServers"][0] for label in ("a", "b"))
    assert a["username"].endswith(":a") and b["username"].endswith(":b") and a["credential"] != b["credential"]
    assert "do-not-leak" not in repr(ice) + repr(ice.ice_servers("a")) + str(a) + str(b)


def test_whep_answers_name_the_servers_in_link_headers():
    ice = IceConfig(("stun:s.example.org", "turn:t.example.org"), turn_user="u", turn_password="p")
    assert ice.link_header() == ('<stun:s.example.org>; rel="ice-server", <turn:t.example.org>; rel="ice-server"; '
                                 'username="u"; credential="p"; credential-type="password"')
    assert IceConfig().link_header() is None


def test_no_ice_servers_means_none_at_all():
    """Not aiortc's default (Google's public STUN server): on a LAN and on one machine nothing is needed."""
    assert IceConfig().for_aiortc("x").iceServers == [] and IceConfig().for_browser()["iceServers"] == []


@pytest.mark.parametrize("kwargs, match", [
    (dict(servers=("http://x",)), "is not a stun:, turn: or turns: URL"),
    (dict(servers=("turn:x:99999",), turn_user="u", turn_password="p"), "port out of range"),
    (dict(servers=("stun:x?transport=udp",)), "takes no transport"),
    (dict(servers=("turn:x",)), "needs credentials"),
    (dict(servers=("turn:x",), turn_user="u"), "go together"),
    (dict(servers=("turn:x",), turn_user="u", turn_password="p", turn_secret="s"), "not both"),
    (dict(servers=("stun:x",), turn_secret="s"), "no turn: or turns:"),
    (dict(servers=("stun:x",), policy="relay"), "relay needs a turn:"),
])
def test_ice_settings_that_cannot_work_are_refused(kwargs, match):
    with pytest.raises(IceConfigError, match=match):
        IceConfig(**kwargs)


def test_serve_flags_build_the_ice_config():
    args = build_parser().parse_args(["serve", "--ice-server", "stun:a.example.org", "--ice-server",
                                      "turn:b.example.org:3478", "--turn-secret", "s", "--ice-transport-policy",
                                      "relay", "--max-watchers", "3"])
    settings = settings_from_args(args)
    assert settings.ice.servers == ("stun:a.example.org", "turn:b.example.org:3478")
    assert settings.ice.policy == "relay" and settings.ice.turn_secret == "s" and settings.max_watchers == 3


@pytest.mark.parametrize("argv, match", [
    (["--ice-server", "turn:x"], "--ice-server: turn:x needs credentials"),
    (["--ice-server", "web:x"], "--ice-server: 'web:x' is not a stun:"),
    (["--ice-server", "turn:x", "--turn-user", "u", "--turn-password", "p", "--turn-secret", "s"], "not both"),
    (["--ice-transport-policy", "relay"], "--ice-transport-policy: relay needs a turn:"),
    (["--max-watchers", "-1"], "--max-watchers"),
])
def test_bad_ice_flags_print_one_error_line_and_exit_2(capsys, argv, match):
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and match in err and "\n" not in err


def test_a_bad_ice_flag_never_echoes_the_password(capsys):
    assert main(["serve", "--ice-server", "stun:x", "--turn-user", "u", "--turn-password", "hunter2"]) == 2
    err = capsys.readouterr().err
    assert "no turn: or turns:" in err and "hunter2" not in err


def test_the_pages_ice_route_answers_in_webrtcs_own_ice_server_type():
    """GET /api/webrtc/ice answers what `IceConfig.for_browser` builds, and /docs describes it with webrtc/ice.py's
    `IceServer` (one definition of the type, not a copy in the studio)."""
    from fastapi.testclient import TestClient

    from studio.server import Settings, create_app
    from webrtc.ice import IceServer

    ice = IceConfig(("stun:stun.example.org", "turn:turn.example.org:3478"), turn_user="u", turn_password="p",
                    policy="relay")
    app = create_app(Settings(ice=ice))
    with TestClient(app) as client:
        answer = client.get("/api/webrtc/ice")
    assert answer.status_code == 200 and answer.json() == ice.for_browser()
    assert answer.json()["iceServers"][0] == {"urls": ["stun:stun.example.org"]}      # no null credentials
    assert app.openapi()["components"]["schemas"]["IceServer"]["description"] == IceServer.__doc__
