"""An engine on a bare socket: the WebSocket handshake and frames by hand, for what a client library hides
(an engine that stops reading, or one that never answers the studio's close)."""

from __future__ import annotations

import base64
import os
import socket
import struct


class RawEngine:
    """A WebSocket engine on a bare socket with a small receive buffer, which reads only when told: a client
    library would read ahead into its own memory, and the point is an engine that really stops reading."""

    def __init__(self, studio, token: str | None = None):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        self.sock.connect((studio.settings.host, studio.settings.port))
        key = base64.b64encode(os.urandom(16)).decode()
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.sock.sendall(f"GET /api/engine/feed HTTP/1.1\r\nHost: {studio.settings.host}\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                          f"{auth}\r\n".encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(1)
        assert response.startswith(b"HTTP/1.1 101"), response

    def send(self, message: str | bytes) -> None:
        opcode, data = (0x1, message.encode()) if isinstance(message, str) else (0x2, message)
        n = len(data)
        length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else \
            bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(bytes([0x80 | opcode]) + length + bytes(4) + data)   # a zero mask leaves data as is

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the studio closed the connection"
            data += chunk
        return data

    def frame(self) -> tuple[int, bytes]:
        """The next frame the studio sent: its opcode and payload (servers do not mask)."""
        first, second = self._exactly(2)
        n = second & 0x7F
        n = struct.unpack(">H", self._exactly(2))[0] if n == 126 else \
            struct.unpack(">Q", self._exactly(8))[0] if n == 127 else n
        return first & 0x0F, self._exactly(n)

    def recv(self) -> str | bytes:
        while True:
            opcode, data = self.frame()
            if opcode == 0x1:
                return data.decode()
            if opcode == 0x2:
                return data                  # pings (0x9) are skipped: the test is over long before they matter

    def closed_with(self) -> tuple[int, str]:
        """The close code and reason of the studio's close frame, skipping what came before it."""
        while True:
            opcode, data = self.frame()
            if opcode == 0x8:
                return struct.unpack(">H", data[:2])[0], data[2:].decode()

    def close(self) -> None:
        self.sock.close()
