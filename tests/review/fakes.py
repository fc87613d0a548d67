"""Loopback stand-ins for an attacker's servers, for the review's reproductions: they keep what clients send."""

from __future__ import annotations

import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakePostgres:
    """A PostgreSQL server that asks every client for its password in clear text (AuthenticationCleartextPassword)
    and keeps what it gets; libpq sends it unless ``require_auth`` forbids that."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.passwords: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            try:
                while True:
                    length, code = struct.unpack("!ii", self._read(conn, 8))
                    if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not here
                        conn.sendall(b"N")
                        continue
                    self._read(conn, length - 8)  # the startup message
                    break
                conn.sendall(b"R" + struct.pack("!ii", 8, 3))
                kind = self._read(conn, 1)
                (length,) = struct.unpack("!i", self._read(conn, 4))
                body = self._read(conn, length - 4)
                if kind == b"p":
                    self.passwords.append(body.rstrip(b"\0").decode())
                error = b"SFATAL\0C28P01\0Mrefused\0\0"
                conn.sendall(b"E" + struct.pack("!i", len(error) + 4) + error)
            except (OSError, EOFError, struct.error):
                pass
            finally:
                conn.close()


class FakeModelServer:
    """An OpenAI-compatible server that keeps each request's ``Authorization`` header and answers 401."""

    def __init__(self) -> None:
        seen: list[str | None] = []
        self.authorizations = seen

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                seen.append(self.headers.get("Authorization"))
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(401)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error": {"message": "no"}}')

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class FakeBolt:
    """A Bolt server that agrees to protocol 5.0 and keeps every byte the client sends after the handshake (HELLO
    carries the credentials in 5.0)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            try:
                conn.settimeout(5)
                FakePostgres._read(conn, 20)  # magic and four version proposals
                conn.sendall(b"\x00\x00\x00\x05")
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    self.received += chunk
                    if b"credentials" in self.received:
                        break
            except (OSError, EOFError):
                pass
            finally:
                conn.close()
