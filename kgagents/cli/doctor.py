"""``kgagents doctor``: what this machine and configuration can run, checked without running a workflow.

    kgagents doctor [--workflow NAME ...] [--model provider:model] [--base-url URL] [--preset NAME]
                    [--set KEY=VALUE ...] [--timeout S] [--call-timeout S]

For every distinct chat model of the roles of the four papers' workflows (or of the ``--workflow`` ones) — roles
that share a model, an endpoint and a key are asked once — it first asks the endpoint for its model list (a
refused address, an unknown host, a rejected key or an unlisted model show within ``--timeout`` seconds), then
sends one tiny real completion through the same chat model a run builds (:func:`kgagents.nodes.models.resolve_model`)
and reports its latency. A completion that fails is named by its kind (:class:`kgagents.core.failures.FailureKind`:
a server error, an answer that is not an API response — an HTML page, broken JSON, an empty body —, a timeout...)
and retried at most once. Each embedding model the workflows' settings name (``--preset``, ``--set
embedding_model=...``) embeds one text the same way: OpenAI's (or an OpenAI-compatible server's) embeddings
endpoint, or a local sentence-transformers model loaded here. It also reads the tools' keys (web search without
``SERPAPI_API_KEY``), reaches the graph servers the environment names (``NEO4J_URI``, ``FALKORDB_URL``,
``SPARQL_ENDPOINT``, ``CRAG_SERVER``), probes the sandbox, and lists the extras that are not installed; for each
missing piece it says what it disables. With no model configured it says what to set, with examples. The exit
status is 1 when a model or an embedding model cannot be used, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlparse

from kgagents.core.config import ConfigurationError, configuration_line, get_settings
from kgagents.core.endpoints import describe_model, model_endpoint, model_key
from kgagents.core.failures import FailureKind, classify
from kgagents.core.redact import configured_secrets, without_credentials, without_secrets

#: What a tool that cannot be used takes away from a run.
TOOL_USES = {
    "ask_search_agent": "web research (KGoT's search agent: search engine, pages, Wikipedia, archived pages)",
    "run_python_code": "KGoT's Python tool",
    "inspect_file_as_text": "questions about attached files",
    "image_inspector": "questions about attached images",
    "extract_zip": "attached zip archives",
    "llm_query": "KGoT's LLM tool",
}

#: Graph and API servers the environment may name, and what needs each.
SERVERS = [("NEO4J_URI", "the neo4j backend (else: the embedded ArcadeDB server, `arcadedb` extra)"),
           ("FALKORDB_URL", "the falkordb backend (else: the embedded FalkorDB server, `falkordb` extra)"),
           ("SPARQL_ENDPOINT", "the sparql backend (else: the embedded Oxigraph store, `sparql` extra)"),
           ("CRAG_SERVER", "Agent-G's graph module on CRAG (CRAG's mock KG API)")]


#: The workflows whose roles ``doctor`` checks by default: the four papers' (their baselines share these roles).
DOCTOR_WORKFLOWS = ("kgot", "ark", "grounded", "agent-g")

DEFAULT_PORTS = {"bolt": 7687, "neo4j": 7687, "redis": 6379, "rediss": 6379, "https": 443}

#: What the completion asks: the smallest request every chat model answers.
PROBE_PROMPT = "Reply with OK."
#: What an embedding model embeds.
PROBE_TEXT = "knowledge graph"

#: The seconds to reach an endpoint (its model list, a graph server) and that one completion may take. The
#: completion's limit is below a run's (``llm_timeout_s``, 120 s by default) so that a server that hangs costs half
#: a minute here; a model that is reachable but slower is reported as slow, with the run's limit to try.
CONNECT_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 30.0
#: A run's own limit of one call (the workflows' ``llm_timeout_s`` default), for the doctor's advice.
RUN_CALL_TIMEOUT_S = 120.0

#: Failure kinds after which the probe is sent once more (a dropped or garbled answer may be a one-off); any other
#: kind is reported at once, so a server that is down costs one or two requests, never minutes.
RETRIED_ONCE = (FailureKind.SERVER, FailureKind.MALFORMED)
#: Failure kinds that still show a usable endpoint: it is there, takes the key and knows the model.
USABLE = (FailureKind.RATE_LIMIT, FailureKind.REFUSAL)

#: What each failure kind means for the endpoint, and what to check.
KIND_HINTS = {
    FailureKind.CONNECT: "nothing accepts connections there: is the server running, and the port right?",
    FailureKind.DNS: "the host name does not resolve: a typo in the URL?",
    FailureKind.AUTH: "the key is rejected: check the key variable of this server (KGAGENTS_API_KEY, "
                      "OPENAI_API_KEY, ANTHROPIC_API_KEY)",
    FailureKind.NOT_FOUND: "the model or the API path is unknown there: check the model name, and that an "
                           "OpenAI-compatible URL ends in /v1",
    FailureKind.QUOTA: "the account's quota or credit is used up",
    FailureKind.SERVER: "the server fails even a tiny request: it is down or misconfigured (its log says why)",
    FailureKind.TIMEOUT: "nothing came back in time: the server is stuck, overloaded, or the address is wrong",
    FailureKind.MALFORMED: "the answer is not an API response (a proxy's or portal's page, a web UI's address "
                           "instead of its API, a server that breaks off its answer)",
    FailureKind.BAD_REQUEST: "the server refuses the request itself: a server that does not speak this API?",
    FailureKind.REDIRECT: "the server sends the request elsewhere, which kgagents never follows (a prompt would go "
                          "to a host nobody configured): set the base URL to the final address",
}


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report (``more``: lines printed under it, indented)."""

    name: str
    ok: bool
    detail: str
    disables: str = ""
    more: str = ""

    def line(self) -> str:
        mark = "ok     " if self.ok else "MISSING"
        tail = f" — without it: no {self.disables}" if not self.ok and self.disables else ""
        text = f"{mark}  {self.name:22} {self.detail}{tail}"
        if self.more:
            text += "".join(f"\n         {row}" if row else "\n" for row in self.more.splitlines())
        return text


