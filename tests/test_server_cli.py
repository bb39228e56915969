"""`alaya-studio serve` and `alaya-studio engine`: flags, errors, and `python app.py` serving for real."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from studio.cli import build_parser, main
from studio.commands.serve import expose_warning, settings_from_args
from studio.server.background import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv, match", [
    (["serve", "--port", "70000"], "--port: 70000 is not a TCP port"),
    (["serve", "--max-sessions", "0"], "--max-sessions"),
    (["serve", "--size", "wide"], "--size: size 'wide' is not WIDTHxHEIGHT"),
    (["serve", "--data-dir", "/no/such/dir"], "--data-dir"),
    (["serve", "--renderer", "magic"], "unknown renderer 'magic'"),
    (["serve", "--batch-sessions", "nan"], "--batch-sessions: nan must be 0..1000 milliseconds"),
    (["serve", "--cluster", "nowhere"], "--cluster: 'nowhere' is not local, auto or ray://HOST:PORT"),
    (["serve", "--workers", "0"], "--workers: 0 must be at least 1"),
    (["serve", "--batch-sessions", "5", "--max-batch", "0"], "--max-batch: 0 must be at least 1"),
    (["serve", "--take-min-free-mb", "-1"], "--take-min-free-mb: -1 must be 0 or more megabytes"),
    (["serve", "--disk-quota-mb", "nan"], "--disk-quota-mb: nan must be 0 or more megabytes"),
    (["serve", "--max-uploads", "-1"], "--max-uploads: -1 must be 0 or more"),
    (["serve", "--admin-token", "short"], "--admin-token: use at least 16 characters"),
    # OSC carries no credentials: beyond loopback only when the operator confirms
    (["serve", "--osc-port", "9000", "--osc-host", "0.0.0.0"], "--osc-host: OSC on 0.0.0.0 would let anyone"),
    (["serve", "--renderer-option", "backend=cuda"], "--renderer-option: backend=cuda is not one of auto, gl, torch"),
    (["engine", "--connect", "http://x"], "--connect: 'http://x' is not a ws:// or wss:// URL"),
    (["engine", "--connect", "ws://127.0.0.1:9/api/engine/feed", "--size", "9"], "--size"),
    (["engine", "--connect", "ws://127.0.0.1:9/api/engine/feed", "--fps", "0"], "--fps"),
    (["engine", "--connect", "ws://127.0.0.1:9/api/engine/feed", "--size", "64x32"], "cannot connect"),
])
def test_bad_flags_print_one_error_line_and_exit_2(capsys, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and match in err and "\n" not in err


def test_the_reference_backend_reaches_the_server_settings():
    args = build_parser().parse_args(["serve", "--renderer-option", "backend=torch"])
    assert settings_from_args(args).renderer_options == {"backend": "torch"}


def test_renderer_options_are_checked_by_the_renderers_spec_not_its_name():
    """A backend registered later gets its options checked with no code naming it (issue 25, RendererSpec)."""
    from renderer.base import _SPECS, RendererSpec, SizeRule, register
    from studio.commands._args import ArgumentError, check_renderer_options

    register(RendererSpec("toon", SizeRule(), lambda: None, options={"outline": ("thin", "bold")}))
    try:
        check_renderer_options("toon", {"outline": "bold"})
        with pytest.raises(ArgumentError, match="outline=wide is not one of thin, bold"):
            check_renderer_options("toon", {"outline": "wide"})
        with pytest.raises(ArgumentError, match="the toon renderer takes only outline=..., not 'backend'"):
            check_renderer_options("toon", {"backend": "gl"})
    finally:
        del _SPECS["toon"]
    check_renderer_options("flash", {"num_steps": 2})        # flash: its settings model (FlashSettings)
    with pytest.raises(ArgumentError, match="num_steps: Input should be greater than or equal to 1"):
        check_renderer_options("flash", {"num_steps": 0})


def test_exposing_the_studio_warns_and_requires_a_token():
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0"])
    settings = settings_from_args(args)
    warning = expose_warning(settings)
    assert "reachable from other machines" in warning and settings.token and settings.token in warning
    assert settings.admin_token and settings.admin_token in warning and settings.admin_token != settings.token
    assert expose_warning(settings_from_args(build_parser().parse_args(["serve"]))) is None


def test_the_admin_token_and_remote_osc_are_the_operators_choice():
    args = ["serve", "--host", "0.0.0.0", "--admin-token", "a-token-of-my-own-choosing"]
    settings = settings_from_args(build_parser().parse_args(args))
    expose_warning(settings)
    assert settings.admin_token == "a-token-of-my-own-choosing"
    loopback = settings_from_args(build_parser().parse_args(["serve"]))
    assert loopback.admin_token is None and expose_warning(loopback) is None   # make studio: nothing to type
    remote = ["serve", "--osc-port", "9000", "--osc-host", "0.0.0.0", "--osc-allow-remote"]
    assert settings_from_args(build_parser().parse_args(remote)).osc_allow_remote


def test_python_app_py_serves_the_studio():
    port = free_port()
    server = subprocess.Popen([sys.executable, "app.py", "--port", str(port), "--max-sessions", "1"], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True)
    try:
        # A bound for a hang, not a speed test: importing Gradio and torch on a loaded 2-core machine has taken
        # over 30 s; a server that crashes ends the wait at once (poll).
        deadline = time.monotonic() + 180
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).json()
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "the studio did not come up"
                time.sleep(0.2)
        assert health["status"] == "ok" and health["max_sessions"] == 1 and health["renderer"] == "reference"
        assert httpx.get(f"http://127.0.0.1:{port}/docs", timeout=60).status_code == 200
    finally:
        server.terminate()
        server.wait(60)
