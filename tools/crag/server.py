"""CRAG's endpoints served from saved calls (``python -m kgagents.tools.crag_api serve``); the command
line.

A saved call answers its saved ``result`` (a cut output recovered as far as it parses); names match
case-insensitively; a call that was not saved answers what CRAG's API answers for an entity it does not know
(:attr:`~kgagents.tools.crag.functions.Function.empty`). The ``x-crag-mock`` header says which (``saved``,
``saved-truncated``, ``not-saved``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from kgagents.core.extras import require
from kgagents.tools.crag.calls import SavedCall, default_calls_file, load_calls
from kgagents.tools.crag.client import ENV_VAR, CragAPI, api_url
from kgagents.tools.crag.functions import FUNCTIONS, CragAPIError, Function, call_key

#: The first paragraph of the command's help.
DESCRIPTION = ("CRAG's mock knowledge-graph API: its functions, an async client, and a local server of saved "
               "answers.")


# ------------------------------------------------------------------------------------------------------------
# The mock server
# ------------------------------------------------------------------------------------------------------------
def mock_app(calls: Sequence[SavedCall]) -> Any:
    """A Starlette app with CRAG's endpoints, answering from ``calls``."""
    require("starlette", "CRAG's mock KG API server")
    from starlette.applications import Starlette  # the crag extra: only for the mock server
    from starlette.requests import Request  # the crag extra: only for the mock server
    from starlette.responses import JSONResponse  # the crag extra: only for the mock server
    from starlette.routing import Route  # the crag extra: only for the mock server

    saved = {call_key(FUNCTIONS[c.function], c.payload): c for c in calls}

    def endpoint(fn: Function) -> Callable[[Request], Any]:
        async def answer(request: Request) -> JSONResponse:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                return JSONResponse({"detail": f"the body is not JSON: {exc}"}, status_code=422)
            if not isinstance(body, dict):
                return JSONResponse({"detail": "the body must be a JSON object"}, status_code=422)
            try:
                payload = fn.check(body)
            except CragAPIError as exc:
                return JSONResponse({"detail": str(exc)}, status_code=422)
            call = saved.get(call_key(fn, payload))
            if call is None:
                return JSONResponse({"result": fn.empty}, headers={"x-crag-mock": "not-saved"})
            return JSONResponse({"result": call.result},
                                headers={"x-crag-mock": "saved-truncated" if call.truncated else "saved"})
        return answer

    async def root(request: Request) -> JSONResponse:
        return JSONResponse({"message": f"CRAG mock API: {len(saved)} saved call(s) of {len(FUNCTIONS)} "
                                        "functions"})

    routes = [Route("/", root, methods=["GET"])]
    routes += [Route(fn.path, endpoint(fn), methods=["POST"]) for fn in FUNCTIONS.values()]
    return Starlette(routes=routes)


@dataclass
class CragMockServer:
    """CRAG's API served from saved calls on a loopback port, in a background thread::

        with CragMockServer() as server:       # the calls that ship with kgagents, a free port
            api = CragAPI(server.url)
    """

    calls_file: str | Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    """0: a free port (the one bound is in :attr:`url`)."""
    start_timeout_s: float = 10.0
    calls: list[SavedCall] = field(default_factory=list, init=False)
    _server: Any = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _socket: socket.socket | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the CRAG mock server is not running")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        uvicorn = require("uvicorn", "CRAG's mock KG API server")

        self.calls = load_calls(self.calls_file or default_calls_file())
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise OSError(f"the CRAG mock server cannot listen on {self.host}:{self.port}: {exc}") from exc
        self._socket = sock
        config = uvicorn.Config(mock_app(self.calls), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="crag-mock-api", daemon=True)
        self._thread.start()
        deadline = self.start_timeout_s
        while not self._server.started and self._thread.is_alive() and deadline > 0:
            threading.Event().wait(0.02)
            deadline -= 0.02
        if not self._server.started:
            self.stop()
            raise RuntimeError(f"the CRAG mock server did not start within {self.start_timeout_s:g} s")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server, self._thread, self._socket = None, None, None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------------------
def _argument(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv: Sequence[str] | None = None) -> int:
    """``serve`` the mock API, ``call`` a function of an API, or list the ``functions``."""
    parser = argparse.ArgumentParser(prog="python -m kgagents.tools.crag_api", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve CRAG's endpoints from saved calls")
    serve.add_argument("--calls", help="saved calls (default: the 40 that ship with kgagents)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    call = sub.add_parser("call", help="call a function, e.g. call music_get_members 'Maroon 5'")
    call.add_argument("function")
    call.add_argument("args", nargs="*", help="arguments (JSON values, else text)")
    call.add_argument("--url", help=f"the API (default: ${ENV_VAR})")
    sub.add_parser("functions", help="list the functions")
    args = parser.parse_args(argv)
    if args.command == "functions":
        for fn in FUNCTIONS.values():
            print(f"{fn.signature():70} POST {fn.path}")
        return 0
    if args.command == "call":
        url = api_url(args.url)
        if url is None:
            print(f"no API address: give --url or set {ENV_VAR}", file=sys.stderr)
            return 2
        try:
            result = asyncio.run(CragAPI(url).call(args.function, *map(_argument, args.args)))
        except CragAPIError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    uvicorn = require("uvicorn", "CRAG's mock KG API server")

    try:
        calls = load_calls(args.calls or default_calls_file())
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"CRAG mock API: {len(calls)} saved call(s) at http://{args.host}:{args.port} "
          f"(export {ENV_VAR}=http://{args.host}:{args.port})", file=sys.stderr)
    uvicorn.run(mock_app(calls), host=args.host, port=args.port, log_level="warning")
    return 0