@dataclass(frozen=True)
class Probe:
    """What one request to a model told: usable or not, in words."""

    ok: bool
    detail: str


def add_commands(sub: Any, command: Callable[[str], Callable[[Any], Any]]) -> None:
    """Add ``doctor`` to the ``kgagents`` parser."""
    doc = sub.add_parser("doctor", help="check the models (one real completion each), embedding models, tools' "
                                        "keys, graph servers, sandbox and extras")
    doc.add_argument("--workflow", nargs="+", metavar="NAME",
                     help=f"check the roles of these workflows (default: {', '.join(DOCTOR_WORKFLOWS)})")
    doc.add_argument("--model", help="provider:model for every role (default: KGAGENTS_MODEL)")
    doc.add_argument("--base-url", help="an OpenAI-compatible server for the model")
    doc.add_argument("--preset", help="check a workflow's named settings (e.g. agent-g: paper-crag, whose "
                                      "embedding model is then loaded), for the workflows that have it")
    doc.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="a setting of the workflows' context (e.g. embedding_model=openai:text-embedding-3-small),"
                          " for the workflows that have it")
    doc.add_argument("--timeout", type=float, default=CONNECT_TIMEOUT_S,
                     help=f"seconds to reach each endpoint and graph server (default {CONNECT_TIMEOUT_S:g})")
    doc.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT_S,
                     help=f"seconds one test completion or embedding may take (default {CALL_TIMEOUT_S:g}: less "
                          f"than a run's per-call limit, llm_timeout_s, {RUN_CALL_TIMEOUT_S:g} s by default, so that "
                          "a server that hangs costs seconds here; a reachable model slower than this is reported "
                          "as slow, not as down)")
    command("doctor")(cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print which configuration and data home are in use, then one line per check; 1 when a model or an
    embedding model cannot be used."""
    print(without_secrets(configuration_line(), configured_secrets(os.environ)))
    workflows = tuple(args.workflow or DOCTOR_WORKFLOWS)
    values = {k: v for k, v in (("model", args.model), ("base_url", args.base_url)) if v}
    per_workflow = workflow_values(workflows, values, preset=args.preset, settings=args.set or [])
    call_timeout = getattr(args, "call_timeout", CALL_TIMEOUT_S)
    models = model_checks(per_workflow, args.timeout, call_timeout=call_timeout)
    embedders = embedder_checks(per_workflow, call_timeout)
    checks = [*models, *embedders, *tool_checks(), sandbox_check(), *server_checks(args.timeout),
              *extra_checks()]
    # A server may echo a key back in its error text: no key doctor sent, or the environment holds, is printed.
    secrets = configured_secrets(os.environ) | sent_keys()
    for check in checks:
        print(without_secrets(check.line(), secrets))
    return 0 if all(check.ok for check in [*models, *embedders]) else 1


def workflow_values(workflows: tuple[str, ...], values: dict[str, Any], *, preset: str | None = None,
                    settings: list[str] | tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The context values ``doctor`` checks each workflow with: ``values`` (the model and URL), the workflow's
    ``preset`` and the ``KEY=VALUE`` ``settings`` that its context has. A preset none of the workflows has, or a
    setting none of their contexts has, is a ``ValueError`` that says so."""
    from kgagents.cli.common import parse_settings
    from kgagents.graphs.registry import get

    given = parse_settings(settings)
    out: dict[str, dict[str, Any]] = {}
    used_preset, used_keys = False, set[str]()
    for workflow in workflows:
        spec = get(workflow)
        own: dict[str, Any] = {}
        if preset and preset in spec.presets:
            own, used_preset = spec.preset(preset), True
        names = {field.name for field in fields(spec.context)}
        chosen = {key: value for key, value in given.items() if key in names}
        used_keys |= chosen.keys()
        out[workflow] = {**own, **chosen, **values}
    if preset and not used_preset:
        raise ValueError(f"none of the workflows checked ({', '.join(workflows)}) has a preset {preset!r}")
    unknown = sorted(given.keys() - used_keys)
    if unknown:
        raise ValueError(f"--set {unknown[0]}: no setting of that name in the workflows checked "
                         f"({', '.join(workflows)})")
    return out


def model_checks(per_workflow: dict[str, dict[str, Any]], timeout: float, *,
                 call_timeout: float = CALL_TIMEOUT_S) -> list[Check]:
    """One check per distinct model of the roles of the workflows (``per_workflow``: their context values): does
    it answer a completion, and how fast? A check names the roles that use the model, and what a failing one
    stops; roles that share a model, an endpoint and a key share one completion."""
    from kgagents.cli.preflight import role_models

    workflows = tuple(per_workflow)
    models: dict[str, Any] = {}
    users: dict[str, list[str]] = {}  # role -> the workflows that have it
    unconfigured: dict[str, list[str]] = {}  # a configuration error's text -> the workflows it stops
    for workflow, values in per_workflow.items():
        try:
            found = role_models({**values, "llm_timeout_s": call_timeout}, workflow)
        except ConfigurationError as exc:
            unconfigured.setdefault(str(exc), []).append(workflow)
            continue
        for role, model in found.items():
            models.setdefault(role, model)
            users.setdefault(role, []).append(workflow)
    checks = [configuration_check(message, stopped, workflows) for message, stopped in unconfigured.items()]
    roles: dict[str, list[str]] = {}
    by_key: dict[str, Any] = {}
    for role, model in models.items():
        roles.setdefault(endpoint_identity(model), []).append(role)
        by_key.setdefault(endpoint_identity(model), model)
    probes = asyncio.run(_gather([probe_model(model, timeout, call_timeout) for model in by_key.values()]))
    for (key, model), probe in zip(by_key.items(), probes, strict=True):
        who = "every role" if len(roles[key]) == len(models) and not checks else ", ".join(roles[key])
        stopped = sorted({w for role in roles[key] for w in users[role]}, key=workflows.index)
        checks.append(Check(f"model ({who})", probe.ok, f"{describe_model(model)}: {probe.detail}",
                            _stops(stopped, workflows)))
    return checks


def configuration_check(message: str, stopped: list[str], workflows: tuple[str, ...]) -> Check:
    """The check of workflows whose models cannot even be built: the message's first line, and the rest of it
    (what to set, with examples) under it."""
    first, _, rest = message.partition("\n")
    name = "model" if len(stopped) == len(workflows) else f"model ({', '.join(stopped)})"
    return Check(name, False, first, _stops(stopped, workflows), more=rest.strip("\n"))


def _stops(stopped: list[str], workflows: tuple[str, ...]) -> str:
    return "run of any workflow" if len(stopped) == len(workflows) > 1 else f"run of {', '.join(stopped)}"


async def _gather(probes: list[Awaitable[Probe]]) -> list[Probe]:
    return list(await asyncio.gather(*probes))


#: The keys of the models doctor asked (each sent in a request), masked in every line it prints.
_sent: set[str] = set()


def sent_keys() -> set[str]:
    """The keys doctor has sent to a model's server in this process."""
    return set(_sent)


def endpoint_identity(model: Any) -> str:
    """What makes two roles' models one for the doctor: the model, its endpoint, and (a digest of) its key."""
    digest = hashlib.sha256(_secret(_api_key_of(model)).encode()).hexdigest()[:12]
    return f"{model_key(model)} {digest}"


def _api_key_of(model: Any) -> Any:
    for attr in ("openai_api_key", "anthropic_api_key", "api_key"):
        value = getattr(model, attr, None)
        if value:
            return value
    return None


async def probe_model(model: Any, timeout: float, call_timeout: float) -> Probe:
    """Reach the model's endpoint (its model list, within ``timeout`` seconds), then ask it one tiny completion
    (within ``call_timeout`` seconds) through the model itself."""
    if model_endpoint(model) is None:
        return Probe(True, "in process (nothing to reach)")
    key = _secret(_api_key_of(model))
    if key:
        _sent.add(key)
    unusable = await reach_endpoint(model, timeout)
    if unusable is not None:
        return Probe(unusable.ok, without_secrets(unusable.detail, {key}))
    probe = await complete_once(model, call_timeout)
    return Probe(probe.ok, without_secrets(probe.detail, {key}))


async def complete_once(model: Any, call_timeout: float) -> Probe:
    """One completion of :data:`PROBE_PROMPT`, sent again once after a failure of :data:`RETRIED_ONCE`."""
    from langchain_core.messages import HumanMessage

    async def ask() -> None:
        async with asyncio.timeout(call_timeout):
            await model.ainvoke([HumanMessage(PROBE_PROMPT)])

    return await timed(ask, "answers a completion", call_timeout, reached=True)


async def timed(call: Callable[[], Awaitable[Any]], success: str, call_timeout: float, *,
                reached: bool = False) -> Probe:
    """Run ``call`` (once more after a failure of :data:`RETRIED_ONCE`): its latency, or its failure's kind."""
    failure: BaseException | None = None
    kind = FailureKind.OTHER
    for attempt in range(2):
        started = time.monotonic()
        try:
            await call()
        except Exception as exc:  # noqa: BLE001 - every failure is reported, by its kind
            failure, kind = exc, classify(exc)
            if kind not in RETRIED_ONCE or attempt:
                break
            continue
        return Probe(True, f"{success} in {time.monotonic() - started:.2f} s")
    assert failure is not None
    return failure_probe(kind, failure, call_timeout, twice=kind in RETRIED_ONCE, reached=reached)


def failure_probe(kind: FailureKind, exc: BaseException, seconds: float, *, twice: bool = False,
                  reached: bool = False) -> Probe:
    """A failure in words: its kind first, what the server said, and what the kind means (``reached``: the
    endpoint answered its model list before, so a timeout is a slow answer, not an unreachable server)."""
    from kgagents.core.retry import redirect_advice
    if kind is FailureKind.TIMEOUT and reached:
        return Probe(False, slow_model(seconds))
    if kind is FailureKind.REDIRECT:
        return Probe(False, f"{kind.value} — {redirect_advice(exc) or KIND_HINTS[kind]}")
    if kind is FailureKind.TIMEOUT:
        said = f"no answer within {seconds:g} s"
    else:
        said = " ".join(str(exc).split())[:160] or type(exc).__name__
        said = f"{type(exc).__name__}: {said}" if type(exc).__name__ not in said else said
    if twice:
        said += " (twice)"
    if kind in USABLE:
        return Probe(True, f"answers, but {kind.value} now ({said})")
    hint = KIND_HINTS.get(kind)
    return Probe(False, f"{kind.value} — {said}" + (f"; {hint}" if hint else ""))


def slow_model(seconds: float) -> str:
    """What a completion that timed out at a server that answered its model list means."""
    advice = (f"a run waits up to llm_timeout_s ({RUN_CALL_TIMEOUT_S:g} s by default) per call: check again with "
              f"--call-timeout {RUN_CALL_TIMEOUT_S:g}" if seconds < RUN_CALL_TIMEOUT_S
              else "a run's calls would time out too: raise llm_timeout_s, or check the server's log")
    return (f"{FailureKind.TIMEOUT.value} — the server is reachable (it answered the model list) but did not "
            f"answer a completion within {seconds:g} s: a slow model, or a server that hangs on completions; "
            f"{advice}")


async def reach_endpoint(model: Any, timeout: float) -> Probe | None:
    """Ask the model's endpoint for its models (the cheapest authenticated request of each API): a failure that
    the completion would only repeat more slowly (unreachable, silent, a rejected key, an unlisted model), else
    None."""
    import httpx
    url, headers = model_list_request(model)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            reply = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        kind = classify(exc)
        if kind in (FailureKind.CONNECT, FailureKind.DNS, FailureKind.TIMEOUT):
            return failure_probe(kind, exc, timeout)
        return None  # anything else: the completion says more
    if reply.is_redirect:  # followed by no client of a run: the completion would fail the same way
        target = reply.next_request.url if reply.next_request is not None else reply.headers.get("location")
        return Probe(False, f"{FailureKind.REDIRECT.value} — {reply.status_code} for its model list, to "
                            f"{without_credentials(str(target))}; {KIND_HINTS[FailureKind.REDIRECT]}")
    if reply.status_code in (401, 403):
        return Probe(False, f"{FailureKind.AUTH.value} — {reply.status_code} for its model list; "
                            f"{KIND_HINTS[FailureKind.AUTH]}")
    listed = _listed_models(reply) if reply.status_code < 400 else set()
    label = getattr(model, "model_name", None) or getattr(model, "model", None)
    if listed and label and label not in listed:
        return Probe(False, f"{FailureKind.NOT_FOUND.value} — the server does not list the model {label!r} "
                            f"(it lists {', '.join(sorted(listed)[:5])})")
    return None


def model_list_request(model: Any) -> tuple[str, dict[str, str]]:
    """The URL and headers of the model list of the model's API (Anthropic's, Ollama's, else OpenAI's)."""
    base = (model_endpoint(model) or "").rstrip("/")
    name = type(model).__name__
    if "Anthropic" in name:
        return f"{base}/v1/models", {"x-api-key": _secret(getattr(model, "anthropic_api_key", None)),
                                     "anthropic-version": "2023-06-01"}
    if "Ollama" in name:
        return f"{base}/api/tags", {}
    key = _secret(getattr(model, "openai_api_key", None))
    return f"{base}/models", {"Authorization": f"Bearer {key}"} if key else {}


def _secret(value: Any) -> str:
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if callable(getter) else value or "")


