"""Turning the context's model choices into chat models.

A model is given per role as a chat-model instance (Python callers, tests) or a string:
- ``provider:model`` (``openai:gpt-4o-mini``, ``anthropic:claude-sonnet-4-5``, ``ollama:qwen2.5:7b``) through
  LangChain's ``init_chat_model``;
- a bare model name with an OpenAI-compatible ``base_url`` (vLLM, llama.cpp, LM Studio, Ollama's ``/v1``);
- ``scripted:/path/script.json`` — the offline :class:`~kgagents.core.scripted.ScriptedChatModel`.
With nothing given, the environment decides (``KGAGENTS_MODEL`` and the role overrides), then a local Ollama
server if one answers; otherwise :class:`~kgagents.core.config.ConfigurationError` names the variables to set.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
import threading
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel

from kgagents.core.config import MODEL_VARIABLES_HELP, ConfigurationError, get_settings, ollama_available
from kgagents.core.endpoints import (  # noqa: F401 - re-exported for the nodes
    describe_model,
    model_endpoint,
    model_key,
    model_label,
)
from kgagents.core.extras import require
from kgagents.core.keys import (
    ANTHROPIC,
    AZURE,
    OLLAMA,
    OPENAI,
    OPENAI_PROTOCOL,
    OPENAI_SDK_VARIABLES,
    bound_key,
    sdk_headers_withheld,
)
from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.sdk_headers import confine_openai_client
from kgagents.core.third_party import fell_back, private_part
from kgagents.nodes.context import BaseContext

log = logging.getLogger(__name__)

#: The providers ``init_chat_model`` knows, as langchain lists them (privately) ...
BUILTIN_PROVIDERS = private_part("langchain", "chat_models.base._BUILTIN_PROVIDERS", tested="1.5.2",
                                 fallback="the providers kgagents knows (KNOWN_PROVIDERS)")
#: ... and as kgagents knows them without that list (langchain 1.5.2's): ``provider:model`` with another provider
#: is a model name.
KNOWN_PROVIDERS = frozenset({
    "anthropic", "anthropic_bedrock", "azure_ai", "azure_openai", "baseten", "bedrock", "bedrock_converse",
    "bedrock_mantle_anthropic", "bedrock_mantle_openai", "cohere", "deepseek", "fireworks", "google_anthropic_vertex",
    "google_genai", "google_vertexai", "groq", "huggingface", "ibm", "langsmith", "litellm", "meta", "mistralai",
    "nvidia", "ollama", "openai", "openrouter", "perplexity", "together", "upstage", "xai"})

#: Providers whose LangChain integration comes with an extra (:mod:`kgagents.core.extras`): its module.
PROVIDER_MODULES = {"anthropic": "langchain_anthropic", "ollama": "langchain_ollama"}

#: The providers whose chat models take a sampling seed, and the name of their parameter. OpenAI's covers every
#: OpenAI-compatible server (vLLM, llama.cpp, LM Studio); the others (Anthropic, ...) have none and ignore it.
SEED_PARAMETERS = {"openai": "seed", "ollama": "seed"}

#: Derived seeds lie in [0, 2**31): every provider that takes a seed takes a 32-bit signed integer.
_SEED_RANGE = 2**31


def derived_seed(seed: int, *parts: object) -> int:
    """The seed of one of several samples that a run with ``seed`` draws from identical requests (ToT's candidate
    j of a state, a vote's sample i): a SHA-256 of the seed and ``parts`` into [0, 2**31). Unlike ``seed + j``,
    samples of runs with neighbouring seeds (``eval --seed S --runs R`` gives run r the seed S + r) do not share
    seeds, except by a chance of about one in 2**31 per pair."""
    text = "\x1f".join([str(seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % _SEED_RANGE


_cache: dict[tuple[Any, ...], BaseChatModel] = {}
_cache_lock = threading.Lock()
#: Ollama server URL -> the model string found there (found once per process: the probe opens sockets).
_ollama_found: dict[str, str] = {}


def _ollama_default_model(url: str) -> str | None:
    """The first chat model the Ollama server at ``url`` has (embedding-only models cannot chat)."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/tags", timeout=1.0) as resp:  # noqa: S310 (loopback)
            models = json.loads(resp.read().decode("utf-8")).get("models", [])
        names = [str(m.get("name") or m.get("model")) for m in models if m.get("name") or m.get("model")]
    except (OSError, ValueError, AttributeError, TypeError):  # not an Ollama server after all
        return None
    chat = [name for name in names if "embed" not in name.lower()]
    return chat[0] if chat else None


