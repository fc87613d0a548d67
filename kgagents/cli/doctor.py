"""``kgagents doctor``: what this machine and configuration can run, checked without running a workflow.

    kgagents doctor [--workflow NAME ...] [--model provider:model] [--base-url URL] [--timeout S]

It asks the model endpoint of every role of the four papers' workflows (or of the ``--workflow`` ones) for its
model list (a rejected key, an address that refuses or a host
that does not resolve show here, not in a run), reads the tools' keys (web search without
``SERPAPI_API_KEY``), reaches the graph servers the environment names (``NEO4J_URI``, ``FALKORDB_URL``,
``SPARQL_ENDPOINT``, ``CRAG_SERVER``), probes the sandbox, and lists the extras that are not installed; for
each missing piece it says what it disables. The exit status is 1 when a model cannot be used, else 0.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx

from kgagents.core.config import ConfigurationError, configuration_line, get_settings
from kgagents.core.endpoints import describe_model, model_endpoint, model_key
from kgagents.core.extras import install_hint, missing_extras
from kgagents.core.retry import is_unreachable

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


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    ok: bool
    detail: str
    disables: str = ""

    def line(self) -> str:
        mark = "ok     " if self.ok else "MISSING"
        tail = f" — without it: no {self.disables}" if not self.ok and self.disables else ""
        return f"{mark}  {self.name:22} {self.detail}{tail}"


def add_commands(sub: Any, command: Callable[[str], Callable[[Any], Any]]) -> None:
    """Add ``doctor`` to the ``kgagents`` parser."""
    doc = sub.add_parser("doctor", help="check the models, tools' keys, graph servers, sandbox and extras")
    doc.add_argument("--workflow", nargs="+", metavar="NAME",
                     help=f"check the roles of these workflows (default: {', '.join(DOCTOR_WORKFLOWS)})")
    doc.add_argument("--model", help="provider:model for every role (default: KGAGENTS_MODEL)")
    doc.add_argument("--base-url", help="an OpenAI-compatible server for the model")
    doc.add_argument("--timeout", type=float, default=5.0, help="seconds per endpoint (default 5)")
    command("doctor")(cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print which configuration and data home are in use, then one line per check; 1 when a model cannot be
    used."""
    print(configuration_line())
    values = {k: v for k, v in (("model", args.model), ("base_url", args.base_url)) if v}
    models = model_checks(values, args.timeout, tuple(args.workflow or DOCTOR_WORKFLOWS))
    checks = [*models, *tool_checks(), sandbox_check(), *server_checks(args.timeout), *extra_checks()]
    for check in checks:
        print(check.line())
    return 0 if all(check.ok for check in models) else 1


def model_checks(values: dict[str, Any], timeout: float, workflows: tuple[str, ...] = DOCTOR_WORKFLOWS
                 ) -> list[Check]:
    """One check per distinct model of the roles of ``workflows``: does its endpoint answer, take the key, know
    the model? A check names the roles that use the model, and what a failing one stops."""
    # loaded by the command that needs it (every command starts without it)
    from kgagents.cli.preflight import role_models

    models: dict[str, Any] = {}
    users: dict[str, list[str]] = {}  # role -> the workflows that have it
    checks = []
    for workflow in workflows:
        try:
            found = role_models(values, workflow)
        except ConfigurationError as exc:
            checks.append(Check(f"model ({workflow})", False, str(exc).splitlines()[0], f"run of {workflow}"))
            continue
        for role, model in found.items():
            models.setdefault(role, model)
            users.setdefault(role, []).append(workflow)
    roles: dict[str, list[str]] = {}
    by_key: dict[str, Any] = {}
    for role, model in models.items():
        roles.setdefault(model_key(model), []).append(role)
        by_key.setdefault(model_key(model), model)
    for key, model in by_key.items():
        ok, detail = probe_model(model, timeout)
        who = "every role" if len(roles[key]) == len(models) and not checks else ", ".join(roles[key])
        stopped = sorted({w for role in roles[key] for w in users[role]}, key=workflows.index)
        disables = "run of any workflow" if len(stopped) == len(workflows) else f"run of {', '.join(stopped)}"
        checks.append(Check(f"model ({who})", ok, f"{describe_model(model)}: {detail}", disables))
    return checks


def probe_model(model: Any, timeout: float) -> tuple[bool, str]:
    """Ask the model's endpoint for its models (the cheapest authenticated request of each API)."""
    endpoint = model_endpoint(model)
    if endpoint is None:
        return True, "in process (nothing to reach)"
    base = endpoint.rstrip("/")
    name = type(model).__name__
    headers: dict[str, str] = {}
    if "Anthropic" in name:
        url = f"{base}/v1/models"
        headers = {"x-api-key": _secret(getattr(model, "anthropic_api_key", None)),
                   "anthropic-version": "2023-06-01"}
    elif "Ollama" in name:
        url = f"{base}/api/tags"
    else:
        url = f"{base}/models"
        key = _secret(getattr(model, "openai_api_key", None))
        if key:
            headers = {"Authorization": f"Bearer {key}"}
    try:
        reply = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        if is_unreachable(exc):
            return False, f"cannot be reached ({type(exc).__name__}: {exc})"
        return False, f"no answer ({type(exc).__name__}: {exc})"
    if reply.status_code in (401, 403):
        return False, f"rejects the key ({reply.status_code})"
    if reply.status_code >= 400:
        return True, f"answers ({reply.status_code} for its model list; a chat call will tell more)"
    listed = _listed_models(reply)
    label = getattr(model, "model_name", None) or getattr(model, "model", None)
    if listed and label and label not in listed:
        return False, (f"answers, but does not list the model {label!r} "
                       f"(it lists {', '.join(sorted(listed)[:5])})")
    return True, "answers" + (f" and lists {label}" if listed and label else "")


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


def tool_checks() -> list[Check]:
    """The tools' own conditions (keys, extras)."""
    # loaded by the command that needs it (every command starts without it); the KGoT graph registers the tools
    # that live next to the workflows
    import kgagents.graphs.kgot  # noqa: F401
    from kgagents.tools.manager import tool_statuses  # loaded by the command that needs it

    return [Check(f"tool {s.name}", s.available, s.reason, TOOL_USES.get(s.name, ""))
            for s in tool_statuses()]


def sandbox_check() -> Check:
    """Whether LLM-written code runs isolated (bubblewrap), with weak isolation, or not at all."""
    # loaded by the command that needs it (every command starts without it)
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
    return [Check(f"extra {extra.name}", False, f"not installed ({install_hint(extra.name)})",
                  extra.enables) for extra in missing_extras()]