def _listed_models(reply: Any) -> set[str]:
    try:
        data = reply.json()
    except ValueError:
        return set()
    items = (data.get("data") or data.get("models") or []) if isinstance(data, dict) else []
    return {str(m.get("id") or m.get("name") or m.get("model")) for m in items if isinstance(m, dict)}


#: The context settings that name an embedding model.
EMBEDDING_SETTINGS = ("embedding_model", "linking_model")


def configured_embedders(per_workflow: dict[str, dict[str, Any]]) -> dict[tuple[str, str | None, str | None],
                                                                          list[str]]:
    """The embedding models the workflows' settings name (``embedding_model``, ``linking_model``), as
    (model, device, base URL) -> the ``workflow's setting`` that name it. The packaged all-MiniLM-L6-v2 that a
    workflow uses when none is named ships with kgagents and is not loaded."""
    from kgagents.graphs.registry import get

    found: dict[tuple[str, str | None, str | None], list[str]] = {}
    for workflow, values in per_workflow.items():
        ctx = get(workflow).make_context(values)
        for setting in EMBEDDING_SETTINGS:
            model = getattr(ctx, setting, None)
            if isinstance(model, str) and model:
                key = (model, getattr(ctx, "embedding_device", None), getattr(ctx, "embedding_base_url", None))
                found.setdefault(key, []).append(f"{workflow}'s {setting}")
    return found


