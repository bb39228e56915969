"""A real coturn (Debian package `coturn`, binary `turnserver`) on 127.0.0.1 for the ICE tests, stopped by PID.

    with Coturn(user="u", password="p") as turn:         # long-term credentials
        turn.url  # 'turn:127.0.0.1:PORT'
    with Coturn(secret="s3cret") as turn:                # TURN REST API (use-auth-secret)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from studio.server.background import free_port

TURNSERVER = shutil.which("turnserver")
REALM = "alaya.test"


class Coturn:
    def __init__(self, *, user: str | None = None, password: str | None = None, secret: str | None = None):
        self.port = free_port()
        self.user, self.password, self.secret = user, password, secret
        self.dir = Path(tempfile.mkdtemp(prefix="coturn-"))
        self.log = self.dir / "turn.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"turn:127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        # relay ports from a range of our own, so several test runs on one machine do not collide
        low = 20000 + (self.port % 400) * 100
        cmd = [TURNSERVER, "-n", "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1", f"--listening-port={self.port}",
               f"--min-port={low}", f"--max-port={low + 99}", "--allow-loopback-peers", "--no-cli", "--no-tls",
               "--no-dtls", f"--realm={REALM}", "--fingerprint", f"--log-file={self.log}", "--simple-log",
               "--no-stdout-log", f"--pidfile={self.dir / 'turn.pid'}", f"--userdb={self.dir / 'turndb'}"]
        if self.secret is not None:
            cmd += ["--use-auth-secret", f"--static-auth-secret={self.secret}"]
        else:
            cmd += ["--lt-cred-mech", f"--user={self.user}:{self.password}"]
        return cmd

    def start(self, timeout: float = 20.0) -> "Coturn":
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:  # ready once its TCP listener accepts (the UDP one opens at the same time)
            if self.process.poll() is not None:
                raise RuntimeError(f"turnserver exited with {self.process.returncode}: {self.log_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"turnserver did not listen on {self.port} within {timeout} s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.dir.glob("turn*.log"))

    def __enter__(self) -> "Coturn":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
