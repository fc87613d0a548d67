"""A small OpenAI-compatible chat-completions server on loopback, with a script of replies and failures.

Tests queue what the next requests get, in order:

    server.reply("text")                          a normal assistant message
    server.tool_call({"answer": "x"})             a tool call (the tool the request forces, or its first tool)
    server.choices([{"answer": "x"}, '{"a'])      one reply with these choices, a tool call each (whatever ``n``)
    server.tool_call('{"answer": ', name="Foo")   a string is sent as the raw ``arguments`` (malformed JSON)
    server.error(500) / server.rate_limit(2)      an HTTP error (429 carries ``Retry-After``)
    server.hang(30)                               no answer until the client gives up (or the server stops)
    server.slow_reply("text", 2)                  a plain message, sent after 2 s
    server.truncated() / server.not_json()        a 200 whose JSON body is cut in half / is not JSON at all
    server.empty_body()                           a 200 with no body at all

A server that is down or wrong answers every request the same way, whatever is queued: ``server.always(kind)``
(:data:`ALWAYS_KINDS`: ``"500"``, ``"html"``, ``"broken_json"``, ``"empty"``, ``"silent"``: accepts the connection
and never answers) applies to every route, the model list and the embeddings included; ``always(None)`` ends it.
    server.misbehave("500")                       every request from now on: a 500, an HTML page, a cut or
                                                  empty body, or silence (MISBEHAVIOURS)
    server.one_slot = True                        chat completions are served one at a time (Ollama's and
                                                  llama.cpp's one generation slot); GETs are not held up

A request for ``n`` choices gets ``n`` copies of its step's message (``choices`` steps give theirs as they are).
POST /v1/embeddings answers every input with a deterministic vector (:func:`fake_embedding`: words hashed into
``embedding_dim`` buckets, normalised), refusing an input longer than ``embedding_max_chars`` with OpenAI's
context-length error. Each POST /v1/chat/completions takes the next step; when none is left the server answers 400 with
a message that says so (not a 5xx, which the client would retry), unless a :class:`FaultPolicy` answers it
(:meth:`FakeOpenAIServer.answer_with`): a seeded share of faults of every kind (500, 429, a stall, a cut or
non-JSON body, a reply that breaks the requested schema), otherwise what a *responder* says, e.g.
:func:`script_responder`, which answers from a :class:`~kgagents.core.scripted.ScriptedChatModel` script. Every
successful reply carries ``model`` and ``usage``. Every request is recorded in
:attr:`FakeOpenAIServer.requests` (method, path, headers, JSON body). GET /v1/models lists
:attr:`FakeOpenAIServer.models`. Streaming requests are refused with a 400.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kgagents.core.scripted import STAGE_HEADER, ScriptedChatModel, ScriptExhausted
from kgagents.evals.latency_server import forced_tool


@dataclass
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any = None
    raw: bytes = b""  # the body as it came

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("tools") or [])

    @property
    def last_user_text(self) -> str:
        """The text of the last user message (what a corrective follow-up looks like)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text_of(message)
        return ""

    @property
    def prompt(self) -> str:
        """Every message's text, joined by newlines, after the call's stage (the ``X-KGAgents-Stage`` header) as
        ``[stage: ...]``: what a scripted model's ``when`` patterns match."""
        text = "\n".join(_text_of(message) for message in self.messages)
        stage = next((v for k, v in self.headers.items() if k.lower() == STAGE_HEADER.lower()), None)
        return f"[stage: {stage}]\n{text}" if stage else text


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


