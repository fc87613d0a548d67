"""Budgets of a run: ``budget_usd`` and ``budget_tokens`` in every workflow's context.

A run that has spent its budget ends the way its paper ends a run that must stop, not with an error: the
workflow's routers ask :func:`stop` at the points where the paper checks its own limits, and go where the
limit would send them —

- KGoT (and its no-KG ablation): the iteration check goes to the forced solution (appendix D.5), as at the
  iteration limit;
- ARK-V1: the routers go to the final answer (step 11), where the model answers from the steps so far or
  abstains, as at ``C_max`` / ``K_max``;
- grounded reasoning: the search ends and the answer comes from the best state kept, as at the step limit;
- Agent-G: the validator's router goes to ``finish`` with the generator's answer on what was retrieved so far,
  as after T iterations (ReAct baseline: the generator on the last references).

The step the router sends the run to may still call the model (the forced solution, the final answer): the
budget is checked before each new step of the search, never in the middle of one, so a run can end somewhat
above its budget. The reason is written to the ``budget_stop`` channel (by
:func:`kgagents.graphs.routing.add_routed_node`), which the output schema returns, ``kgagents ask`` prints and
each evaluation record keeps; the workflows' own ``exit_reason`` says so too.

Tokens are input plus output tokens of every model call of the run. A cost budget needs the prices of the
models used: a model without a price (its cost unknown) makes the check an error rather than a budget that
never ends the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgagents.core.errors import KGAgentsError
from kgagents.core.usage import Usage, sum_costs, total_tokens


class BudgetError(KGAgentsError, ValueError):
    """A cost budget that cannot be checked (a model's price is unknown), or a budget that is not positive."""


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
    """Input plus output tokens over every model."""
    totals = total_tokens(usage)
    return int(totals["input_tokens"]) + int(totals["output_tokens"])


def cost_spent(usage: Usage | None) -> float:
    """The cost of every call so far; a :class:`BudgetError` when a model's price is unknown."""
    usage = usage or {}
    unknown = sorted(model for model, u in usage.items() if u.get("cost_usd") is None and u.get("calls"))
    if unknown:
        raise BudgetError(f"a cost budget needs the price of every model, and {', '.join(unknown)} has none: "
                          "add it to a prices file (KGAGENTS_PRICES_FILE) or give a token budget instead")
    return sum_costs(u.get("cost_usd") for u in usage.values()).known_usd


def budget_reached(usage: Usage | None, ctx: Any) -> str | None:
    """Why the run has spent its budget (``ctx.budget_usd`` / ``ctx.budget_tokens``), or None while it has
    not."""
    tokens_limit = getattr(ctx, "budget_tokens", None)
    usd_limit = getattr(ctx, "budget_usd", None)
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