def embedder_checks(per_workflow: dict[str, dict[str, Any]], call_timeout: float = CALL_TIMEOUT_S) -> list[Check]:
    """One check per embedding model the workflows name: it embeds one text (an OpenAI embeddings request, or a
    local model loaded here), how fast, or the failure's kind."""
    checks = []
    for (model, device, base_url), users in configured_embedders(per_workflow).items():
        label, probe = asyncio.run(probe_embedder(model, device, base_url, call_timeout))
        runs = sorted({user.split("'s ")[0] for user in users}, key=list(per_workflow).index)
        checks.append(Check(f"embedder ({', '.join(users)})", probe.ok, f"{label}: {probe.detail}",
                            f"run of {', '.join(runs)} with it"))
    return checks


async def probe_embedder(model: str, device: str | None, base_url: str | None,
                         call_timeout: float) -> tuple[str, Probe]:
    """Embed :data:`PROBE_TEXT` with the embedder a run builds for these settings
    (:func:`~kgagents.tools.pgraph.embeddings.embedder_spec`): its label (where it is) and what it told."""
    from kgagents.tools.pgraph.embeddings import EmbedderUnavailable, OpenAIEmbedder, embedder_spec, load_embedder

    embedder = embedder_spec(model, device, base_url)
    if isinstance(embedder, OpenAIEmbedder):
        # one request per probe, within the call's limit: timed() sends it once more, no more
        embedder.max_retries, embedder.timeout = 0, call_timeout
        endpoint = str(embedder._openai().base_url).rstrip("/")  # the client the run would build
        return f"{model} at {endpoint}", await timed(
            lambda: asyncio.to_thread(embedder.encode, [PROBE_TEXT]), "embeds a text", call_timeout)
    started = time.monotonic()
    try:
        loaded = await asyncio.to_thread(load_embedder, model, device=device)
    except (EmbedderUnavailable, RuntimeError, OSError) as exc:
        return model, Probe(False, f"cannot be loaded here — {exc}")
    try:
        vector = await asyncio.to_thread(loaded.encode, [PROBE_TEXT])
    except Exception as exc:  # noqa: BLE001 - a model that loads but cannot embed is reported, not raised
        return model, Probe(False, f"loads but cannot embed — {type(exc).__name__}: {exc}")
    return model, Probe(True, f"loads and embeds a text in {time.monotonic() - started:.2f} s "
                              f"(dimension {vector.shape[1]})")


