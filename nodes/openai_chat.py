"""The chat model for OpenAI-compatible servers: ``ChatOpenAI`` with a direct path for plain chat completions.

A chat-completion call through ``ChatOpenAI`` and the OpenAI SDK builds the request twice over (the SDK's
parameter transform, request options, an ``httpx`` request), turns the reply into the SDK's response models,
dumps them back to a dict for LangChain, and hands that dump to a worker thread. With the tens to hundreds of
calls a batch evaluation keeps in flight, that machinery is most of the client's CPU (``evals.bench_batch
--profile``). :class:`OpenAIChatModel` sends the request LangChain built (``_get_request_payload``) as JSON on the
SDK's own aiohttp pool for the running event loop (:mod:`nodes.http_client`), with the headers, URL and timeouts
the SDK itself makes for this client, and builds LangChain's result from the reply's JSON on the loop.

What stays the same (``tests/test_openai_chat.py`` compares both paths on a loopback server):
- the request: method, URL, the JSON body encoded alike (keys in LangChain's order) and the headers
  (``Accept-Encoding`` is aiohttp's own, which lists only the encodings it can decode);
- the result: messages, tool calls, usage, response metadata;
- the errors: an HTTP error status becomes the SDK's error class made by the SDK's own
  ``_make_status_error_from_response``, then LangChain's error classes, as on the SDK path; a timeout is
  ``APITimeoutError``, a refused or cut connection ``APIConnectionError``; a 200 reply that is not JSON is the
  ``ValueError`` LangChain raises for it.

Everything else takes the SDK path unchanged (``OpenAIChatModel._direct_payload`` and ``_plain_client`` say
when): structured output through ``response_format``, the Responses API, streaming, request options LangChain
passes through (``extra_body``, ``extra_headers``, ...), ``include_response_headers``, SDK retries, strict
response validation, and clients with their own authentication (API-key providers, workload identity, provider
runtimes) or HTTP client.

Around the request, langchain-core runs every call as a traced run (invocation parameters, the schema and
messages formatted for the trace, a callback manager, the run's start and end) whether or not anything
listens. :meth:`OpenAIChatModel.agenerate` skips that run where nothing would observe it (no callback handler
of any kind, no tracing, no cache, no rate limiter, not streamed) and shapes the result as the traced run
does; every observed call takes langchain-core's own path (``tests/test_openai_chat.py`` checks handlers,
tracing hooks, LangGraph's messages stream and caches).
"""

from __future__ import annotations

import inspect
import json
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import openai
from langchain_core.callbacks import AsyncCallbackManager, AsyncCallbackManagerForLLMRun
from langchain_core.globals import get_llm_cache
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult, LLMResult, RunInfo
from langchain_core.utils.utils import LC_ID_PREFIX
from langchain_core.utils.uuid import uuid7
from langchain_openai import ChatOpenAI

from nodes.http_client import LoopLocalAioHttpClient, LoopLocalTransport

try:  # the SDK's and LangChain's own pieces the direct path reuses; without them it is off
    from langchain_openai.chat_models.base import (
        _add_gateway_metadata,
        _handle_openai_api_error,
        _handle_openai_bad_request,
    )
    from openai._legacy_response import RAW_RESPONSE_HEADER
    from openai._models import FinalRequestOptions
    from openai._utils._json import openapi_dumps
    from openai._vendor.httpx_aiohttp.transport import AiohttpTransport
    from openai.resources.chat.completions import AsyncCompletions
    from openai.types import CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionMessage
    from openai.types.chat.chat_completion import Choice
    from openai.types.completion_usage import CompletionTokensDetails, PromptTokensDetails

    #: The payload keys ``chat.completions.create`` takes as body parameters: a payload with any other key
    #: (request options such as ``extra_body``, or a key the SDK would refuse) takes the SDK path.
    BODY_PARAMETERS: frozenset[str] = frozenset(
        name for name, parameter in inspect.signature(AsyncCompletions.create).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
        and name not in {"extra_headers", "extra_query", "extra_body", "timeout"}
    )
    AVAILABLE = True
except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - another SDK layout
    BODY_PARAMETERS = frozenset()
    AVAILABLE = False

