"""The state evaluators (§4.1): a depth's candidates in BFS order, the Score evaluator's votes and ranking,
the Selection evaluator's ranking or votes, the ``t`` states kept per depth (eq. 2), and whether the search
goes on."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.grounded.chains import _id_key, chain_of, render_chain, task_of
from kgagents.nodes.grounded.context import ROLE, GroundedContext, grounded_context_of
from kgagents.nodes.grounded.replies import BestChoice, ScoreVote, SelectionVote, _structured
from kgagents.nodes.grounded.state import GroundedState, Selection, StepTask, Thought
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.prompts import grounded as P


def candidates_of(state: GroundedState) -> list[str]:
    """This depth's new states in BFS order: the steps by their parent's rank at the depth before (the
    frontier, best first), then their candidate number; merges after them, in id order. Failed steps are left
    out. The evaluators' ties and an incomplete ranking keep this order, so the better parent's children come
    first."""
    depth = state.get("depth", 0) + 1
    rank = {parent: i for i, parent in enumerate(state.get("frontier") or [])}
    found = [t for t in (state.get("thoughts") or {}).values()
             if t.get("depth") == depth and t.get("kind") in ("step", "merge") and not t.get("error")]

    def position(t: Thought) -> tuple[Any, ...]:
        parents = t.get("parents") or []
        parent_rank = rank.get(parents[0], len(rank)) if t.get("kind") == "step" and parents else len(rank)
        return (t.get("kind") == "merge", parent_rank, _id_key(t["id"]))

    return [t["id"] for t in sorted(found, key=position)]


def score_tasks(state: GroundedState) -> list[StepTask]:
    """The Score evaluator's branches, one per candidate; none when fewer than two candidates are left (one
    candidate is kept without being evaluated, so its scores would be paid for and never read)."""
    thoughts = state.get("thoughts") or {}
    candidates = candidates_of(state)
    if len(candidates) < 2:
        return []
    return [task_of(state, c, state.get("depth", 0) + 1, [], chain_of(thoughts, c)) for c in candidates]


async def score_state(task: StepTask, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """The Score evaluator for one state: ``score_samples`` votes of the probability that it solves q (sampled
    at ``evaluate_temperature``; a vote that failed for good counts 0)."""
    ctx = grounded_context_of(runtime)
    llm = LLMCaller(ctx, ROLE, temperature=ctx.evaluate_temperature)
    prompt = P.render(P.SCORE_VOTE, state=task["id"], question=task["question"],
                      chain=render_chain(task["chain"]))
    scores = []
    for vote in await llm.structured_samples(prompt, ScoreVote, ctx.score_samples):
        if isinstance(vote, LLMError):
            llm.failed(vote, f"the vote scores {task['id']} 0")
            scores.append(0.0)
        else:
            scores.append(min(1.0, max(0.0, float(vote.score))))
    return {"scores": {task["id"]: scores}, **accounting(llm)}


def rank_by_scores(candidates: list[str], scores: dict[str, list[float]]) -> list[tuple[str, int, float]]:
    """``V(p, S)(s) = Σ 1[s = s*]``: per vote round the best-scored state wins a vote (tied states each win
    it); ranked by votes, then by mean score, then by the candidates' order. Returns ``(state, votes, mean
    score)``."""
    rounds = max((len(scores.get(c, [])) for c in candidates), default=0)
    votes = dict.fromkeys(candidates, 0)
    for r in range(rounds):
        scored = [(scores[c][r], c) for c in candidates if len(scores.get(c, [])) > r]
        if scored:
            best = max(s for s, _ in scored)
            for s, c in scored:
                if s == best:  # a tie is shared: every best-scored state wins the round
                    votes[c] += 1
    means = {c: sum(scores.get(c, [])) / len(scores[c]) if scores.get(c) else 0.0 for c in candidates}
    position = {c: i for i, c in enumerate(candidates)}
    ranked = sorted(candidates, key=lambda c: (-votes[c], -means[c], position[c]))
    return [(c, votes[c], round(means[c], 4)) for c in ranked]


async def select_states(state: GroundedState, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """Keep the ``t`` best states of this depth (eq. 2), best first: the Selection vote or the Score ranking
    (also when no more than ``t`` candidates are left: their order decides whose Finish ends the search); CoT
    keeps its one chain. Kept states that finished become final states; the others are expanded next. When
    every candidate of the depth failed for good, the states kept at the depth before stay the frontier and
    the search ends."""
    ctx = grounded_context_of(runtime)
    _, keep = ctx.width
    depth = state.get("depth", 0) + 1
    candidates = candidates_of(state)
    thoughts = state.get("thoughts") or {}
    llm = LLMCaller(ctx, ROLE, temperature=ctx.evaluate_temperature)  # the selection vote's, if there is one
    evaluator = "chain" if ctx.strategy == "cot" else ctx.evaluator
    if not candidates:
        selection = Selection(depth=depth, evaluator=evaluator, candidates=[], kept=[],
                               reason="every candidate failed: the search ends with the states kept before")
        return {"depth": depth, "failed_depth": depth, "selections": [selection]}
    updates: dict[str, Thought] = {}
    if ctx.strategy == "cot" or len(candidates) == 1:
        kept = candidates[:keep]
        reason = "one chain" if ctx.strategy == "cot" else "one candidate: no evaluation needed"
    elif ctx.evaluator == "score":
        ranked = rank_by_scores(candidates, state.get("scores") or {})
        kept = [c for c, _, _ in ranked[:keep]]
        for c, votes, mean in ranked:
            updates[c] = Thought(score=mean, votes=votes)
        reason = "; ".join(f"{c}: {v} vote(s), mean score {m}" for c, v, m in ranked)
    elif ctx.selection == "vote":
        counts, reason = await _best_choice_votes(state, llm, candidates, depth, ctx.vote_samples)
        kept = sorted(candidates, key=lambda c: -counts[c])[:keep]  # stable: ties in candidate order
        for c in candidates:
            updates[c] = Thought(votes=counts[c])
    else:
        kept, reason = await _selection_vote(state, llm, candidates, keep, depth)
    for c in candidates:
        updates[c] = {**updates.get(c, {}), "kept": c in kept}
    finals = [c for c in kept if thoughts.get(c, {}).get("finished")]
    selection = Selection(depth=depth, evaluator=evaluator, candidates=candidates, kept=kept, reason=reason)
    return {"depth": depth, "frontier": kept, "finals": finals, "thoughts": updates,
            "selections": [selection], **accounting(llm)}


def _choices(state: GroundedState, candidates: list[str]) -> str:
    thoughts = state.get("thoughts") or {}
    return "\n\n".join(f"Choice {i}:\n{render_chain(chain_of(thoughts, c))}"
                       for i, c in enumerate(candidates, 1))


async def _selection_vote(state: GroundedState, llm: LLMCaller, candidates: list[str], keep: int,
                          depth: int) -> tuple[list[str], str]:
    """Selection by ``rank``: one call names the ``keep`` most promising choices, best first."""
    prompt = P.render(P.SELECTION_VOTE, depth=depth, keep=keep, question=state["question"],
                      choices=_choices(state, candidates))
    vote = await _structured(llm, prompt, SelectionVote, "the candidates are kept in BFS order")
    picked = [candidates[i - 1] for i in (vote.best if vote else []) if 1 <= i <= len(candidates)]
    picked = list(dict.fromkeys(picked))
    filled = picked + [c for c in candidates if c not in picked]  # an incomplete vote is filled in BFS order
    reason = (vote.analysis[:1000] if vote else "no usable selection vote: kept in BFS order")
    return filled[:keep], reason


async def _best_choice_votes(state: GroundedState, llm: LLMCaller, candidates: list[str], depth: int,
                             samples: int) -> tuple[dict[str, int], str]:
    """Selection by ``vote`` (ToT's vote): ``samples`` votes, each for the one best choice; the votes per
    candidate. A vote that failed for good or names no choice is not counted."""
    prompt = P.render(P.SELECTION_BEST, depth=depth, question=state["question"],
                      choices=_choices(state, candidates))
    counts = dict.fromkeys(candidates, 0)
    analyses = []
    for vote in await llm.structured_samples(prompt, BestChoice, samples):
        if isinstance(vote, LLMError):
            llm.failed(vote, "the vote is not counted")
        elif 1 <= vote.best <= len(candidates):
            counts[candidates[vote.best - 1]] += 1
            analyses.append(vote.analysis)
    tally = ", ".join(f"{c}: {n}" for c, n in counts.items())
    if not analyses:
        return counts, f"no usable vote of {samples}: kept in BFS order"
    return counts, f"{len(analyses)} of {samples} vote(s) counted ({tally}); {analyses[0][:800]}"


def route_after_select(state: GroundedState, ctx: GroundedContext) -> bool:
    """True when the search goes on: no depth failed entirely, the depth limit is not reached, some kept state
    is unfinished, and (unless ``stop_at_best_final`` is off) the best kept state has not finished."""
    thoughts = state.get("thoughts") or {}
    frontier = state.get("frontier") or []
    open_states = [s for s in frontier if not thoughts.get(s, {}).get("finished")]
    if state.get("failed_depth") or not open_states or state.get("depth", 0) >= ctx.depth_limit:
        return False
    return not (ctx.stop_at_best_final and thoughts.get(frontier[0], {}).get("finished"))