def configured_model_string(role: str, context: BaseContext | None = None) -> str:
    """The model string for ``role``: the context's, then the environment's, then a local Ollama model."""
    if context is not None:
        given = context.model_for(role)
        if isinstance(given, str) and given:
            return given
    settings = get_settings()
    spec = settings.model_for(role)
    if spec:
        return spec
    if settings.ollama_url in _ollama_found:
        return _ollama_found[settings.ollama_url]
    if ollama_available(settings.ollama_url):
        name = _ollama_default_model(settings.ollama_url)
        if name:
            _ollama_found[settings.ollama_url] = f"ollama:{name}"
            return f"ollama:{name}"
    raise ConfigurationError(MODEL_VARIABLES_HELP)


#: The LangSmith gateway's own keys (``langsmith:`` models), the first one set wins.
LANGSMITH_KEYS = ("LANGSMITH_GATEWAY_API_KEY", "LANGSMITH_API_KEY")

#: The variables a model's endpoint and key come from besides the settings (a change builds the model again).
_KEY_VARIABLES = tuple(dict.fromkeys([*(name for binding in (*OPENAI_PROTOCOL, ANTHROPIC, OLLAMA, AZURE)
                                       for name in (binding.key, *binding.bases)), *OPENAI_SDK_VARIABLES,
                                      *LANGSMITH_KEYS]))


def _cache_key(spec: str, base_url: str | None, temperature: float | None, timeout_s: float | None,
               settings: Any, seed: int | None, connect_timeout_s: float | None = None) -> tuple[Any, ...]:
    return (spec, base_url or settings.base_url, settings.api_key, settings.ollama_url, temperature, timeout_s, seed,
            connect_timeout_s, tuple(map(os.environ.get, _KEY_VARIABLES)))


def build_chat_model(spec: str, *, base_url: str | None = None, temperature: float | None = None,
                     timeout_s: float | None = None, seed: int | None = None,
                     connect_timeout_s: float | None = None) -> BaseChatModel:
    """Build a chat model from a model string (cached per process: chat-model clients are stateless).

    ``seed`` goes to providers that take one (:data:`SEED_PARAMETERS`); the others are built without it.
    ``timeout_s`` bounds a request; ``connect_timeout_s``, where the provider's client takes one (the OpenAI SDK's
    models), how long its server may take to accept the connection."""
    settings = get_settings()
    key = _cache_key(spec, base_url, temperature, timeout_s, settings, seed, connect_timeout_s)
    base_url = base_url or settings.base_url
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    model = _build(spec, base_url=base_url, temperature=temperature, timeout_s=timeout_s, seed=seed,
                   connect_timeout_s=connect_timeout_s)
    with _cache_lock:
        _cache.setdefault(key, model)
        return _cache[key]


def openai_endpoint(base_url: str | None) -> tuple[str, str | None]:
    """Where an OpenAI-protocol model sends its requests, and the key that goes there: ``base_url`` (the
    context's, else ``KGAGENTS_BASE_URL``), else ``OPENAI_BASE_URL``, else OpenAI's API; the key of
    :data:`kgagents.core.keys.OPENAI_PROTOCOL` bound to that server, else none (said once when a key is
    held back)."""
    endpoint = base_url or OPENAI.base(os.environ) or ""
    return endpoint, bound_key(endpoint, OPENAI_PROTOCOL, os.environ)