try:  # langchain-core's steps of a chat-model call that the unobserved path repeats; without them: off
    from langchain_core.language_models._utils import _normalize_messages
    from langchain_core.language_models.chat_models import _gen_info_and_msg_metadata

    UNOBSERVED_PATH = True
except ImportError:  # pragma: no cover - another langchain-core layout
    UNOBSERVED_PATH = False

_switch = {"on": True}


def use_direct_path(on: bool) -> None:
    """Turn the direct path (the request posted directly and the callback run skipped) on or off in this process:
    off, every call is ``ChatOpenAI``'s own (``evals.bench_batch --model-path http-sdk``)."""
    _switch["on"] = bool(on)


#: Request headers the SDK's httpx request carries that aiohttp sets itself for the body it sends.
_AIOHTTP_SETS = {"host", "content-length", "accept-encoding", "connection", "transfer-encoding"}


@dataclass(frozen=True)
class _Plan:
    """What every direct request of one SDK client shares: made once by the SDK itself (see ``_make_plan``)."""

    api_key: str | None
    url: str
    headers: dict[str, str]
    timeout: aiohttp.ClientTimeout
    transport: LoopLocalTransport

    def error_request(self) -> httpx2.Request:
        """The request an SDK error refers to (made only when there is an error)."""
        return httpx2.Request("POST", self.url, headers=self.headers)


#: SDK client -> its plan, or None where the client needs the SDK path.
_plans: weakref.WeakKeyDictionary[Any, _Plan | None] = weakref.WeakKeyDictionary()
_plans_lock = threading.Lock()


def _plain_client(client: Any) -> bool:
    """Whether ``client`` authenticates with a fixed API key over our aiohttp client, without SDK retries or
    response validation: the clients whose requests the direct path reproduces."""
    return (
        type(client) is openai.AsyncOpenAI
        and getattr(client, "_provider_runtime", None) is None
        and getattr(client, "workload_identity", None) is None
        and getattr(client, "_api_key_provider", None) is None
        and client.custom_auth is None
        and not client._strict_response_validation
        and client.max_retries == 0
        and isinstance(client._client, LoopLocalAioHttpClient)
    )


async def _make_plan(client: Any) -> _Plan | None:
    """The URL, headers and timeouts the SDK makes for a chat completion of ``client`` (a raw-response call, as
    LangChain makes it), or None when the client needs the SDK path."""
    if not _plain_client(client):
        return None
    options = FinalRequestOptions.construct(  # what create() passes to _post, less the body
        method="post", url="/chat/completions", json_data={}, headers={RAW_RESPONSE_HEADER: "true"},
        security={"bearer_auth": True},
    )
    options = await client._prepare_options(options)
    request = client._build_request(options, retries_taken=0)
    transport = client._client._transport_for_url(request.url)
    if not isinstance(transport, LoopLocalTransport):  # a mount of the user's own
        return None
    timeout = request.extensions.get("timeout", {})
    headers = {name: value for name, value in request.headers.items() if name.lower() not in _AIOHTTP_SETS}
    return _Plan(
        api_key=client.api_key,
        url=str(request.url),
        headers=headers,
        # exactly as the SDK's aiohttp transport maps httpx's timeouts
        timeout=aiohttp.ClientTimeout(sock_connect=timeout.get("connect"), sock_read=timeout.get("read"),
                                      connect=timeout.get("pool")),
        transport=transport,
    )


async def _plan_for(client: Any) -> _Plan | None:
    plan = _plans.get(client, False)
    if plan is False or (plan is not None and plan.api_key != client.api_key):
        plan = await _make_plan(client)
        with _plans_lock:
            _plans[client] = plan
    return plan  # type: ignore[return-value]


class _Headers:
    """A reply's headers where LangChain looks for them (``raw_response.headers``)."""

    def __init__(self, headers: Any) -> None:
        self.headers = headers


