"""A loopback listener that speaks just enough of PostgreSQL's protocol to be sent a password: it refuses SSL and
GSS encryption, reads the startup message, asks for a clear-text password (``AuthenticationCleartextPassword``)
and records what the client sends back."""

from __future__ import annotations

import socket
import struct
import threading

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


class PostgresRecorder:
    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.received: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def port(self) -> int:
        return self._server.getsockname()[1]

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
            threading.Thread(target=self._record, args=(conn,), daemon=True).start()

    @staticmethod
    def _exact(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def _record(self, conn: socket.socket) -> None:
        seen = b""
        conn.settimeout(5.0)
        try:
            while True:  # SSLRequest / GSSENCRequest until the startup message
                (length,) = struct.unpack("!I", self._exact(conn, 4))
                body = self._exact(conn, length - 4)
                seen += body
                code = struct.unpack("!I", body[:4])[0]
                if code in (SSL_REQUEST, GSSENC_REQUEST):
                    conn.sendall(b"N")
                    continue
                break
            conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
            kind = self._exact(conn, 1)
            (length,) = struct.unpack("!I", self._exact(conn, 4))
            seen += kind + self._exact(conn, length - 4)
            error = b"SFATAL\x00C28P01\x00Mrecorded\x00\x00"
            conn.sendall(b"E" + struct.pack("!I", len(error) + 4) + error)
        except OSError:
            pass
        finally:
            conn.close()
            with self._lock:
                self.received.append(seen)

    def saw(self, secret: str) -> bool:
        with self._lock:
            return any(secret.encode() in data for data in self.received)

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self.received)