def _client_timeout(sdk: str, timeout_s: float | None, connect_timeout_s: float | None) -> Any:
    """The ``timeout`` of an OpenAI SDK client: the request's limit, with a shorter
    limit on connecting where one is given (a plain number: the SDK uses it for every phase)."""
    if connect_timeout_s is None or timeout_s is None:
        return timeout_s
    timeout_class = importlib.import_module(sdk).Timeout  # the SDK's own httpx flavour's Timeout
    return timeout_class(timeout_s, connect=min(connect_timeout_s, timeout_s))


def _build(spec: str, *, base_url: str | None, temperature: float | None, timeout_s: float | None,
           seed: int | None = None, connect_timeout_s: float | None = None) -> BaseChatModel:
    if spec.startswith("scripted:"):
        return ScriptedChatModel.from_file(spec.split(":", 1)[1], lazy=True)
    # langchain's model registry: heavy, loaded when a model is made
    from langchain.chat_models import init_chat_model

    provider, _, name = spec.partition(":")
    if name and base_url and not is_provider(provider):
        provider, name = spec, ""  # "qwen2.5:7b" on an OpenAI-compatible server is one bare model name
    kwargs: dict[str, Any] = {}
    if temperature is not None:
        kwargs["temperature"] = temperature
    if not name:  # a bare model name
        if not base_url:
            raise ConfigurationError(
                f"model {spec!r} names no provider; write it as provider:model (e.g. openai:{spec}) "
                "or set KGAGENTS_BASE_URL to an OpenAI-compatible server"
            )
        provider, name = "openai", spec
    if seed is not None:
        _add_seed(kwargs, provider, seed)
    if provider == "openai":
        # Our LLM layer retries with backoff itself; the SDK's own retries would hide errors from it.
        kwargs["max_retries"] = 0
        # The SDK's aiohttp backend: far less CPU per call with many calls in flight (nodes/http_client.py).
        # Neither client follows a redirect: a prompt never goes to a host that was not configured.
        from kgagents.nodes.http_client import async_http_client, sync_http_client

        kwargs["http_async_client"], kwargs["http_client"] = async_http_client(), sync_http_client()
        if timeout_s is not None:
            kwargs["timeout"] = _client_timeout("openai", timeout_s, connect_timeout_s)
        # An explicit endpoint and key: the SDK's own environment lookups (OPENAI_BASE_URL, OPENAI_API_KEY) never
        # choose another server for the key, and the start line reads back where the client really sends. The
        # headers the SDK takes from its environment on its own are confined once the model is built.
        endpoint, key = openai_endpoint(base_url)
        if key is None and not base_url:
            raise ConfigurationError(f"the model {spec!r} needs OPENAI_API_KEY (or KGAGENTS_BASE_URL and "
                                     "KGAGENTS_API_KEY for another OpenAI-compatible server)")
        kwargs["base_url"], kwargs["api_key"] = endpoint, key or "not-needed"
    elif provider == "anthropic":
        kwargs["max_retries"] = 0
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s  # langchain-anthropic takes a number only: no shorter connect limit
        secret = ANTHROPIC.secret(os.environ)
        if secret is None:
            raise ConfigurationError(f"the model {spec!r} needs ANTHROPIC_API_KEY")
        kwargs["base_url"], kwargs["api_key"] = ANTHROPIC.base(os.environ), secret
    elif provider == "ollama":
        kwargs["base_url"] = get_settings().ollama_url
        kwargs.update(ollama_authorization(kwargs["base_url"]))
    elif provider in OPENAI_SDK_PROVIDERS:
        kwargs.update(openai_sdk_provider_settings(spec, provider, os.environ))
        kwargs["max_retries"] = 0
        if timeout_s is not None:
            kwargs["timeout"] = _client_timeout("openai", timeout_s, connect_timeout_s)
    if provider in PROVIDER_MODULES:
        require(PROVIDER_MODULES[provider], f"{provider} models")
    try:
        if provider == "openai":
            from kgagents.nodes.openai_chat import OpenAIChatModel  # langchain-openai: slow, for OpenAI only

            return confine_openai_model(OpenAIChatModel(model=name, **kwargs), kwargs["base_url"],
                                        kwargs["api_key"])
        return init_chat_model(name, model_provider=provider, **kwargs)
    except ImportError as exc:
        raise ConfigurationError(f"the provider {provider!r} needs an extra package: {exc}") from exc
    except Exception as exc:  # missing API key and similar configuration errors
        raise ConfigurationError(f"cannot set up the model {spec!r}: {exc}") from exc


