"""A web page of another origin, open in the user's browser, cannot drive their `make dev` server: `langgraph dev`
runs one-user (no caller tokens, the operator's API key in its environment), a page served from another loopback
port tries in a headless Chromium what a page can (CORS reads with and without a preflight, "simple" text/plain
POSTs that need none, MCP), and reports what it could read and do. It reads nothing, and nothing it sends starts a
run, makes a thread or reaches the loopback listener a run would have sent the key to."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import httpx
import pytest
from langgraph_sdk import get_client

from tests.test_serve import API_KEY, KGOT_QUESTION, Recorder, no_secret_reached
from tests.test_studio import serve
from tests.test_views import _browser

pytestmark = pytest.mark.slow

#: What the page tries: (name, the fetch's URL path, its options). ``cors``: a request whose answer the page
#: would read; ``no-cors``: a "simple" request a browser sends without a preflight, whose answer it cannot read.
ATTEMPTS = [
    ("read the assistants (preflighted JSON)", "/assistants/search", {
        "method": "POST", "headers": {"Content-Type": "application/json"}, "body": "{}"}),
    ("read the threads (simple text/plain)", "/threads/search", {
        "method": "POST", "headers": {"Content-Type": "text/plain"}, "body": "{}"}),
    ("read the server's info (simple GET)", "/info", {}),
    ("read a health check (simple GET)", "/ok", {}),
    ("start a run (preflighted JSON)", "/runs", {
        "method": "POST", "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"assistant_id": "kgot", "input": {"question": KGOT_QUESTION},
                            "on_completion": "keep"})}),
    ("start a run (simple, no-cors)", "/runs", {
        "method": "POST", "mode": "no-cors", "headers": {"Content-Type": "text/plain"},
        "body": json.dumps({"assistant_id": "kgot", "input": {"question": KGOT_QUESTION}, "on_completion": "keep"})}),
    ("send the key to the listener (simple, no-cors)", "/runs", {
        "method": "POST", "mode": "no-cors", "headers": {"Content-Type": "text/plain"},
        "body": "LISTENER_RUN"}),
    ("make a thread (simple, no-cors)", "/threads", {
        "method": "POST", "mode": "no-cors", "headers": {"Content-Type": "text/plain"}, "body": "{}"}),
    ("call a tool over MCP (simple, no-cors)", "/mcp", {
        "method": "POST", "mode": "no-cors", "headers": {"Content-Type": "text/plain", "Accept": "application/json"},
        "body": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "kgot", "arguments": {"question": KGOT_QUESTION}}})}),
]

PAGE = """<!doctype html><html><body><pre id="out">working</pre><script>
const api = API, attempts = ATTEMPTS, results = {};
(async () => {
  for (const [name, path, options] of attempts) {
    try {
      const response = await fetch(api + path, options);
      results[name] = response.type === "opaque" ? "sent, unreadable"
        : {status: response.status, body: (await response.text()).slice(0, 300)};
    } catch (error) {
      results[name] = "blocked: " + error;
    }
  }
  document.getElementById("out").textContent = JSON.stringify(results);
  await fetch("/report", {method: "POST", body: JSON.stringify(results)});
})();
</script></body></html>"""


def page_server(page: str) -> tuple[ThreadingHTTPServer, list[dict]]:
    """A loopback server of another origin: ``/`` is the page, ``POST /report`` takes what it found."""
    reports: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = page.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            reports.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, reports


@pytest.fixture
def one_user_server(tmp_path):
    demo = resources.files("kgagents") / "data" / "demo_kgot_figure9.json"
    yield from serve(tmp_path, KGAGENTS_MODEL=f"scripted:{demo}", KGAGENTS_API_KEY=API_KEY, OPENAI_API_KEY=API_KEY)


async def test_a_page_of_another_origin_reads_nothing_and_starts_nothing(one_user_server, tmp_path):
    browser = _browser()
    if browser is None:
        if os.environ.get("KGAGENTS_CI"):
            pytest.fail("CI must have a headless Chromium (.ci/run installs the chromium package)")
        pytest.skip("needs a headless Chromium (apt install chromium)")
    url, _ = one_user_server
    listener = Recorder()
    steal = json.dumps({"assistant_id": "kgot", "input": {"question": KGOT_QUESTION}, "on_completion": "keep",
                        "context": {"model": "gpt-4o-mini", "base_url": f"http://127.0.0.1:{listener.port}/v1"}})
    attempts = [(n, p, {**o, "body": steal} if o.get("body") == "LISTENER_RUN" else o) for n, p, o in ATTEMPTS]
    page = PAGE.replace("API", json.dumps(url), 1).replace("ATTEMPTS", json.dumps(attempts), 1)
    httpd, reports = page_server(page)
    # the preflight a page's JSON request needs: no origin but Studio's is allowed
    async with httpx.AsyncClient(base_url=url) as http:
        preflight = await http.options("/runs", headers={
            "Origin": f"http://127.0.0.1:{httpd.server_port}", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
    assert "access-control-allow-origin" not in preflight.headers, dict(preflight.headers)
    chromium = subprocess.Popen(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=60000", "--dump-dom",
         f"http://127.0.0.1:{httpd.server_port}/"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not reports and time.monotonic() < deadline and chromium.poll() is None:
            time.sleep(0.2)
        if not reports:
            chromium.terminate()
            _, err = chromium.communicate(timeout=30)
            pytest.fail(f"the page reported nothing: {err[-2000:]}")
    finally:
        if chromium.poll() is None:
            chromium.terminate()
            chromium.wait(timeout=30)
        httpd.shutdown()
    [found] = reports
    assert set(found) == {name for name, _, _ in ATTEMPTS}, found
    for name, _, options in ATTEMPTS:
        expected = "sent, unreadable" if options.get("mode") == "no-cors" else "blocked: TypeError"
        assert str(found[name]).startswith(expected), (name, found[name])
    time.sleep(3)  # a run that was let through would be running, or calling out, by now
    local = get_client(url=url, api_key=None)  # this machine, no origin: the one user
    assert await local.threads.search(limit=100) == [], "the page made a thread or started a run"
    no_secret_reached(listener)
    listener.close()
