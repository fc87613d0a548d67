"""The one place every LLM call goes through.

:class:`LLMCaller` wraps the chat model of one role for one node execution:

- :meth:`LLMCaller.structured` asks for structured output (a pydantic model) and re-asks, with the parse
  error, when the reply cannot be parsed (``BaseContext.max_parse_retries``);
- every call is retried on transient API errors (429, 5xx, timeouts, dropped connections) with exponential
  backoff and jitter (``BaseContext.max_api_retries``, ``api_backoff_base_s`` .. ``api_backoff_max_s``);
- token usage per model accumulates in :attr:`LLMCaller.usage`, which the node returns into the state's
  ``usage`` channel (reducer :func:`kgagents.core.usage.merge_usage`), so usage and cost survive checkpoints;
- the run's budget is checked before every call and each reply counted for the run's other calls at once
  (:mod:`kgagents.nodes.budget`): once it is reached, a call does not start (:class:`BudgetSpent`).

A call that fails for good raises :class:`LLMError` (:class:`StructuredOutputError` when the replies never
parsed): the node degrades as its paper's error handling says, notes it with :meth:`LLMCaller.failed` and
returns :attr:`LLMCaller.failures` into the state's ``failures`` channel. A fault that leaves no way forward
(a rejected key, an unknown model, a model that never answered and cannot be reached) raises
:class:`ModelUnavailableError` instead, which no node catches: the run stops with its checkpoints, to be
resumed once the configuration is fixed.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import operator
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import BaseOutputParser
from langchain_core.outputs import ChatGeneration, Generation
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import RunnableBinding, RunnableGenerator, RunnableSequence
from langchain_core.runnables.config import ensure_config, merge_configs
from langchain_core.utils.function_calling import convert_to_json_schema
from langgraph.config import get_config
from langgraph.runtime import get_runtime
from pydantic import BaseModel, ValidationError

from kgagents.core import replay
from kgagents.core.config import ConfigurationError
from kgagents.core.endpoints import describe_model, model_endpoint, model_key, model_label
from kgagents.core.errors import KGAgentsError
from kgagents.core.retry import (
    ModelUnavailableError,
    Watch,
    error_text,
    failure_kind,
    is_transient,
    probe_url,
    retry_model_call,
)
from kgagents.core.scripted import CALL_STAGE, STAGE_KEY
from kgagents.core.third_party import fell_back, private_part
from kgagents.core.usage import (
    Meter,
    Usage,
    current_meter,
    merge_usage,
    metering,
    reply_usage,
    unreported_usage,
    usage_entry,
)
from kgagents.nodes import budget
from kgagents.nodes.context import BaseContext
from kgagents.nodes.models import aresolve_model, derived_seed, resolve_model
from kgagents.nodes.runtime import gather_bounded
from kgagents.nodes.served import ServedRequestError
from kgagents.nodes.state import Failure

log = logging.getLogger("kgagents.llm")


class LLMError(KGAgentsError, RuntimeError):
    """An LLM call failed for good (after its retries): the node goes on without its reply."""

    @property
    def reason(self) -> str:
        """What went wrong, in a line."""
        return str(self)


class BudgetSpent(LLMError):
    """The run has reached its budget: the call did not start (the node degrades as on a failed call, and the
    workflow's routers end the run at its budget; :mod:`kgagents.nodes.budget`)."""


class StructuredOutputError(LLMError):
    """The model never produced a reply that parses into the requested schema."""

    def __init__(self, schema: type[BaseModel], attempts: int, last_error: str) -> None:
        super().__init__(f"no valid {schema.__name__} after {attempts} attempt(s): {last_error}")
        self.schema = schema
        self.attempts = attempts
        self.last_error = last_error

    @property
    def reason(self) -> str:
        return self.last_error


#: Faults that leave a run no way forward: code that catches broadly lets these through.
FATAL_ERRORS: tuple[type[Exception], ...] = (ModelUnavailableError, ConfigurationError,
                                             ServedRequestError)  # a served caller asked for what it may not


def stage_of(prompt: str | Sequence[BaseMessage]) -> str | None:
    """The stage that names a call: the rendered template's (:class:`kgagents.prompts.kgot.Prompt`), else ``None``."""
    return getattr(prompt, "stage", None) if isinstance(prompt, str) else None


def as_messages(prompt: str | Sequence[BaseMessage], system: str | None = None) -> list[BaseMessage]:
    """A prompt string (or message list) as a message list, with an optional system message first."""
    messages: list[BaseMessage] = [HumanMessage(prompt)] if isinstance(prompt, str) else list(prompt)
    if system:
        messages.insert(0, SystemMessage(system))
    return messages


class LLMCaller:
    """The chat model of one role, with retries and usage accounting, for one node execution."""

    def __init__(self, context: BaseContext, role: str, *, temperature: float | None = None,
                 seed: int | None = None, model: BaseChatModel | None = None) -> None:
        self.context = context
        self.role = role
        self.temperature = temperature
        #: The sampling seed instead of the context's (``None``: the context's), e.g. one per candidate.
        self.seed = seed
        self._model: BaseChatModel | None = model
        self._given = model is not None
        self.usage: Usage = {}
        self.failures: list[Failure] = []
        self.budget_stop: str | None = None
        """Set when the run's budget refused a call of this caller: which budget, how much."""

    @property
    def model(self) -> BaseChatModel:
        """The role's chat model (resolved on first use; the async methods resolve it off the event loop)."""
        if self._model is None:
            self._model = resolve_model(self.context, self.role, temperature=self.temperature, seed=self.seed)
        return self._model

    @property
    def label(self) -> str:
        return model_label(self.model)

    async def _ready(self) -> BaseChatModel:
        if self._model is None:
            self._model = await aresolve_model(self.context, self.role, temperature=self.temperature,
                                               seed=self.seed)
        return self._model

    # -- accounting -------------------------------------------------------------------------------
    def _record(self, message: Any, sent: Sequence[BaseMessage] = (), definitions: Iterable[Any] = ()) -> None:
        """Count one reply (to the messages ``sent``, with ``definitions``: the tools and output format the
        request carried, for a local count): into :attr:`usage`, and at once for the run's budget."""
        self._count(reply_usage(message, self.label, sent, definitions))

    def _count(self, delta: Usage) -> None:
        self.usage = merge_usage(self.usage, delta)
        budget.record(self.context, delta)

    def _admit(self) -> None:
        """Raise :class:`BudgetSpent` when the run's budget does not let another call start."""
        reason = budget.admit(self.context, self.usage)
        if reason:
            self.budget_stop = reason
            raise BudgetSpent(f"{reason}: the {self.role} model call did not start")

    def failed(self, exc: LLMError, outcome: str) -> Failure:
        """Note that a call failed for good and what the node does instead (``outcome``); the node returns
        :attr:`failures` into the state's ``failures`` channel. A call the budget refused is no failure (the run
        says it stopped at its budget instead)."""
        node = _current_node()
        failure = Failure(node=node, role=self.role, kind="parse" if isinstance(exc, StructuredOutputError) else "api",
                          error=str(exc)[:1000], outcome=outcome)
        if isinstance(exc, BudgetSpent):
            log.info("%s: %s; %s", node or "(no node)", exc, outcome)
            return failure
        self.failures.append(failure)
        log.warning("%s: %s; %s", node or "(no node)", str(exc)[:300], outcome)
        return failure

    # -- transport --------------------------------------------------------------------------------
    async def _call(self, runnable: Any, messages: list[BaseMessage], n: int | None = None,
                    stage: str | None = None, tentative: bool = False) -> Any:
        """``runnable.ainvoke(messages)`` (``runnable.asample(messages, n)`` with ``n``), with the retries;
        ``stage`` names the call in its metadata and run name (never in the messages); a ``tentative`` call is
        tried once (:func:`kgagents.core.retry.retry_model_call`)."""
        ctx = self.context
        self._admit()
        attempts = 0
        config: dict[str, Any] | None = {"run_name": stage, "metadata": {STAGE_KEY: stage}} if stage else None
        pending: dict[str, tuple[str, str, str]] = {}  # this attempt's requests, for a recording of failed calls

        async def once() -> Any:
            nonlocal attempts
            attempts += 1
            token = CALL_STAGE.set(stage)
            try:
                with replay.attempt(pending):
                    return await (runnable.ainvoke(messages, config) if n is None else
                                  runnable.asample(messages, n, config))
            finally:
                CALL_STAGE.reset(token)

        def on_error(exc: BaseException) -> None:
            replay.note_failure(pending, exc, transient=is_transient(exc), kind=failure_kind(exc))

        key = model_key(self.model)
        timeout_s = ctx.timeout_for(self.role)
        who = f"the {self.role} model ({describe_model(self.model)})"
        watch = Watch(who, probe_url=probe_url(type(self.model).__name__, model_endpoint(self.model)),
                      notice_s=ctx.llm_wait_notice_s, probe_after_s=ctx.llm_probe_after_s,
                      probe_timeout_s=ctx.llm_probe_timeout_s)
        try:
            return await retry_model_call(once, model=key, who=who, max_retries=ctx.max_api_retries,
                                          base_s=ctx.api_backoff_base_s, cap_s=ctx.api_backoff_max_s,
                                          timeout_s=timeout_s, watch=watch, on_error=on_error,
                                          rate_limit_wait_s=ctx.llm_rate_limit_wait_s, tentative=tentative)
        except ModelUnavailableError:
            raise
        except Exception as exc:  # reported as one clear error
            why = error_text(exc) or (f"no reply within {timeout_s:g} s" if isinstance(exc, TimeoutError) else "")
            raise LLMError(f"{self.role} model call failed after {attempts} attempt(s): "
                           f"{type(exc).__name__}: {why}") from exc  # the text some workflows show the model

    # -- public API -------------------------------------------------------------------------------
    async def text(self, prompt: str | Sequence[BaseMessage], *, system: str | None = None,
                   stage: str | None = None) -> str:
        """A plain text reply. ``stage`` names the call (its metadata; default: the rendered template's)."""
        message = await self.message(prompt, system=system, stage=stage)
        return message.text if isinstance(message.text, str) else str(message.content)

    async def message(self, prompt: str | Sequence[BaseMessage], *, system: str | None = None,
                      tools: Sequence[Any] | None = None, tool_choice: str | None = None,
                      stage: str | None = None) -> AIMessage:
        """One reply as an ``AIMessage`` (with tool calls when ``tools`` are bound)."""
        model = await self._ready()
        runnable: Any = model
        if tools:
            runnable = model.bind_tools(list(tools), **({"tool_choice": tool_choice} if tool_choice else {}))
        messages = as_messages(prompt, system)
        reply = await self._call(runnable, messages, stage=stage or stage_of(prompt))
        self._record(reply, messages, SentDefinitions(runnable))
        return reply

    async def structured[T: BaseModel](self, prompt: str | Sequence[BaseMessage], schema: type[T], *,
                                       system: str | None = None, stage: str | None = None) -> T:
        """A reply parsed into ``schema``; unparseable replies are sent back with the error, then re-asked."""
        runnable = await self._structured_runnable(schema)
        return await self._parsed(runnable, schema, as_messages(prompt, system), stage=stage or stage_of(prompt))

    async def structured_samples[T: BaseModel](self, prompt: str | Sequence[BaseMessage], schema: type[T], n: int,
                                               *, system: str | None = None, config: Any = None,
                                               stage: str | None = None) -> list[T | LLMError]:
        """``n`` independent samples of one structured decision (the votes of a majority), in order; a sample
        that failed for good is its :class:`LLMError` (the caller notes it with :meth:`failed`).

        Where the model takes ``n`` (OpenAI-compatible chat completions on the direct structured path; see
        :meth:`DirectStructured.samples_in_one_request`) and ``BaseContext.samples_in_one_request`` is on, one request
        asks for all ``n`` choices: the prompt is sent and paid for once, and one call's client work serves every
        sample. Each choice is parsed as its own reply; one that does not parse is re-asked on its own, as
        :meth:`structured` does, and samples the server did not return (servers that ignore ``n``) are asked
        separately. A request for ``n`` that meets a client error (other than a fatal one) is asked again one
        sample at a time; when that works, the server does not take ``n`` and gets separate requests from then
        on. Elsewhere: ``n`` calls of :meth:`structured`, concurrently (at most the run's ``max_concurrency`` at a
        time, from ``config``). In a seeded run, each sample asked in a request of its own is sampled with its own
        seed (:meth:`_sample_runnable`), so that n separate requests are n samples, not one sample n times.
        """
        runnable = await self._structured_runnable(schema)
        messages = as_messages(prompt, system)
        stage = stage or stage_of(prompt)
        definitions = SentDefinitions(runnable, schema)
        firsts: list[Any] = []
        rejected: LLMError | None = None
        if (n > 1 and self.context.samples_in_one_request and isinstance(runnable, DirectStructured)
                and runnable.samples_in_one_request()):
            try:
                # tried once: a server that takes no n may refuse it with any status (llama.cpp: a 500)
                firsts = await self._call(runnable, messages, n=n, stage=stage, tentative=True)
            except LLMError as exc:
                cause = exc.__cause__
                if isinstance(cause, _PARSE_ERRORS) and not is_transient(cause):
                    self._count(lost_reply_usage(cause, self.label, messages, definitions))  # answered: paid
                if isinstance(cause, _PARSE_ERRORS) or not isinstance(cause, Exception):
                    return [exc] * n  # what a failed request is for every sample it stood for
                rejected = exc  # refused or failed: asked one sample at a time below, with their retries
            else:
                if firsts:  # every choice's message carries the request's whole usage
                    self._record(firsts[0]["raw"], messages, definitions)
                firsts = firsts[:n]

        async def sample(index: int, first: Any) -> T | LLMError:
            # identical requests made at once: each sample's calls are recorded and replayed at its own place
            with replay.sub_place(f"sample {index + 1}"):
                try:
                    own = runnable if first is not None or n == 1 else await self._sample_runnable(schema, index)
                    return await self._parsed(own or runnable, schema, messages, first=first, stage=stage)
                except LLMError as exc:
                    return exc

        out: list[Any] = [_accepted(first, schema)[0] for first in firsts] + [None] * (n - len(firsts))
        asks = [i for i, value in enumerate(out) if value is None]  # the samples that still need a call
        if rejected is not None and asks:
            # the first sample alone: a server that is down (not one that takes no n) meets the model's stops with
            # one call's attempts, not with every sample's at once
            out[asks[0]] = await sample(asks[0], None)
            asks = asks[1:]
        for i, value in zip(asks, await gather_bounded(
                config, [sample(i, firsts[i] if i < len(firsts) else None) for i in asks]), strict=True):
            out[i] = value
        if rejected is not None and any(not isinstance(value, LLMError) for value in out):
            # The prompt was fine one sample at a time: the server does not take n. (A prompt it rejects either
            # way, e.g. one too long, says nothing about n and changes nothing for later calls.)
            runnable.refuses_n = True
            log.info("%s model (%s) rejected a request for %d samples (%s); asking for one at a time from now on",
                     self.role, self.label, n, str(rejected.__cause__)[:200])
        return out

    async def _sample_runnable(self, schema: type[BaseModel], index: int) -> Any:
        """The structured runnable for sample ``index`` of several asked one request each, sampled with its own seed
        (:func:`derived_seed` of the caller's seed and the sample's number): the same request with the same seed is
        the same sample from a server that honours seeds, so n such votes would be one vote n times. ``None`` when
        the run has no seed or the model was given as an instance (it cannot be rebuilt with another seed)."""
        seed = self.seed if self.seed is not None else self.context.seed
        if seed is None or self._given:
            return None
        model = await aresolve_model(self.context, self.role, temperature=self.temperature,
                                     seed=derived_seed(seed, "sample", index + 1))
        if model is self._model:
            return None
        return self._structured_for(model, schema)

    async def _structured_runnable(self, schema: type[BaseModel]) -> Any:
        return self._structured_for(await self._ready(), schema)

    def _structured_for(self, model: BaseChatModel, schema: type[BaseModel]) -> Any:
        kwargs: dict[str, Any] = {"include_raw": True}
        if self.context.structured_output_method != "function_calling" or not _is_base_impl(model):
            kwargs["method"] = self.context.structured_output_method
        return structured_runnable(model, schema, kwargs)

    async def _parsed[T: BaseModel](self, runnable: Any, schema: type[T], messages: list[BaseMessage], *,
                                    first: dict[str, Any] | None = None, stage: str | None = None) -> T:
        """The structured reply to ``messages``, re-asked with the parse error until one parses
        (``BaseContext.max_parse_retries``). ``first``: the first reply, received (and its usage recorded) already."""
        last_error = ""
        attempts = self.context.max_parse_retries + 1
        definitions = SentDefinitions(runnable, schema)
        for attempt in range(attempts):
            if attempt == 0 and first is not None:
                result: Any = first
                raw = first.get("raw")
            else:
                try:
                    result = await self._call(runnable, messages, stage=stage)
                except LLMError as exc:
                    # Clients that parse the reply themselves (OpenAI's json_schema method) raise on a bad one:
                    # that is a parse failure to re-ask, not an API error (a body that kept arriving broken is).
                    if not isinstance(exc.__cause__, _PARSE_ERRORS) or is_transient(exc.__cause__):
                        raise
                    # the reply was answered and paid for: its usage as the response reported it, else counted
                    self._count(lost_reply_usage(exc.__cause__, self.label, messages, definitions))
                    result = {"raw": None, "parsed": None, "parsing_error": exc.__cause__}
                raw = result.get("raw") if isinstance(result, dict) else None
                if raw is not None:
                    self._record(raw, messages, definitions)
            value, last_error = _accepted(result, schema)
            if value is not None:
                return value
            messages = [*messages, HumanMessage(
                f"Your previous reply could not be used: {last_error[:1500]}\n"
                f"Previous reply: {_reply_text(raw)[:1500]}\n"
                f"Reply again with a single valid {schema.__name__} object that follows the schema exactly."
            )]
        raise StructuredOutputError(schema, attempts, last_error)


#: What a request carries beside its messages, as a chat model's ``bind`` / ``bind_tools`` /
#: ``with_structured_output`` puts it in the binding's keyword arguments (OpenAI's and LangChain's names).
_DEFINITION_KEYS = ("tools", "functions", "response_format", "tool_choice", "function_call")


class SentDefinitions:
    """The tool definitions and output format a request sends beside its messages (what a local token count of
    the call includes), worked out only when iterated: only replies without usage are counted locally."""

    def __init__(self, runnable: Any, schema: type[BaseModel] | None = None) -> None:
        self.runnable = runnable
        self.schema = schema

    def __iter__(self) -> Iterator[Any]:
        binding = self.runnable.bound if isinstance(self.runnable, DirectStructured) else self.runnable
        found = [_as_definition(binding.kwargs[key]) for key in _DEFINITION_KEYS
                 if isinstance(binding, RunnableBinding) and binding.kwargs.get(key)]
        if not found and self.schema is not None:  # a chain not taken apart: the schema it sends, as JSON schema
            found = [_as_definition(self.schema)]
        return iter(found)


def _as_definition(value: Any) -> Any:
    """A bound value as the JSON a request sends (a pydantic class: its JSON schema)."""
    if isinstance(value, type) and issubclass(value, BaseModel):
        try:
            return convert_to_json_schema(value)
        except (ValueError, TypeError):
            return value.model_json_schema()
    return value


def lost_reply_usage(error: BaseException, model: str, sent: Sequence[BaseMessage],
                     definitions: Iterable[Any] = ()) -> Usage:
    """The usage of a call whose reply the client itself rejected (OpenAI's ``json_schema`` method parses the
    reply in the client and raises on one that does not fit): the call was answered and paid for. LangChain's
    OpenAI model hands the HTTP response on as the error's ``response``; its body's ``usage`` is the call's.
    Without it (another client, or a change in LangChain), the call is counted as one whose server reported no
    usage: its tokens counted locally from what was sent (and the reply's text, when the body has it)."""
    body: Any = None
    read_json = getattr(getattr(error, "response", None), "json", None)
    if callable(read_json):
        try:
            body = read_json()
        except Exception:  # noqa: BLE001 - a body that is not JSON: the call is counted locally
            body = None
    body = body if isinstance(body, dict) else {}
    name = str(body.get("model") or model)
    usage = body.get("usage")
    if isinstance(usage, dict):
        tokens_in = usage.get("prompt_tokens", usage.get("input_tokens"))
        tokens_out = usage.get("completion_tokens", usage.get("output_tokens"))
        if isinstance(tokens_in, int) and isinstance(tokens_out, int):
            return usage_entry(name, tokens_in, tokens_out)
    choices = body.get("choices")
    message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
        else None
    content = message.get("content") if isinstance(message, dict) else None
    return unreported_usage(name, sent, definitions, AIMessage(content) if isinstance(content, str) else None)


def metered[F: Callable[..., Awaitable[Any]]](node: F) -> F:
    """A graph node whose code makes paid calls outside a chat model (OpenAI embeddings, in its retrievers):
    each asks the run's budget before it starts (raising :class:`BudgetSpent` once it is reached, which the node
    handles as a refused model call) and counts for the step's other calls, and their usage is added to the
    node's state update (``usage``). A node called from a metered node reports to that node's meter."""

    @functools.wraps(node)
    async def run(*args: Any, **kwargs: Any) -> Any:
        if current_meter() is not None:
            return await node(*args, **kwargs)
        ctx = _task_context()
        meter = Meter(record=lambda delta: budget.record(ctx, delta))

        def admit() -> None:
            if reason := budget.admit(ctx, meter.usage):
                raise BudgetSpent(f"{reason}: the embeddings call did not start")

        meter.admit = admit
        with metering(meter):
            out = await node(*args, **kwargs)
        if meter.usage and isinstance(out, dict):
            out = {**out, "usage": merge_usage(out.get("usage"), meter.usage)}
        return out

    return run  # type: ignore[return-value]


def _task_context() -> Any:
    """The running graph task's context (its budget), or None outside a graph."""
    try:
        return get_runtime().context
    except RuntimeError:
        return None


def accounting(*callers: LLMCaller) -> dict[str, Any]:
    """The state update that records the calls of ``callers``: their ``usage`` and (if any) their ``failures``."""
    usage: Usage = {}
    failures: list[Failure] = []
    for caller in callers:
        usage = merge_usage(usage, caller.usage)
        failures += caller.failures
    return {"usage": usage, "failures": failures} if failures else {"usage": usage}


#: Structured-output runnables, per chat model, schema and options: building one converts the schema to a
#: JSON schema and binds it as a tool (about a millisecond of CPU), which every call would otherwise repeat.
#: A runnable is stateless (calls through it are independent), so sharing one is sharing its model.
_STRUCTURED_CACHE_SIZE = 256
_structured_cache: OrderedDict[tuple[Any, ...], tuple[BaseChatModel, Any]] = OrderedDict()
_structured_lock = threading.Lock()


def structured_runnable(model: BaseChatModel, schema: type[BaseModel], kwargs: dict[str, Any]) -> Any:
    """``model.with_structured_output(schema, **kwargs)``, built once per model, schema and options.

    With ``include_raw=True`` the runnable answers ``{"raw", "parsed", "parsing_error"}``; where the model's chain
    can be taken apart (see :class:`DirectStructured`) that answer comes from one model call and a direct parse.
    """
    key = (id(model), schema, tuple(sorted(kwargs.items())))
    with _structured_lock:
        hit = _structured_cache.get(key)
        if hit is not None and hit[0] is model:
            _structured_cache.move_to_end(key)
            return hit[1]
    runnable: Any = DirectStructured.build(model, schema, kwargs) if kwargs.get("include_raw") else None
    if runnable is None:
        runnable = model.with_structured_output(schema, **kwargs)
    with _structured_lock:
        _structured_cache[key] = (model, runnable)  # the entry keeps the model alive, so its id stays its own
        while len(_structured_cache) > _STRUCTURED_CACHE_SIZE:
            _structured_cache.popitem(last=False)
    return runnable


GENERATOR_TRANSFORM = private_part(
    "langchain-core", "RunnableGenerator._transform", tested="1.8.3",
    fallback="LangChain's own with_structured_output chain when it is built; at call time the step's public invoke")


class DirectStructured:
    """A model's structured-output chain taken apart: its bound model call, then its parsers called directly.

    ``with_structured_output(schema, include_raw=True)`` wraps the model call and the parsers in five more
    runnables (a map, an assign with a fallback, lambdas), each with its own callback run, config copies and
    signature inspection, and LangChain's async parsers hand each parse to a worker thread: several milliseconds
    of CPU per call, more than the HTTP client's. This does what that chain does — the same bound model (one
    traced model run, with the same tools, ``tool_choice`` and tracing metadata) and the same parsers in the same
    order, an exception from a parser reported as ``parsing_error`` and one from the model raised — as one awaited
    model call and plain function calls. It is built only from the chains it understands (a bound model followed
    by output parsers and the provider's synchronous checks, such as OpenAI's refusal check); any other chain
    keeps LangChain's own runnable.
    """

    def __init__(self, bound: Any, parsers: list[Any]) -> None:
        self.bound = bound
        self.parsers = parsers
        #: Set when the server rejected a request for several choices (see :meth:`samples_in_one_request`).
        self.refuses_n = False

    @classmethod
    def build(cls, model: BaseChatModel, schema: type[BaseModel], kwargs: dict[str, Any]) -> DirectStructured | None:
        """The direct form of ``model.with_structured_output(schema, **kwargs)``, or None where it has none."""

        plain = {k: v for k, v in kwargs.items() if k != "include_raw"}
        try:
            chain = model.with_structured_output(schema, **plain)
        except Exception:  # noqa: BLE001 - this model's own include_raw chain is used (and raises it again)
            return None
        if not isinstance(chain, RunnableSequence):
            return None
        bound, *rest = chain.steps
        if not (bound is model or (isinstance(bound, RunnableBinding) and bound.bound is model)):
            return None
        parsers: list[Any] = []
        for step in rest:
            if isinstance(step, BaseOutputParser):
                parsers.append(functools.partial(_parse_message, step))
            elif isinstance(step, RunnableGenerator):
                transform = getattr(step, "_transform", None)
                if transform is None and (getattr(step, "_atransform", None) is None  # the private names changed
                                          or any(inspect.isgeneratorfunction(f) for f in vars(step).values())):
                    fell_back(GENERATOR_TRANSFORM, "a RunnableGenerator has no _transform")
                if not _takes_one_argument(transform):  # an async or a run-aware generator: LangChain's chain
                    return None
                parsers.append(_GeneratorStep(step))
            else:
                return None
        if isinstance(bound, RunnableBinding):
            bound = _with_json_schema_metadata(bound)
        return cls(bound, parsers)

    def _result(self, raw: Any) -> dict[str, Any]:
        """``{"raw", "parsed", "parsing_error"}`` for the model's reply ``raw``, as LangChain's chain gives it."""
        try:
            value = raw
            for parse in self.parsers:
                value = parse(value)
        except Exception as exc:  # noqa: BLE001 - what LangChain's fallback reports as parsing_error
            return {"raw": raw, "parsed": None, "parsing_error": exc}
        return {"raw": raw, "parsed": value, "parsing_error": None}

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> dict[str, Any]:
        return self._result(await self.bound.ainvoke(input, config, **kwargs))

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> dict[str, Any]:
        return self._result(self.bound.invoke(input, config, **kwargs))

    def samples_in_one_request(self) -> bool:
        """Whether :meth:`asample` can ask for several choices in one request: the bound model says it takes
        ``n`` for this call (``takes_n``: OpenAI-compatible chat completions) and its server has not refused it."""
        binding = self.bound
        if self.refuses_n or not isinstance(binding, RunnableBinding) or binding.config_factories:
            return False
        takes_n = getattr(binding.bound, "takes_n", None)
        return callable(takes_n) and bool(takes_n(binding.kwargs))

    async def asample(self, input: Any, n: int, config: Any = None) -> list[dict[str, Any]]:
        """One model call that asks for ``n`` choices (``n``, not streamed: a stream carries one choice),
        every choice parsed as :meth:`ainvoke` parses its reply; the model's run is traced as one run with
        ``n`` generations. Only where :meth:`samples_in_one_request` says so."""

        binding = self.bound
        model = binding.bound
        # the running node's config under the binding's and the call's own, as ainvoke has it
        config = ensure_config(merge_configs(binding.config, config))
        result = await model.agenerate_prompt(
            [ChatPromptValue(messages=list(input))], callbacks=config.get("callbacks"),
            tags=config.get("tags"), metadata=config.get("metadata"), run_name=config.get("run_name"),
            run_id=config.pop("run_id", None),
            **{**binding.kwargs, "n": n, "stream": False})
        return [self._result(generation.message) for generation in result.generations[0]]


def _parse_message(parser: Any, message: Any) -> Any:
    """What an output parser's ``invoke`` does with a message, without the runnable around it."""
    if isinstance(message, BaseMessage):
        return parser.parse_result([ChatGeneration(message=message)])
    return parser.parse_result([Generation(text=message)])


class _GeneratorStep:
    """A ``RunnableGenerator`` step of a structured-output chain (such as OpenAI's refusal check) called as its
    generator function (its private ``_transform``), without the runnable around it. Where that call fails and
    the step's public ``invoke`` does not (another langchain-core), the public path serves the call and the
    fallback is said once; where both fail, the step's own error is the parse's error."""

    def __init__(self, step: RunnableGenerator) -> None:
        self.step = step

    def __call__(self, value: Any) -> Any:
        transform = getattr(self.step, "_transform", None)
        try:
            if not callable(transform):
                raise AttributeError(f"{type(self.step).__name__} has no _transform")
            return _run_generator(transform, value)
        except Exception as exc:  # noqa: BLE001 - the public path decides (it raises what the step raises)
            out = self.step.invoke(value)
            fell_back(GENERATOR_TRANSFORM, exc)
            return out


def _run_generator(transform: Any, value: Any) -> Any:
    """What a ``RunnableGenerator`` of a synchronous generator does with one input: its output, chunks added."""
    out = list(transform(iter([value])))
    return functools.reduce(operator.add, out) if out else None


def _takes_one_argument(func: Any) -> bool:
    if func is None:
        return False
    try:
        return len(inspect.signature(func).parameters) == 1
    except (TypeError, ValueError):
        return False


def _with_json_schema_metadata(bound: Any) -> Any:
    """``bound`` with its tracing metadata's schema (``ls_structured_output_format``) as JSON schema already.

    The chat model converts that schema for the trace on every call (a pydantic JSON-schema build, as costly as
    the rest of the call's preparation); converted once here, the same metadata goes out.
    """
    meta = bound.kwargs.get("ls_structured_output_format")
    if not isinstance(meta, dict) or isinstance(meta.get("schema"), dict):
        return bound
    try:
        schema = convert_to_json_schema(meta["schema"])
    except (ValueError, TypeError, KeyError):
        return bound
    return bound.model_copy(update={"kwargs": {**bound.kwargs,
                                               "ls_structured_output_format": {**meta, "schema": schema}}})


#: Errors a chat model raises when it parses a reply itself and the reply does not fit the schema.
_PARSE_ERRORS = (ValidationError, OutputParserException, json.JSONDecodeError)


def _current_node() -> str:
    """The graph node running this code ("" outside a LangGraph run)."""
    try:
        return str((get_config().get("metadata") or {}).get("langgraph_node", ""))
    except RuntimeError:
        return ""


def _is_base_impl(model: BaseChatModel) -> bool:
    """True when ``with_structured_output`` is LangChain's generic one (which takes no ``method``)."""
    return type(model).with_structured_output is BaseChatModel.with_structured_output


def _accepted[T: BaseModel](result: Any, schema: type[T]) -> tuple[T | None, str]:
    """A structured reply's value when it parsed into ``schema``, else None and why it is not usable."""
    parsed = result.get("parsed") if isinstance(result, dict) else result
    if isinstance(parsed, schema):
        return parsed, ""
    if isinstance(parsed, dict):
        try:
            return schema.model_validate(parsed), ""
        except Exception as exc:  # noqa: BLE001 - reported to the model with the re-ask
            return None, str(exc)
    error = str(result.get("parsing_error") or "") if isinstance(result, dict) else ""
    return None, error or _describe_unparsed(result.get("raw") if isinstance(result, dict) else None)


def _reply_text(raw: Any) -> str:
    if raw is None:
        return "(none)"
    parts = [str(getattr(raw, "content", "") or "")]
    for call in getattr(raw, "tool_calls", None) or []:
        parts.append(f"tool call {call.get('name')}({call.get('args')})")
    for call in getattr(raw, "invalid_tool_calls", None) or []:
        parts.append(f"invalid tool call {call.get('name')}: {call.get('args')} ({call.get('error')})")
    return " ".join(p for p in parts if p) or "(empty reply)"


def _describe_unparsed(raw: Any) -> str:
    invalid = getattr(raw, "invalid_tool_calls", None) or []
    if invalid:
        return f"the structured reply was not valid JSON: {invalid[0].get('error') or invalid[0].get('args')}"
    return "the reply contained no structured answer (no tool call / JSON object)"