#: Providers other than ``openai`` whose LangChain models are OpenAI SDK clients that read ``OPENAI_API_KEY`` (and
#: the SDK's header variables) from the environment on their own: Azure OpenAI (``AzureChatOpenAI`` falls back to
#: ``OPENAI_API_KEY`` and sends it to ``AZURE_OPENAI_ENDPOINT``) and LangSmith's gateway (``ChatOpenAI`` there
#: sends ``OPENAI_API_KEY`` to the gateway when no LangSmith key is set).
OPENAI_SDK_PROVIDERS = ("azure_openai", "langsmith")


def openai_sdk_provider_settings(spec: str, provider: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The explicit key (and endpoint) a model of :data:`OPENAI_SDK_PROVIDERS` is built with, so that its client
    never falls back to ``OPENAI_API_KEY``: Azure's own key to Azure's own endpoint (:data:`AZURE`), LangSmith's
    own key (:data:`LANGSMITH_KEYS`). Raises :class:`ConfigurationError` when its own key is missing, or when the
    OpenAI SDK would add the headers of :data:`OPENAI_SDK_VARIABLES` (``OPENAI_API_KEY``'s server's) to its
    requests."""
    if provider == "azure_openai":
        key, endpoint = AZURE.secret(env), AZURE.base(env)
        if key is None or endpoint is None:
            raise ConfigurationError(f"the model {spec!r} needs AZURE_OPENAI_API_KEY and AZURE_OPENAI_ENDPOINT "
                                     "(OPENAI_API_KEY goes only to OpenAI's server, never to Azure)")
        settings: dict[str, Any] = {"api_key": key, "azure_endpoint": endpoint}
    else:
        key = next((value.strip() for name in LANGSMITH_KEYS if (value := env.get(name) or "").strip()), None)
        if key is None:
            raise ConfigurationError(f"the model {spec!r} needs {' or '.join(LANGSMITH_KEYS)} (OPENAI_API_KEY "
                                     "goes only to OpenAI's server, never to LangSmith's gateway)")
        endpoint, settings = None, {"api_key": key}
    if sdk_headers_withheld(endpoint, env):
        set_ = ", ".join(name for name in OPENAI_SDK_VARIABLES if (env.get(name) or "").strip())
        raise ConfigurationError(f"the model {spec!r} would send the headers of {set_} (they go only to "
                                 f"{OPENAI.base(env)}) to {provider}'s server: unset them for this run")
    return settings


#: ``ChatOpenAI``'s SDK clients: each root client and the chat-completions resource taken from it.
OPENAI_CLIENTS = (("root_client", "client"), ("root_async_client", "async_client"))


def confine_openai_model(model: Any, endpoint: str, api_key: str) -> Any:
    """``model`` (a ``ChatOpenAI``) with SDK clients that send the SDK's environment headers
    (``OPENAI_CUSTOM_HEADERS``, ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``) only to their own server
    (:func:`kgagents.core.sdk_headers.confine_openai_client`)."""
    for root_name, api_name in OPENAI_CLIENTS:
        root = getattr(model, root_name, None)
        if root is None:
            continue
        confined = confine_openai_client(root, endpoint, api_key, os.environ)
        if confined is not root:
            setattr(model, root_name, confined)
            setattr(model, api_name, confined.chat.completions)
    return model


def ollama_authorization(url: str) -> dict[str, Any]:
    """The client settings of an Ollama chat model at ``url`` for ``OLLAMA_API_KEY``, which Ollama's client would
    send to any ``OLLAMA_HOST``: the key where it is bound (:data:`kgagents.core.keys.OLLAMA`), else hooks that
    take the ``Authorization`` header off every request (said once)."""
    key = bound_key(url, (OLLAMA,), os.environ)
    if key is not None:
        return {"client_kwargs": {"headers": {"Authorization": f"Bearer {key}"}}}
    if OLLAMA.secret(os.environ) is None:
        return {}
    return {"sync_client_kwargs": {"event_hooks": {"request": [_without_authorization]}},
            "async_client_kwargs": {"event_hooks": {"request": [_without_authorization_async]}}}


def _without_authorization(request: Any) -> None:
    request.headers.pop("Authorization", None)


async def _without_authorization_async(request: Any) -> None:
    request.headers.pop("Authorization", None)


_unseeded: set[str] = set()


def _add_seed(kwargs: dict[str, Any], provider: str, seed: int) -> None:
    """Pass ``seed`` to a provider that takes one; say once per provider that another one ignores it."""
    parameter = SEED_PARAMETERS.get(provider)
    if parameter is not None:
        kwargs[parameter] = seed
    elif provider not in _unseeded:
        _unseeded.add(provider)
        log.warning("the provider %r takes no sampling seed: runs with a seed are not reproducible there", provider)


def is_provider(name: str) -> bool:
    """Whether ``name`` is a provider ``init_chat_model`` knows (else ``name:tag`` is a model name)."""
    try:
        # langchain's model registry: heavy, loaded when a model is made
        from langchain.chat_models import base as chat_base
    except ImportError:  # pragma: no cover
        return name in KNOWN_PROVIDERS
    known: Any = getattr(chat_base, "_BUILTIN_PROVIDERS", None)
    if not provider_names(known):
        fell_back(BUILTIN_PROVIDERS, "langchain.chat_models.base has no _BUILTIN_PROVIDERS"
                  if known is None else f"its _BUILTIN_PROVIDERS is a {type(known).__name__}, not provider names")
        return name in KNOWN_PROVIDERS
    return name in set(known)


def provider_names(known: Any) -> bool:
    """Whether ``known`` (langchain's private provider list) is what it was: a non-empty collection of names (a
    string, or anything else, is a changed private part: ``"openai" in "openai_like"`` would match parts of
    words)."""
    return (isinstance(known, Iterable) and not isinstance(known, (str, bytes)) and bool(known)
            and all(isinstance(item, str) for item in known))


def resolve_model(context: BaseContext, role: str, *, temperature: float | None = None,
                  seed: int | None = None) -> BaseChatModel:
    """The chat model for ``role`` in this run (``temperature``, ``seed``: instead of the context's)."""
    given = context.model_for(role)
    if isinstance(given, BaseChatModel):
        return given
    spec = configured_model_string(role, context)
    temp = temperature if temperature is not None else context.temperature
    return build_chat_model(spec, base_url=context.base_url, temperature=temp, timeout_s=context.timeout_for(role),
                            connect_timeout_s=context.llm_connect_timeout_s,
                            seed=seed if seed is not None else context.seed)


def _already_built(context: BaseContext, role: str, temperature: float | None,
                   seed: int | None = None) -> BaseChatModel | None:
    """The model :func:`resolve_model` would return, if it needs no I/O to find it (else None)."""
    given = context.model_for(role)
    if isinstance(given, BaseChatModel):
        return given
    settings = get_settings()
    spec = given if isinstance(given, str) and given else settings.model_for(role)
    spec = spec or _ollama_found.get(settings.ollama_url)
    if not spec:
        return None
    temp = temperature if temperature is not None else context.temperature
    with _cache_lock:
        return _cache.get(_cache_key(spec, context.base_url, temp, context.timeout_for(role), settings,
                                     seed if seed is not None else context.seed, context.llm_connect_timeout_s))


async def aresolve_model(context: BaseContext, role: str, *, temperature: float | None = None,
                         seed: int | None = None) -> BaseChatModel:
    """:func:`resolve_model` for code on an event loop: a model built before (or given as an instance) at
    once; otherwise the resolution, which may build a client or look for a local Ollama server, in a thread."""
    model = _already_built(context, role, temperature, seed)
    if model is not None:
        return model
    return await asyncio.to_thread(resolve_model, context, role, temperature=temperature, seed=seed)