@dataclass
class Step:
    """What one chat-completions request gets."""

    kind: str  # "reply" | "tool_calls" | "choices" | "error" | "hang" | "truncated" | "not_json" | "html" | "empty"
    content: str | None = None
    tool_calls: list[tuple[str | None, Any]] = field(default_factory=list)
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    usage: tuple[int, int] | None = None
    model: str | None = None


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    # -- plumbing ---------------------------------------------------------------------------------
    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_body(status, json.dumps(payload).encode("utf-8"), headers)

    def _send_body(self, status: int, data: bytes, headers: dict[str, str] | None = None, *,
                   content_type: str = "application/json") -> None:
        """``data`` as a JSON response, whatever it holds (a cut or garbled body is a fault to send)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kinds = {400: "invalid_request_error", 401: "invalid_request_error", 404: "not_found_error",
                 429: "rate_limit_error"}
        self._send_json(status, {"error": {"message": message, "type": kinds.get(status, "server_error"),
                                           "param": None, "code": None}}, headers)

    def _record(self, body: Any, raw: bytes = b"") -> RecordedRequest:
        request = RecordedRequest(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                  raw)
        with self.server.fake.lock:
            self.server.fake.requests.append(request)
        return request

    # -- routes -----------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        self._record(None)
        fake = self.server.fake
        if fake.always_kind is not None:
            self._always(fake.always_kind)
        elif fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._error(401, "Incorrect API key provided.")
        elif self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in fake.models]})
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            self._record(raw.decode("utf-8", "replace"), raw)
            self._error(400, "the request body is not JSON")
            return
        request = self._record(body, raw)
        fake = self.server.fake
        if fake.always_kind is not None:
            self._always(fake.always_kind)
            return
        if self.path.rstrip("/") in ("/v1/embeddings", "/embeddings"):
            self._embeddings(body)
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route POST {self.path}")
            return
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._error(401, "Incorrect API key provided.")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "'messages' is a required property")
            return
        if body.get("stream"):
            self._error(400, "this fake server does not stream; send stream=false")
            return
        with fake.slot if fake.one_slot else contextlib.nullcontext():
            self._complete(fake, body, request)

    def _complete(self, fake: FakeOpenAIServer, body: dict[str, Any], request: RecordedRequest) -> None:
        """Answer one chat-completions request with its step."""
        step = fake.next_step(request)
        if step is None:
            self._error(400, "fake server: no scripted reply left for this request")
            return
        if step.kind == "error":
            self._error(step.status, step.message or f"scripted HTTP {step.status}", step.headers)
        elif step.kind == "hang":
            # Hold the request without answering until the client gives up; stop() ends the wait.
            fake.stopping.wait(step.seconds)
            self.close_connection = True
        elif step.kind == "truncated":  # a complete Content-Length for half a body: the JSON ends mid-way
            data = json.dumps(fake.completion(body, Step("reply", content=step.content or "cut short"))).encode()
            self._send_body(200, data[: len(data) // 2])
        elif step.kind == "not_json":  # what a proxy in front of the model may send
            self._send_body(200, b"upstream connect error or disconnect/reset before headers")
        elif step.kind == "empty":  # a 200 with nothing in it
            self._send_body(200, b"")
        elif step.kind == "html":  # a proxy's or a captive portal's page, served with a 200
            self._send_html()
        elif step.kind == "error_object":  # a 200 whose JSON is an error object (a proxy's upstream failed)
            self._send_json(200, {"error": {"message": step.message or "upstream model is down", "code": 502}})
        else:
            if step.seconds:  # a slow model: the answer comes, late
                fake.stopping.wait(step.seconds)
            self._send_json(200, fake.completion(body, step))

    def _send_html(self) -> None:
        self._send_body(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                        content_type="text/html; charset=utf-8")

    def _always(self, kind: str) -> None:
        """What a server that is down or wrong answers to every request (:meth:`FakeOpenAIServer.always`)."""
        if kind == "500":
            self._error(500, "The server had an error while processing your request.")
        elif kind == "html":
            self._send_html()
        elif kind == "broken_json":
            self._send_body(200, b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, ')
        elif kind == "empty":
            self._send_body(200, b"")
        else:  # "silent": the connection is accepted and nothing is ever sent back (until the server stops)
            self.server.fake.stopping.wait()
            self.close_connection = True

    def _embeddings(self, body: Any) -> None:
        fake = self.server.fake
        if fake.api_key is not None and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
            self._error(401, "Incorrect API key provided.")
            return
        inputs = body.get("input") if isinstance(body, dict) else None
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) and t for t in inputs):
            self._error(400, "'input' must be a non-empty string or a list of non-empty strings")
            return
        longest = max(len(t) for t in inputs)
        if fake.embedding_max_chars is not None and longest > fake.embedding_max_chars:
            self._error(400, f"This model's maximum context length is {fake.embedding_max_chars} tokens, however "
                             f"you requested {longest} tokens (0 in your prompt; 0 for the completion).")
            return
        data = [{"object": "embedding", "index": i, "embedding": fake_embedding(t, fake.embedding_dim)}
                for i, t in enumerate(inputs)]
        tokens = sum(len(t.split()) for t in inputs)
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model", "?"),
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def fake_embedding(text: str, dim: int = 32) -> list[float]:
    """A deterministic embedding: each lower-case word adds 1 to the bucket its hash falls in, normalised."""
    import hashlib

    vector = [0.0] * dim
    for word in text.lower().split():
        vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % dim] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (a timeout, a cancelled call) is no error of the server's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAIServer:
    """The server; use it as a context manager or through the :func:`openai_server` fixture."""

    def __init__(self, *, api_key: str | None = None, models: list[str] | None = None,
                 default_usage: tuple[int, int] | None = (12, 5)) -> None:
        self.api_key = api_key
        """When set, requests without ``Authorization: Bearer <api_key>`` get a 401."""
        self.models = models or ["gpt-4o-mini", "local-model"]
        self.default_usage = default_usage
        self.embedding_dim = 32
        self.embedding_max_chars: int | None = None
        """An embeddings request with a longer input gets OpenAI's context-length error (a 400)."""
        self.requests: list[RecordedRequest] = []
        self.lock = threading.Lock()
        self.one_slot = False
        """Serve chat completions one at a time, as a server with one generation slot does (Ollama, llama.cpp):
        a request waits for the one before it to be answered. GETs (the model list) are answered at once."""
        self.slot = threading.Lock()
        self.stopping = threading.Event()
        self._steps: deque[Step] = deque()
        self.always_kind: str | None = None
        """Every request gets this answer, whatever is queued (:meth:`always`)."""
        self.policy: FaultPolicy | None = None
        """Answers the requests no queued step is left for (see :meth:`answer_with`)."""
        self.misbehaviour: Step | None = None
        """What every chat request gets instead of an answer (see :meth:`misbehave`)."""
        self._ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not running"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The ``base_url`` an OpenAI client takes (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting --------------------------------------------------------------------------------
    def _push(self, step: Step) -> FakeOpenAIServer:
        with self.lock:
            self._steps.append(step)
        return self

    def reply(self, content: str, *, usage: tuple[int, int] | None = None,
              model: str | None = None) -> FakeOpenAIServer:
        """A plain assistant message."""
        return self._push(Step("reply", content=content, usage=usage, model=model))

    def slow_reply(self, content: str, seconds: float) -> FakeOpenAIServer:
        """A plain assistant message, sent after ``seconds`` (a long generation)."""
        return self._push(Step("reply", content=content, seconds=seconds))

    def tool_call(self, arguments: Any, *, name: str | None = None, content: str | None = None,
                  usage: tuple[int, int] | None = None, model: str | None = None) -> FakeOpenAIServer:
        """One tool call. ``arguments``: a JSON-able value, or a string sent verbatim (e.g. malformed JSON).
        ``name`` defaults to the tool the request forces through ``tool_choice``, else its first tool."""
        return self._push(Step("tool_calls", content=content, tool_calls=[(name, arguments)], usage=usage,
                               model=model))

    def tool_calls(self, calls: list[tuple[str, Any]], *, usage: tuple[int, int] | None = None,
                   model: str | None = None) -> FakeOpenAIServer:
        """Several tool calls in one reply: ``[(name, arguments), ...]``."""
        return self._push(Step("tool_calls", tool_calls=list(calls), usage=usage, model=model))

    def choices(self, arguments: list[Any], *, usage: tuple[int, int] | None = None) -> FakeOpenAIServer:
        """One reply whose choices are one tool call each, with these ``arguments`` (as :meth:`tool_call`)."""
        return self._push(Step("choices", tool_calls=[(None, a) for a in arguments], usage=usage))

    def error(self, status: int, message: str = "", *, headers: dict[str, str] | None = None) -> FakeOpenAIServer:
        """An HTTP error with an OpenAI-style error body."""
        return self._push(Step("error", status=status, message=message, headers=dict(headers or {})))

    def server_error(self, times: int = 1) -> FakeOpenAIServer:
        for _ in range(times):
            self.error(500, "The server had an error while processing your request.")
        return self

    def rate_limit(self, retry_after: float = 0) -> FakeOpenAIServer:
        """A 429 with a ``Retry-After`` header (seconds)."""
        value = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        return self.error(429, "Rate limit reached for requests", headers={"Retry-After": value})

    def hang(self, seconds: float = 30.0) -> FakeOpenAIServer:
        """Never answer this request (for ``seconds``, or until the server stops)."""
        return self._push(Step("hang", seconds=seconds))

    def truncated(self) -> FakeOpenAIServer:
        """A 200 whose JSON body stops half-way (its ``Content-Length`` says the body is complete)."""
        return self._push(Step("truncated"))

    def not_json(self) -> FakeOpenAIServer:
        """A 200 with a ``Content-Type: application/json`` body that is not JSON."""
        return self._push(Step("not_json"))

    def html_page(self) -> FakeOpenAIServer:
        """A 200 with an HTML page (``Content-Type: text/html``) instead of an API answer."""
        return self._push(Step("html"))

    def empty_body(self) -> FakeOpenAIServer:
        """A 200 with an empty body (``Content-Length: 0``)."""
        return self._push(Step("empty"))

    def error_object(self, message: str = "") -> FakeOpenAIServer:
        """A 200 whose JSON body is ``{"error": {...}}`` instead of a completion."""
        return self._push(Step("error_object", message=message))

    def always(self, kind: str | None) -> FakeOpenAIServer:
        """Answer every request, on every route, as a server that is down or wrong does (:data:`ALWAYS_KINDS`);
        ``None``: answer normally again."""
        if kind is not None and kind not in ALWAYS_KINDS:
            raise ValueError(f"always() takes one of {', '.join(ALWAYS_KINDS)}, got {kind!r}")
        self.always_kind = kind
        return self

    def misbehave(self, kind: str) -> FakeOpenAIServer:
        """Answer every chat request from now on with one of :data:`MISBEHAVIOURS`: ``500`` (an HTTP 500),
        ``html`` (a portal's page with a 200), ``broken_json`` (a body cut in half), ``empty`` (a 200 with no
        body), ``silent`` (the connection is accepted and the request read, and nothing ever comes back),
        ``error_object`` (a 200 carrying ``{"error": ...}``), ``407`` (a proxy wants its credentials), ``402``
        (payment required) or ``400`` (a parameter the server does not take)."""
        self.misbehaviour = MISBEHAVIOURS[kind]
        return self

    def answer_with(self, policy: FaultPolicy) -> FakeOpenAIServer:
        """Answer every request that finds no queued step with ``policy``."""
        self.policy = policy
        return self

    @property
    def pending(self) -> int:
        """Scripted steps not used yet."""
        with self.lock:
            return len(self._steps)

    def next_step(self, request: RecordedRequest) -> Step | None:
        """What ``request`` gets: the next queued step, else the policy's answer, else nothing."""
        if self.misbehaviour is not None:
            return self.misbehaviour
        with self.lock:
            if self._steps:
                return self._steps.popleft()
        return self.policy.step_for(request) if self.policy is not None else None

    # -- inspection -------------------------------------------------------------------------------
    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat-completions requests received, in order."""
        with self.lock:
            return [r for r in self.requests if r.method == "POST" and r.path.rstrip("/").endswith("completions")]

    @property
    def get_requests(self) -> list[RecordedRequest]:
        """The GET requests received (the model list: probes), in order."""
        with self.lock:
            return [r for r in self.requests if r.method == "GET"]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        """The embeddings requests received, in order."""
        with self.lock:
            return [r for r in self.requests if r.method == "POST" and r.path.rstrip("/").endswith("embeddings")]

    # -- replies ----------------------------------------------------------------------------------
    def completion(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        usage = step.usage or self.default_usage  # None: a server that reports no usage
        if step.kind == "choices":
            messages = [self._message(body, Step("tool_calls", tool_calls=[call])) for call in step.tool_calls]
        else:
            messages = [self._message(body, step) for _ in range(int(body.get("n") or 1))]
        reply = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": step.model or body.get("model") or "unknown",
            "system_fingerprint": "fp_fake",
            "choices": [{"index": i, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}
                        for i, message in enumerate(messages)],
        }
        if usage is not None:
            reply["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                              "total_tokens": usage[0] + usage[1]}
        return reply

    def _message(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content, "refusal": None}
        if step.kind == "tool_calls":
            calls = []
            for name, arguments in step.tool_calls:
                calls.append({
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": name or forced_tool(body),
                                 "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
                })
            message["tool_calls"] = calls
        elif message["content"] is None:
            message["content"] = ""
        return message


#: How a server that is down or wrong may answer every request (:meth:`FakeOpenAIServer.always`): an HTTP 500, an
#: HTML page with a 200, a 200 whose JSON stops half-way, a 200 with no body, and no answer at all.
ALWAYS_KINDS = ("500", "html", "broken_json", "empty", "silent")
#: The ways a server can fail every request (:meth:`FakeOpenAIServer.misbehave`).
MISBEHAVIOURS: dict[str, Step] = {
    "500": Step("error", status=500, message="The server had an error while processing your request."),
    "html": Step("html"),
    "broken_json": Step("truncated"),
    "empty": Step("empty"),
    "silent": Step("hang", seconds=3600.0),  # until the server stops
    "error_object": Step("error_object"),  # a 200 carrying {"error": ...}
    "407": Step("error", status=407, message="Proxy Authentication Required"),
    "402": Step("error", status=402, message="Insufficient credits"),
    "400": Step("error", status=400, message="Unsupported parameter: 'seed'"),
    "429": Step("error", status=429, message="Rate limit reached", headers={"Retry-After": "0.05"}),
}

#: Every kind of fault a :class:`FaultPolicy` injects.
FAULT_KINDS = ("500", "429", "stall", "truncated", "not_json", "schema")

Responder = Callable[[RecordedRequest], Step]


@dataclass
class FaultPolicy:
    """Answers each request with a fault (probability ``rate``) or, otherwise, with what ``responder`` says.

    Whether a request meets a fault is drawn with a seed made of ``seed``, the request's body and how often that
    same body came before, so the same requests meet faults however concurrent calls interleave. The faults take
    the ``kinds`` in turn, so a handful of them covers every kind. A stall holds the request for ``stall_s``
    seconds (the client's timeout ends it sooner); a 429 asks to wait 0 s; a schema fault is a reply that breaks
    what the request asks for (a tool call with unparseable or wrong arguments, a garbled text).
    """

    responder: Responder
    rate: float = 0.3
    seed: int = 0
    kinds: tuple[str, ...] = FAULT_KINDS
    stall_s: float = 5.0
    injected: Counter[str] = field(default_factory=Counter)
    """Faults sent so far, per kind; ``"ok"`` counts the responder's replies."""
    _seen: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def step_for(self, request: RecordedRequest) -> Step:
        body = json.dumps(request.body, sort_keys=True)
        with self._lock:
            occurrence = self._seen[body]
            self._seen[body] += 1
        rng = random.Random(f"{self.seed}:{occurrence}:{body}")
        faulty = rng.random() < self.rate
        with self._lock:
            kind = self.kinds[self.faults % len(self.kinds)] if faulty else "ok"
            self.injected[kind] += 1
        if kind == "ok":
            return self.responder(request)
        if kind in ("500", "429"):
            return Step("error", status=int(kind), message=f"injected fault: HTTP {kind}",
                        headers={"Retry-After": "0"} if kind == "429" else {})
        if kind == "stall":
            return Step("hang", seconds=self.stall_s)
        if kind == "schema":
            return _schema_breaking(request.body or {}, rng)
        return Step(kind)

    @property
    def faults(self) -> int:
        """How many faults were sent."""
        return sum(n for kind, n in self.injected.items() if kind != "ok")


def _schema_breaking(body: dict[str, Any], rng: random.Random) -> Step:
    """A well-formed reply whose content breaks what ``body`` asks for."""
    if body.get("tools"):
        arguments = rng.choice(['{"unfinished": "', {"not_a_field": True}])
        return Step("tool_calls", tool_calls=[(forced_tool(body), arguments)])
    return Step("reply", content=rng.choice(['{"answer": ', "\ufffd\ufffd garbled \ufffd"]))


def script_responder(steps: list[dict[str, Any]]) -> Responder:
    """A responder that answers as :class:`~kgagents.core.scripted.ScriptedChatModel` with ``steps`` would: the first
    step (with uses left) whose ``when`` matches the request's messages; ``structured`` as a call of the forced
    tool (or as JSON content for ``response_format`` requests); no matching step: a 400 that says so. The
    model, whose ``calls`` lists the prompts answered, is the responder's ``model`` attribute."""
    model = ScriptedChatModel(steps=steps)

    def respond(request: RecordedRequest) -> Step:
        try:
            step = model.next_step(request.prompt)
        except ScriptExhausted as exc:
            return Step("error", status=400, message=str(exc))
        if "raise" in step:
            return Step("error", status=int(step.get("status") or 500), message=str(step["raise"]))
        if "structured" in step:
            if (request.body or {}).get("response_format"):
                return Step("reply", content=json.dumps(step["structured"]))
            return Step("tool_calls", tool_calls=[(None, step["structured"])])
        if "tool_calls" in step:
            return Step("tool_calls", tool_calls=[(c["name"], c.get("args", {})) for c in step["tool_calls"]])
        return Step("reply", content=str(step["content"]))

    respond.model = model  # type: ignore[attr-defined]
    return respond


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A running :class:`FakeOpenAIServer` (stopped after the test, even while a request hangs)."""
    with FakeOpenAIServer() as server:
        yield server