def tool_checks() -> list[Check]:
    """The tools' own conditions (keys, extras)."""
    # the KGoT graph registers the tools
    # that live next to the workflows
    import kgagents.graphs.kgot  # noqa: F401
    from kgagents.tools.manager import tool_statuses

    return [Check(f"tool {s.name}", s.available, s.reason, TOOL_USES.get(s.name, ""))
            for s in tool_statuses()]


def sandbox_check() -> Check:
    """Whether LLM-written code runs isolated (bubblewrap), with weak isolation, or not at all."""
    from kgagents.tools.sandbox import isolation_status

    kind, detail = isolation_status()
    if kind == "bwrap":
        return Check("sandbox", True, detail)
    if get_settings().allow_weak_sandbox:
        return Check("sandbox", True, f"weak isolation (KGAGENTS_ALLOW_WEAK_SANDBOX=1): {detail}")
    return Check("sandbox", False, detail, "Python tool and no embedded (NetworkX) KG for KGoT")


def server_checks(timeout: float) -> list[Check]:
    """The servers the environment names: can they be reached?"""
    checks = []
    for variable, needed_by in SERVERS:
        url = os.environ.get(variable, "").strip()
        if not url:
            continue
        parsed = urlparse(url)
        port = parsed.port or DEFAULT_PORTS.get(parsed.scheme, 80)
        try:
            with socket.create_connection((parsed.hostname or "127.0.0.1", port), timeout=timeout):
                checks.append(Check(variable, True, f"{url} accepts connections"))
        except OSError as exc:
            checks.append(Check(variable, False, f"{url} cannot be reached ({exc})", needed_by))
    return checks


def extra_checks() -> list[Check]:
    """The extras that are not installed, and what each would enable."""
    from kgagents.core.extras import install_hint, missing_extras
    return [Check(f"extra {extra.name}", False, f"not installed ({install_hint(extra.name)})",
                  extra.enables) for extra in missing_extras()]

