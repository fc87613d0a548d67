"""Budgets of a run: ``budget_usd`` and ``budget_tokens`` in every workflow's context.

Every model call of a run is checked before it starts (:func:`admit`, called by
:class:`kgagents.nodes.llm.LLMCaller` and by the tools' model through their environment's ``budget_guard``) and
recorded when its reply arrives (:func:`record`), so no workflow can skip the check. What a check counts is the
run's usage committed to its state before the current step (the workflow's ``usage`` channel, read through the
running task) plus every call recorded since by the tasks of that step, which run concurrently (ToT/GoT
candidates, KGoT's tool calls, a node's samples): once the run has reached its cap, **no call starts**. Calls
already in flight when it is reached finish (a call is never cut off: its tokens are paid for), so a run ends
within one call of its cap, or one round of the calls it makes at once (at most the run's ``max_concurrency``).
A graph that a task runs inside itself (KGoT's search agent, run by its ``ask_search_agent`` tool) is part of
that task's step (:func:`nested_config`): its calls are checked against the whole run's usage and recorded under
the step, where the step's other calls see them.

A refused call is a failed call to its node (:class:`kgagents.nodes.llm.BudgetSpent`): the node degrades as
its paper says, and the workflow's routers, which ask :func:`stop` at the points where the paper checks its own
limits, end the run the way its paper ends a run that must stop —

- KGoT (and its no-KG ablation): the iteration check goes to the forced solution (appendix D.5), as at the
  iteration limit;
- ARK-V1: the routers go to the final answer (step 11), where the model answers from the steps so far or
  abstains, as at ``C_max`` / ``K_max``;
- grounded reasoning: the search ends and the answer comes from the best state kept, as at the step limit;
- Agent-G: the validator's router goes to ``finish`` with the generator's answer on what was retrieved so far,
  as after T iterations (ReAct baseline: the generator on the last references).

That closing step (once the router has written the stop) may still call the model: a run ends with its answer,
at most the closing step's calls above its cap. The reason is written to the ``budget_stop`` channel (by
:func:`kgagents.graphs.routing.add_routed_node`, or by the run's output node when the run reached its cap on
another path), which the output schema returns, ``kgagents ask`` prints and each evaluation record keeps; the
workflows' own ``exit_reason`` says so too.

Tokens are input plus output tokens of every model call of the run; a server that reports no usage has its
calls counted here (``estimated_tokens``: :func:`kgagents.core.usage.estimate_tokens` of what was sent, tool
definitions and output schema included, and received). A cost budget needs the prices of the models used and
the usage of their calls: a model without a price, or calls whose server reported no usage, make the check an
error (which says which) rather than a budget that never ends the run.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.config import get_config

from kgagents.core.errors import KGAgentsError
from kgagents.core.usage import Usage, merge_usage, sum_costs, total_tokens
from kgagents.tools.base import ToolFailure

log = logging.getLogger(__name__)


class BudgetError(KGAgentsError, ValueError):
    """A cost budget that cannot be checked (a model's price or a call's usage is unknown), or a budget that is
    not positive."""


class CallRefused(ToolFailure):
    """A model call of the tools that the run's budget did not let start (:class:`ToolBudgetGuard`): a tool
    failure that no retry fixes (the tool's result says so)."""


class Stop(str):
    """A router's destination chosen because the run reached its budget; ``reason`` says which budget."""

    reason: str

    def __new__(cls, destination: str, reason: str) -> Stop:
        out = super().__new__(cls, destination)
        out.reason = reason
        return out


def check_budget(budget_usd: float | None, budget_tokens: int | None) -> None:
    """A clear error for a budget that is not positive."""
    if budget_usd is not None and not budget_usd > 0:
        raise BudgetError(f"budget_usd must be positive (got {budget_usd})")
    if budget_tokens is not None and not budget_tokens > 0:
        raise BudgetError(f"budget_tokens must be a positive number of tokens (got {budget_tokens})")


def tokens_spent(usage: Usage | None) -> int:
    """Input plus output tokens over every model, with the local count of the calls whose server reported
    none (``estimated_tokens``)."""
    totals = total_tokens(usage)
    estimated = sum(int(u.get("estimated_tokens", 0)) for u in (usage or {}).values())
    return int(totals["input_tokens"]) + int(totals["output_tokens"]) + estimated


def cost_spent(usage: Usage | None) -> float:
    """The cost of every call so far; a :class:`BudgetError` when it is unknown, saying why: calls whose server
    reported no token usage, or a model without a price."""
    usage = usage or {}
    unreported = {model: int(u.get("unmeasured_calls", 0)) for model, u in usage.items()
                  if u.get("unmeasured_calls")}
    if unreported:
        calls = ", ".join(f"{n} call{'' if n == 1 else 's'} of {model}" for model, n in sorted(unreported.items()))
        raise BudgetError(f"a cost budget needs the token usage of every call, and the server reported none for "
                          f"{calls}, so their cost is unknown: give a token budget instead (budget_tokens; "
                          "tokens the server does not report are counted locally) or use a server that reports "
                          "usage")
    unknown = sorted(model for model, u in usage.items() if u.get("cost_usd") is None and u.get("calls"))
    if unknown:
        raise BudgetError(f"a cost budget needs the price of every model, and {', '.join(unknown)} has none: "
                          "add it to a prices file (KGAGENTS_PRICES_FILE) or give a token budget instead")
    return sum_costs(u.get("cost_usd") for u in usage.values()).known_usd


def limits(ctx: Any) -> tuple[float | None, int | None]:
    """``(budget_usd, budget_tokens)`` of a context (a context object or a mapping; either may be None)."""
    if isinstance(ctx, Mapping):
        return ctx.get("budget_usd"), ctx.get("budget_tokens")
    return getattr(ctx, "budget_usd", None), getattr(ctx, "budget_tokens", None)


def has_budget(ctx: Any) -> bool:
    """Whether the context sets a budget (a run without one pays nothing for the checks)."""
    usd, tokens = limits(ctx)
    return usd is not None or tokens is not None


def budget_reached(usage: Usage | None, ctx: Any) -> str | None:
    """Why the run has spent its budget (``ctx.budget_usd`` / ``ctx.budget_tokens``), or None while it has
    not."""
    usd_limit, tokens_limit = limits(ctx)
    check_budget(usd_limit, tokens_limit)
    if tokens_limit is not None:
        spent = tokens_spent(usage)
        if spent >= tokens_limit:
            return f"token budget reached: {spent:,} of {tokens_limit:,} tokens"
    if usd_limit is not None:
        cost = cost_spent(usage)
        if cost >= usd_limit:
            return f"cost budget reached: ${cost:.4f} of ${usd_limit:.4f}"
    return None


def stop(state: Mapping[str, Any], ctx: Any, destination: str) -> Any:
    """``destination`` as a :class:`Stop` when the run has spent its budget, else None (a router's hook:
    ``return budget.stop(state, ctx, "final_answer") or <its own route>``; typed ``Any`` so that the router keeps
    its literal destinations: a :class:`Stop` is the destination's string)."""
    reason = budget_reached(state.get("usage"), ctx)
    return Stop(destination, reason) if reason else None


# -- the check before every call ------------------------------------------------------------------------------
# The calls recorded by the tasks of each running step, by the id of the checkpoint the step started from (one
# per step of each graph run, subgraphs' own included): the usage that is not yet in the state. A step's entry
# is no longer read once the step has ended (its usage is then in the state); the oldest are dropped.
_IN_FLIGHT_MAX = 16384
_in_flight: OrderedDict[str, Usage] = OrderedDict()
_in_flight_lock = threading.Lock()

#: LangGraph's keys of a task's configuration: the running step's runtime (whose ``execution_info`` names the
#: checkpoint the step started from) and the task's read of the graph's channels (see docs/dependencies.md).
_RUNTIME_KEY = "__pregel_runtime"
_READ_KEY = "__pregel_read"


#: The configurable key under which a graph run inside another run's task (KGoT's search agent, run by its
#: ``ask_search_agent`` tool) finds the step of the outermost run that started it (:func:`nested_config`).
ENCLOSING_KEY = "kgagents_budget_enclosing"


@dataclass(frozen=True)
class Enclosing:
    """The running step of the run that started a nested graph: its checkpoint id and its task's channel read.
    The nested graph's calls are checked against that run's usage and recorded under that step."""

    step: str | None
    read: Callable[..., Any] | None


def _running_step() -> tuple[str | None, Callable[..., Any] | None]:
    """The running step's checkpoint id and the task's channel read, or ``(None, None)`` outside a graph. Inside
    a nested graph (:func:`nested_config`): the step of the outermost run, which the nested graph is part of."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a graph's task (a grader, a script)
        return None, None
    step, read = _step_of(configurable)
    if step is None or read is None:
        _warn_missing_keys(step, read)
    return step, read


_warned = threading.Event()


def _warn_missing_keys(step: str | None, read: Callable[..., Any] | None) -> None:
    """Say once per process that LangGraph did not give a task what the per-call check reads (a LangGraph older
    than pyproject's floor, or one whose private keys changed): the check then counts less."""
    if _warned.is_set():
        return
    _warned.set()
    missing = [what for what, value in (("the running step's id (Runtime.execution_info)", step),
                                        ("the task's channel read", read)) if value is None]
    log.warning("LangGraph's task configuration lacks %s (%s keys; see docs/dependencies.md): the budget "
                "check before each model call counts %s, and the routers' checks between steps stop the run",
                " and ".join(missing), "/".join((_RUNTIME_KEY, _READ_KEY)),
                "the run's usage as its step started plus the caller's own calls, not those of the step's other "
                "tasks" if read is not None else "only the caller's own calls")


def _step_of(configurable: Mapping[str, Any]) -> tuple[str | None, Callable[..., Any] | None]:
    enclosing = configurable.get(ENCLOSING_KEY)
    if isinstance(enclosing, Enclosing):
        return enclosing.step, enclosing.read
    info = getattr(configurable.get(_RUNTIME_KEY), "execution_info", None)
    step = getattr(info, "checkpoint_id", None)
    read = configurable.get(_READ_KEY)
    return (str(step) if step else None), (read if callable(read) else None)


def nested_config(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """A running task's ``configurable`` for a graph it runs inside the task (a tool that runs a subgraph), with
    the task's step as the one the nested graph belongs to for the budget: every model call of the nested graph
    is then checked against the run's usage (its state's, plus its step's calls, the other tool calls'
    included) and recorded under that step, so its siblings see it too. (A nested graph's own state holds only
    its own usage: without this, its calls would count that alone.) A graph nested deeper keeps the outermost
    run's step."""
    out = dict(configurable)
    if not isinstance(out.get(ENCLOSING_KEY), Enclosing):
        step, read = _step_of(out)
        if step is not None or read is not None:  # (outside a graph's task the nested graph is the run)
            out[ENCLOSING_KEY] = Enclosing(step, read)
    return out


def _committed(read: Callable[..., Any] | None, channel: str) -> Any:
    """A channel's value as the running step started with it (None when the graph has no such channel or it
    is empty)."""
    if read is None:
        return None
    try:
        return read(channel, False)
    except Exception:  # noqa: BLE001 - an empty channel (EmptyChannelError) or one this graph lacks (KeyError)
        return None


def spent(own: Usage | None = None) -> Usage:
    """The running run's usage: its state's, plus the calls recorded since by the tasks of its running step;
    outside a graph, ``own`` (the caller's own calls). Inside a graph without the running step's id (a
    LangGraph without ``execution_info``): the state's usage plus ``own``."""
    step, read = _running_step()
    if step is None:
        return merge_usage(_committed(read, "usage") or {}, own)
    with _in_flight_lock:
        recorded = _in_flight.get(step)
    return merge_usage(_committed(read, "usage") or {}, recorded)


def admit(ctx: Any, own: Usage | None = None) -> str | None:
    """Why a model call of the run may not start (its budget is reached), or None when it may: every call asks
    before it starts. The run's closing step, once a router has stopped it (``budget_stop`` in its state), may
    still call (see the module docstring)."""
    if not has_budget(ctx):
        return None
    reason = budget_reached(spent(own), ctx)
    if reason and _committed(_running_step()[1], "budget_stop"):
        return None  # the closing step the router chose: it answers from what the run has
    return reason


def record(ctx: Any, delta: Usage) -> None:
    """Count a call's usage for the checks of the running step's other calls (its state has it once the step
    ends)."""
    if not has_budget(ctx):
        return
    step, _ = _running_step()
    if step is None:
        return
    with _in_flight_lock:
        _in_flight[step] = merge_usage(_in_flight.get(step), delta)
        _in_flight.move_to_end(step)
        while len(_in_flight) > _IN_FLIGHT_MAX:
            _in_flight.popitem(last=False)


class ToolBudgetGuard:
    """The run's budget for the tools' own model calls (``ToolEnv.budget_guard``): :meth:`admit` before each,
    raising :class:`CallRefused` once the budget is reached; :meth:`record` after."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.usage: Usage = {}
        """The calls this guard counted (what a check outside a graph's task goes by)."""

    def admit(self) -> None:
        if reason := admit(self.ctx, self.usage):
            raise CallRefused(f"{reason}: the tools' model call did not start")

    def record(self, delta: Usage) -> None:
        self.usage = merge_usage(self.usage, delta)
        record(self.ctx, delta)