class OpenAIChatModel(ChatOpenAI):
    """``ChatOpenAI`` whose plain chat completions skip the SDK's request and response machinery (see the
    module docstring); every other call is ``ChatOpenAI``'s own."""

    def _direct_payload(self, payload: dict[str, Any]) -> bool:
        """Whether LangChain's request ``payload`` is a plain chat completion the direct path sends as is."""
        return (
            AVAILABLE
            and _switch["on"]
            and not self.include_response_headers
            and "response_format" not in payload
            and payload.get("stream") is not True
            and BODY_PARAMETERS.issuperset(payload)
            and not self._use_responses_api(payload)
        )

    def takes_n(self, kwargs: dict[str, Any]) -> bool:
        """Whether a call with ``kwargs`` can ask for several choices (``n``) in one request: a chat completion
        (the Responses API has no ``n``) that is not streamed."""
        return not self.streaming and not self._use_responses_api(kwargs)

    def _unobserved(self, messages: list[list[BaseMessage]], callbacks: Any, kwargs: dict[str, Any]) -> bool:
        """Whether a call to :meth:`agenerate` would have nothing but the request itself to do: one
        conversation, no cache, no rate limiter, not streamed, no v1 content blocks to rewrite, and no
        callback handler at all — none in ``callbacks`` or on the model, no verbose or debug output, no tracing
        (environment or context), no handler of a configure hook — as langchain-core's own callback
        configuration finds them."""
        return (
            UNOBSERVED_PATH
            and _switch["on"]
            and len(messages) == 1
            and self.rate_limiter is None
            and (self.cache is False or (self.cache is None and get_llm_cache() is None))
            and self.output_version != "v1"
            and not self._should_stream(async_api=True, run_manager=None, **kwargs)
            and not AsyncCallbackManager.configure(callbacks, self.callbacks, self.verbose).handlers
        )

    async def agenerate(self, messages: list[list[BaseMessage]], stop: list[str] | None = None,
                        callbacks: Any = None, *, tags: list[str] | None = None,
                        metadata: dict[str, Any] | None = None, run_name: str | None = None,
                        run_id: Any = None, **kwargs: Any) -> LLMResult:
        """``BaseChatModel.agenerate``, without its callback run where nothing observes the call.

        langchain-core wraps every call in a traced run: it computes the invocation parameters (twice, with
        the provider's), converts the structured-output schema and formats the messages for the trace,
        configures a callback manager, opens and closes the run, and gathers the one call as a batch — about a
        third of the client's CPU per call on a loopback server, all of it for handlers. Where
        :meth:`_unobserved` finds none, this makes the call and shapes its result as that path does (messages
        normalized; each reply's id ``lc_run--<run id>-<index>`` unless the server gave one; generation info
        and, for one reply, the call's output in its response metadata; the run id in ``result.run``), and
        errors propagate as they do there. Anything observed (a handler, tracing, LangGraph's messages stream,
        a cache, streaming) takes langchain-core's own path.
        """
        if not self._unobserved(messages, callbacks, kwargs):
            return await super().agenerate(messages, stop, callbacks, tags=tags, metadata=metadata,
                                           run_name=run_name, run_id=run_id, **kwargs)
        # what the traced path takes out of the call's arguments for the trace alone
        if not kwargs.pop("ls_structured_output_format", None):
            kwargs.pop("structured_output_format", None)
        run_id = run_id or uuid7()
        result = await self._agenerate(_normalize_messages(messages[0]), stop=stop, **kwargs)
        for index, generation in enumerate(result.generations):
            if generation.message.id is None:
                generation.message.id = f"{LC_ID_PREFIX}-{run_id}-{index}"
            generation.message.response_metadata = _gen_info_and_msg_metadata(generation)
        if len(result.generations) == 1 and result.llm_output is not None:
            message = result.generations[0].message
            message.response_metadata = {**result.llm_output, **message.response_metadata}
        output = LLMResult(generations=[result.generations],
                           llm_output=self._combine_llm_outputs([result.llm_output]))
        output.run = [RunInfo(run_id=run_id)]
        return output

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        payload = self._get_request_payload(messages, stop=stop, **kwargs)
        plan = await _plan_for(self.root_async_client) if self._direct_payload(payload) else None
        if plan is None:
            return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        try:
            status, headers, body = await self._post(plan, openapi_dumps(payload))
            if status >= 400:
                response = httpx2.Response(status, headers=list(headers.items()), content=body,
                                           request=plan.error_request())
                raise self.root_async_client._make_status_error_from_response(response) from None
        except openai.BadRequestError as exc:
            _handle_openai_bad_request(exc)
        except openai.APIError as exc:
            _handle_openai_api_error(exc)
        generation_info: dict[str, Any] = {}
        _add_gateway_metadata(generation_info, _Headers(headers))
        reply = _reply(headers, body)
        result = self._create_chat_result(_as_sdk_dumps(reply), generation_info)
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
            # what ChatOpenAI copies from the SDK's response model: its refusal (None when there is none)
            result.generations[0].message.additional_kwargs["refusal"] = choices[0]["message"].get("refusal")
        return result

    async def _post(self, plan: _Plan, body: bytes) -> tuple[int, Any, bytes]:
        """POST ``body`` on the running loop's pool: the status, headers and body of the reply; connection
        failures and timeouts as the SDK raises them."""
        transport = plan.transport.current()
        if not isinstance(transport, AiohttpTransport):  # pragma: no cover - guarded by LoopLocalAioHttpClient
            raise TypeError(f"unexpected transport {type(transport).__name__}")
        if not isinstance(transport.client, aiohttp.ClientSession):
            transport.client = transport.get_client()
        proxy = transport.proxy
        try:
            async with transport.client.request(
                "POST", plan.url, headers=plan.headers, data=body, timeout=plan.timeout,
                proxy=str(proxy.url) if proxy else None,
                proxy_auth=aiohttp.BasicAuth(*proxy.auth) if proxy and proxy.auth else None,
                proxy_headers=proxy.headers if proxy else None,
            ) as reply:
                return reply.status, reply.headers, await reply.read()
        except TimeoutError as exc:  # aiohttp's connect and read timeouts are TimeoutErrors
            raise openai.APITimeoutError(request=plan.error_request()) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise openai.APIConnectionError(request=plan.error_request()) from exc


