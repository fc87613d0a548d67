"""Loopback listeners that record what a client sends them, for tests that show where credentials go.

- :class:`BoltRecorder`: a Bolt server as far as the handshake (it agrees to Bolt 4.4, whose ``HELLO`` carries
  the user and password) and then records every byte the client sends, until the client gives up;
- :class:`HttpRecorder`: an HTTP server that answers every request ``401`` and records its method, path,
  headers and body;
- :class:`PostgresRecorder`: a PostgreSQL server that asks every client for its password in clear text (which
  libpq sends unless told not to) and records it.

Neither answers anything a client could use: a test asks them afterwards what reached them (``received``,
``requests``, :meth:`saw`).
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Bolt's magic preamble, and the version the recorder agrees to (4.4: the credentials are in ``HELLO``).
BOLT_MAGIC = b"\x60\x60\xb0\x17"
BOLT_4_4 = b"\x00\x00\x04\x04"


class BoltRecorder:
    """A loopback listener that completes Bolt's handshake and records the bytes of every connection."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.received: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"bolt://127.0.0.1:{self._server.getsockname()[1]}"

    def __enter__(self) -> BoltRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._record, args=(conn,), daemon=True).start()

    def _record(self, conn: socket.socket) -> None:
        data = b""
        conn.settimeout(3.0)
        try:
            while len(data) < 20:
                chunk = conn.recv(20 - len(data))
                if not chunk:
                    break
                data += chunk
            if data.startswith(BOLT_MAGIC):
                conn.sendall(BOLT_4_4)
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        finally:
            conn.close()
            with self._lock:
                self.received.append(data)

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self.received)

    def saw(self, secret: str) -> bool:
        """Whether ``secret`` reached the listener in any connection."""
        with self._lock:
            return any(secret.encode("utf-8") in data for data in self.received)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class HttpRecorder:
    """A loopback HTTP server that records every request and answers it ``401``."""

    def __init__(self) -> None:
        recorder = self
        self.requests: list[Request] = []
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with recorder._lock:
                    recorder.requests.append(Request(self.command, self.path,
                                                     {k.lower(): v for k, v in self.headers.items()}, body))
                payload = b'{"error": {"message": "recorded", "type": "invalid_request_error"}}'
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HttpRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def saw(self, secret: str) -> bool:
        """Whether ``secret`` reached the server in any request's path, headers or body (base64 of basic
        authentication included)."""
        import base64

        with self._lock:
            for request in self.requests:
                text = " ".join([request.path, *request.headers.values()]).encode("utf-8") + request.body
                auth = request.headers.get("authorization", "")
                if auth.lower().startswith("basic "):
                    try:
                        text += base64.b64decode(auth[6:])
                    except ValueError:
                        pass
                if secret.encode("utf-8") in text:
                    return True
        return False


class PostgresRecorder:
    """A loopback PostgreSQL server as far as authentication: it declines TLS, asks for the password in clear text
    (``AuthenticationCleartextPassword``), records what the client sends and refuses the login."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.passwords: list[str] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"postgresql://someone@127.0.0.1:{self._server.getsockname()[1]}/kg?sslmode=disable"

    def __enter__(self) -> PostgresRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._login, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _login(self, conn: socket.socket) -> None:
        conn.settimeout(3.0)
        try:
            while True:
                length, code = struct.unpack("!ii", self._read(conn, 8))
                if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: declined
                    conn.sendall(b"N")
                    continue
                self._read(conn, length - 8)  # the startup message
                break
            conn.sendall(b"R" + struct.pack("!ii", 8, 3))
            kind = self._read(conn, 1)
            (length,) = struct.unpack("!i", self._read(conn, 4))
            body = self._read(conn, length - 4)
            if kind == b"p":
                with self._lock:
                    self.passwords.append(body.rstrip(b"\0").decode("utf-8", "replace"))
            error = b"SFATAL\0C28P01\0Mrefused\0\0"
            conn.sendall(b"E" + struct.pack("!i", len(error) + 4) + error)
        except (OSError, EOFError, struct.error):
            pass
        finally:
            conn.close()
