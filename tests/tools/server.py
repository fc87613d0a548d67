"""A loopback HTTP server with everything the web and file tools talk to, for offline tests:

- static pages and files (HTML, PDF, DOCX, XLSX, text in Windows-1252, images, archives) under ``/files/...``;
- hostile pages: ``/big`` (declares 50 MB), ``/big-chunked`` (50 MB without a length), ``/endless`` (never
  ends), ``/slow`` (trickles forever), ``/redirect`` and ``/redirect-loop``, ``/status/<code>``, ``/flaky``
  (503 twice, then a page), ``/gzip``;
- ``/search``: SerpApi's JSON protocol (``organic_results`` by query);
- ``/w/api.php``: the MediaWiki Action API (search, parse by title or revision, revisions before a date);
- ``/wayback/available``: the Wayback Machine availability API;
- ``POST /v1/audio/transcriptions``: OpenAI's transcription endpoint.

Every request is recorded in :attr:`FixtureServer.requests` as ``(method, path, query dict)``.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.tools import files as F

ARTICLE = F.fixture("article.html")
PDF_LINES = ["Annual report of the Lake Vornhal observatory", "Visitors in 2023: 48,211",
             "The telescope was replaced in 2019."]

WIKI_PAGES = {
    "Lake Vornhal": {
        "revisions": [  # newest first: (revid, timestamp, html)
            (3003, "2024-05-01T10:00:00Z", ("<p>Lake Vornhal is an alpine lake. Its area is <b>14.2 km2</b>."
                                            "</p><h2>Observatory</h2><p>The observatory opened in 1923.</p>")),
            (2002, "2015-03-10T08:00:00Z", "<p>Lake Vornhal is a lake. Its area is <b>13.9 km2</b>.</p>"),
            (1001, "2008-01-02T09:00:00Z", "<p>Lake Vornhal is a small lake (stub).</p>"),
        ],
    },
}
WIKI_REDIRECTS = {"Vornhal": "Lake Vornhal"}


class FixtureServer:
    """The server (see the module docstring); ``base`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.flaky_count = 0
        self.transcriptions: list[dict[str, Any]] = []
        self.transcription_usage: dict[str, Any] | None = None
        """The ``usage`` the transcription endpoint reports (none, as older servers, when None)."""
        self.files: dict[str, tuple[bytes, str]] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()

    # -- content ------------------------------------------------------------------------------------
    def add_file(self, name: str, data: bytes, content_type: str) -> str:
        """Serve ``data`` at ``/files/<name>``; returns its URL."""
        self.files[name] = (data, content_type)
        return f"{self.base}/files/{name}"

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    @property
    def base(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def search_results(self, query: str) -> dict[str, Any]:
        q = query.lower()
        if "nothing" in q:
            return {"search_metadata": {"status": "Success"},
                    "error": "Google hasn't returned any results for this query."}
        if "invalid key" in q:
            return {"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"}
        return {
            "search_metadata": {"status": "Success"},
            "search_parameters": {"q": query, "engine": "google"},
            "organic_results": [
                {"position": 1, "title": "Lake Vornhal - fixture article", "link": self.url("/files/article.html"),
                 "snippet": "Lake Vornhal is a fictional alpine lake used as a test page."},
                {"position": 2, "title": "Observatory annual report (PDF)", "link": self.url("/files/report.pdf"),
                 "snippet": "Annual report of the Lake Vornhal observatory."},
            ],
        }

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> FixtureServer:
        server = self

        class Handler(_Handler):
            fixture = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self.add_file("article.html", ARTICLE, "text/html; charset=utf-8")
        self.add_file("report.pdf", F.make_pdf(PDF_LINES), "application/pdf")
        self.add_file("corrupt.pdf", F.corrupt_pdf(), "application/pdf")
        self.add_file("latin1.txt", F.fixture("latin1.txt"), "text/plain")
        self.add_file("badge.svg", F.fixture("badge.svg"), "image/svg+xml")
        self.add_file("red.png", F.make_png(), "image/png")
        self.add_file("budget.xlsx", F.make_xlsx([["Year", "Budget"], [2019, 1200], [2020, 1350]]),
                      "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
        self.add_file("notes.docx", F.make_docx(["Meeting notes", "The budget for 2020 was approved."]),
                      "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
        self.add_file("bundle.zip", F.make_zip({"readme.txt": b"The archive holds one text file.\n"}),
                      "application/zip")
        self.add_file("snapshot.html", b"<html><head><title>Old home page</title></head><body><p>Welcome to "
                      b"the 2008 version of the site. Opening hours: 9 to 17.</p></body></html>", "text/html")
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    fixture: FixtureServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- helpers ------------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _json(self, payload: Any, status: int = 200) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _chunked(self, content_type: str, chunks: Any) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                if self.fixture.stopping.is_set():
                    break
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True

    # -- GET ----------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        parsed = urlparse(self.path)
        query = parse_qs(parsed.query)
        self.fixture.requests.append(("GET", parsed.path, query))
        path = parsed.path
        if path.startswith("/files/"):
            name = path[len("/files/"):]
            if name not in self.fixture.files:
                return self._send(404, b"<h1>Not found</h1>")
            data, ctype = self.fixture.files[name]
            return self._send(200, data, ctype)
        if path == "/redirect":
            return self._send(302, b"", headers={"Location": "/files/article.html"})
        if path == "/redirect-to":  # wherever the query says: another host, another port
            return self._send(302, b"", headers={"Location": query["url"][0]})
        if path == "/redirect-loop":
            return self._send(302, b"", headers={"Location": "/redirect-loop"})
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            return self._send(code, f"<h1>status {code}</h1>".encode())
        if path == "/flaky":
            self.fixture.flaky_count += 1
            if self.fixture.flaky_count <= 2:
                return self._send(503, b"busy")
            return self._send(200, b"<html><head><title>Flaky</title></head><body><p>Finally served.</p>"
                                   b"</body></html>")
        if path == "/gzip":
            body = gzip.compress(b"<html><body><p>Compressed page body.</p></body></html>")
            return self._send(200, body, headers={"Content-Encoding": "gzip"})
        if path == "/big":
            return self._big_declared()
        if path == "/big-chunked":
            block = b"<p>" + b"x" * 65_530 + b"</p>\n"
            return self._chunked("text/html", (block for _ in range(800)))
        if path == "/endless":
            block = b"<p>" + b"endless page " * 5000 + b"</p>\n"

            def forever() -> Any:
                while True:
                    yield block
            return self._chunked("text/html", forever())
        if path == "/slow":
            def trickle() -> Any:
                yield b"<html><body><p>The first part of a slow page.</p>"
                while True:
                    time.sleep(0.2)
                    yield b"<p>more</p>"
            return self._chunked("text/html", trickle())
        if path in {"/search", "/search.json"}:
            return self._json(self.fixture.search_results(query.get("q", [""])[0]))
        if path == "/w/api.php":
            return self._wiki(query)
        if path == "/wayback/available":
            return self._wayback(query)
        return self._send(404, b"<h1>Not found</h1>")

    def _big_declared(self) -> None:
        size = 50 * 1024 * 1024
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(size))
        self.send_header("Connection", "close")
        self.end_headers()
        block = b"y" * 65536
        try:
            for _ in range(size // len(block)):
                if self.fixture.stopping.is_set():
                    break
                self.wfile.write(block)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True

    def _wiki(self, q: dict[str, list[str]]) -> None:
        one = {k: v[0] for k, v in q.items()}
        action = one.get("action")
        if action == "query" and one.get("list") == "search":
            term = one.get("srsearch", "").lower()
            hits = [{"ns": 0, "title": t, "pageid": i + 1,
                     "snippet": f'<span class="searchmatch">{t}</span> is an alpine lake'}
                    for i, t in enumerate(WIKI_PAGES) if any(w in t.lower() for w in term.split())]
            return self._json({"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(hits)},
                                                               "search": hits}})
        if action == "query" and one.get("prop") == "revisions":
            title = WIKI_REDIRECTS.get(one.get("titles", ""), one.get("titles", ""))
            page = WIKI_PAGES.get(title)
            if page is None:
                return self._json({"query": {"pages": [{"ns": 0, "title": title, "missing": True}]}})
            start = one.get("rvstart", "9999")
            older = [r for r in page["revisions"] if r[1] <= start]
            revs = [{"revid": r[0], "parentid": 0, "timestamp": r[1]} for r in older[:1]]
            entry: dict[str, Any] = {"pageid": 1, "ns": 0, "title": title}
            if revs:
                entry["revisions"] = revs
            return self._json({"batchcomplete": True, "query": {"pages": [entry]}})
        if action == "parse":
            if "oldid" in one:
                for title, page in WIKI_PAGES.items():
                    for revid, _, html in page["revisions"]:
                        if str(revid) == one["oldid"]:
                            return self._json({"parse": {"title": title, "revid": revid, "text": html}})
                return self._json({"error": {"code": "nosuchrevid", "info": "There is no revision with ID"}})
            title = WIKI_REDIRECTS.get(one.get("page", ""), one.get("page", ""))
            page = WIKI_PAGES.get(title)
            if page is None:
                return self._json({"error": {"code": "missingtitle", "info": "The page you specified doesn't exist."}})
            revid, _, html = page["revisions"][0]
            return self._json({"parse": {"title": title, "revid": revid, "text": html}})
        return self._json({"error": {"code": "badvalue", "info": "Unrecognized parameters."}})

    def _wayback(self, q: dict[str, list[str]]) -> None:
        url = q.get("url", [""])[0]
        if "never-archived" in url:
            return self._json({"url": url, "archived_snapshots": {}})
        stamp = (q.get("timestamp", ["20240101"])[0] + "000000")[:14]
        return self._json({"url": url, "archived_snapshots": {"closest": {
            "status": "200", "available": True, "url": self.fixture.url("/files/snapshot.html"),
            "timestamp": stamp}}})

    # -- POST ---------------------------------------------------------------------------------------
    def do_POST(self) -> None:
        parsed = urlparse(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.fixture.requests.append(("POST", parsed.path, {}))
        if parsed.path.endswith("/audio/transcriptions"):
            self.fixture.transcriptions.append({"content_type": self.headers.get("Content-Type", ""),
                                                "size": len(body), "body": body[:4000]})
            reply: dict[str, Any] = {"text": "The meeting starts at nine o'clock."}
            if self.fixture.transcription_usage is not None:
                reply["usage"] = self.fixture.transcription_usage
            return self._json(reply)
        return self._send(404, b"not found")