if AVAILABLE:
    #: The SDK's response models LangChain reads and their fields: the SDK builds its models with every field,
    #: None where the server sent none, and LangChain reads their dump.
    _FIELDS = {model: tuple(field.alias or name for name, field in model.model_fields.items())
               for model in (ChatCompletion, Choice, ChatCompletionMessage, CompletionUsage,
                             CompletionTokensDetails, PromptTokensDetails)}


def _fill(data: Any, model: Any) -> None:
    if isinstance(data, dict):
        for name in _FIELDS[model]:
            data.setdefault(name, None)


def _as_sdk_dumps(reply: Any) -> Any:
    """The reply as LangChain gets it on the SDK path (``model_dump`` of the SDK's response model): the fields the
    server left out are there, as None."""
    if not isinstance(reply, dict):
        return reply
    _fill(reply, ChatCompletion)
    for choice in reply.get("choices") or ():
        _fill(choice, Choice)
        if isinstance(choice, dict):
            _fill(choice.get("message"), ChatCompletionMessage)
    usage = reply.get("usage")
    _fill(usage, CompletionUsage)
    if isinstance(usage, dict):
        _fill(usage.get("completion_tokens_details"), CompletionTokensDetails)
        _fill(usage.get("prompt_tokens_details"), PromptTokensDetails)
    return reply


def _reply(headers: Any, body: bytes) -> Any:
    """The reply's JSON as the SDK reads it for LangChain: a JSON reply must parse; another content type is
    parsed when it can be and is text otherwise (which LangChain reports as an unexpected response)."""
    try:
        return json.loads(body)
    except ValueError:
        if headers.get("content-type", "*").split(";")[0].endswith("json"):
            raise  # a JSON reply cut short or garbled: a transport fault (kgagents.retry.is_unreadable_body)
        return body.decode("utf-8", errors="replace")


__all__ = ["AVAILABLE", "BODY_PARAMETERS", "OpenAIChatModel"]


# langchain-core asks for ``_agenerate``'s signature on every call (whether it takes ``run_manager``), and
# ``inspect.signature`` walks the function each time unless it carries one: give it the signature once.
OpenAIChatModel._agenerate.__signature__ = inspect.signature(OpenAIChatModel._agenerate)  # type: ignore[attr-defined]
