"""Each workflow's model calls per item, for ``kgagents eval ... --estimate`` when no recorded run exists.

A :class:`CallStructure` lists the calls one item run makes, stage by stage: the prompt's fixed text (the
workflow's own templates, so that a longer prompt is a larger estimate), how many such calls a run makes on an
*assumed* typical path and at most (from the context's limits), and assumed sizes for what the call's fields add
(the KG so far, retrieved triples, pages, the chain of thoughts) and for the reply. The assumptions are written
beside each structure, and ``--estimate`` prints them: an estimate from structure is an order of magnitude, not a
measurement. Recorded runs of the workflow (any results directory) are always preferred
(:mod:`kgagents.evals.estimate`).

A workflow's spec names its structure (``Workflow.call_structure``); a workflow without one is estimated only from
recorded runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgagents.prompts import agent_g as AG
from kgagents.prompts import ark as ARK
from kgagents.prompts import baselines as BL
from kgagents.prompts import grounded as GR
from kgagents.prompts import kgot as KG

__all__ = ["Call", "CallStructure", "structure_of"]

#: Characters per token of English prompt text (the usual rule of thumb for BPE tokenizers).
CHARS_PER_TOKEN = 4


def tokens(chars: float) -> int:
    """Tokens of ``chars`` characters of text (:data:`CHARS_PER_TOKEN`)."""
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Call:
    """One kind of model call of an item run."""

    stage: str
    """What the call does (the workflow's stage)."""
    prompt: str
    """The fixed text the call sends (its templates; the question is added to it)."""
    expected: float
    """Calls per item run on the assumed typical path."""
    at_most: float | None
    """Calls per item run at the context's limits (``None``: the limits do not bound it)."""
    fields_tokens: int = 0
    """Assumed tokens the call's fields add beyond the question (KG state, triples, pages, history)."""
    output_tokens: int = 100
    """Assumed tokens of one reply."""
    choices: int = 1
    """Replies per request (samples drawn in one request)."""

    def input_tokens(self, question_chars: float) -> int:
        """Input tokens of one such call for a question of ``question_chars`` characters."""
        return tokens(len(self.prompt) + question_chars) + self.fields_tokens


@dataclass(frozen=True)
class CallStructure:
    """The calls of one item run, with the assumptions their counts and sizes rest on."""

    calls: list[Call]
    assumptions: list[str] = field(default_factory=list)


def _kgot(ctx: Any) -> CallStructure:
    limit = ctx.max_iterations
    iterations = min(3, limit)
    votes = ctx.num_next_steps_decision
    vote_requests = 1 if getattr(ctx, "samples_in_one_request", True) else votes
    kg_tokens = 150 * iterations  # the KG the prompts show grows by about this much per insert
    tool_tokens = tokens(ctx.tool_output_chars) // 2
    inserts, limit_inserts = iterations - 1, limit - 1
    return CallStructure([
        Call("next step (majority vote)", KG.NEXT_STEP, vote_requests * iterations, vote_requests * limit,
             fields_tokens=kg_tokens, output_tokens=200, choices=1 if vote_requests > 1 else votes),
        Call("merge reasons", KG.MERGE_REASONS, iterations, limit, fields_tokens=200 * votes // 2, output_tokens=200),
        Call("define tool calls", KG.DEFINE_TOOL_CALLS, inserts, limit_inserts, fields_tokens=kg_tokens + 400,
             output_tokens=200),
        Call("tool (LLM tool / surfer step)", "", inserts, None, fields_tokens=600, output_tokens=400),
        Call("write the KG", KG.WRITE_KG, inserts, limit_inserts * (1 + ctx.max_cypher_fixing_retry),
             fields_tokens=kg_tokens + tool_tokens, output_tokens=300),
        Call("retrieve (solve)", KG.RETRIEVE, 1, 1 + ctx.max_retrieve_query_retry, fields_tokens=kg_tokens,
             output_tokens=200),
        Call("need for math", KG.NEED_FOR_MATH, 1, 1, fields_tokens=kg_tokens // 2, output_tokens=50),
        Call("parse the solution", KG.PARSE_SOLUTION, 1, ctx.max_final_solution_parsing,
             fields_tokens=300, output_tokens=100),
    ], [f"{iterations} of at most {limit} iterations: {iterations - 1} insert(s), then solve",
        "one tool call per insert; a surfer's own steps are counted as one call and are not bounded here",
        "the KG grows by ~150 tokens per iteration; a tool's output fills half of tool_output_chars",
        "no parse or query retries on the expected path"])


def _fusion(ctx: Any) -> CallStructure:
    variants = len([v for v in (ctx.variants or "networkx:query,networkx:direct").split(",") if v.strip()])
    kgot = _kgot(ctx)
    calls = [Call(f"{c.stage} (x{variants} variants)", c.prompt, c.expected * variants,
                  None if c.at_most is None else c.at_most * variants, c.fields_tokens, c.output_tokens, c.choices)
             for c in kgot.calls]
    calls.append(Call("choose among tied answers", KG.CHOOSE_SOLUTION, 0, 1, fields_tokens=400 * variants,
                      output_tokens=30))
    return CallStructure(calls, [f"{variants} KGoT variants, each as one KGoT run", *kgot.assumptions,
                                 "no tie between the variants' answers on the expected path"])


def _ark(ctx: Any) -> CallStructure:
    steps = min(3, ctx.k_max)
    attempts = ctx.c_max
    system = ARK.SYSTEM + ARK.QUESTION
    summary = 60 * steps // 2  # the summary of the steps so far, on average over the run
    return CallStructure([
        Call("select anchor", system + ARK.SELECT_ANCHOR, steps, ctx.k_max * attempts, fields_tokens=summary,
             output_tokens=60),
        Call("select relation", system + ARK.SELECT_ANCHOR + ARK.RELATIONS + ARK.SELECT_RELATION, steps,
             ctx.k_max * attempts, fields_tokens=summary + 250, output_tokens=60),
        Call("reasoning", system + ARK.SELECT_ANCHOR + ARK.RELATIONS + ARK.SELECT_RELATION + ARK.TRIPLES
             + ARK.REASONING, steps, ctx.k_max * attempts, fields_tokens=summary + 250 + 500, output_tokens=200),
        Call("final answer", system + ARK.FINAL_ANSWER + ARK.ANSWER_ENTITY_LIST, 1, 1, fields_tokens=60 * steps,
             output_tokens=120),
    ], [f"{steps} of at most k_max = {ctx.k_max} reasoning steps, each valid at the first attempt "
        f"(at most c_max = {attempts} attempts per choice)",
        "a step's conversation shows ~250 tokens of relations and ~500 of triples"])


def _grounded_step(ctx: Any, chain_tokens: int) -> list[tuple[str, str, float, float | None, int, int]]:
    """The calls of one reasoning step: (stage, prompt, expected, at most, fields tokens, output tokens)."""
    if ctx.interaction == "agent":
        action = GR.AGENT_ACTION_TEXT if ctx.action_format == "text" else GR.AGENT_ACTION
        return [("agent thought", GR.AGENT_THOUGHT, 1, 1, chain_tokens, 80),
                ("agent action", action, 1, 1, chain_tokens + 40, 80)]
    entities, levels = 2, ctx.search_depth
    relations = entities * ctx.max_relations
    return [("search thought", GR.SEARCH_THOUGHT, 1, 1, chain_tokens, 80),
            ("entity extraction", GR.ENTITY_EXTRACTION, 1, 1, 40, 40),
            ("prune relations", GR.PRUNE_RELATIONS, entities * levels, None, 150, 60),
            ("prune entities", GR.PRUNE_ENTITIES, relations * levels, None, tokens(ctx.neighbours_shown * 20), 80),
            ("search attributes", GR.SEARCH_ATTRIBUTES, entities * levels, None, 150, 40),
            ("search end", GR.SEARCH_END, levels, levels, chain_tokens + 300, 40)]


def _grounded(ctx: Any) -> CallStructure:
    depth_limit = ctx.max_steps if ctx.strategy == "cot" or ctx.max_depth is None else ctx.max_depth
    depth = min(4, depth_limit)
    chain = tokens(ctx.observation_chars) // 2 * depth // 2  # the chain so far, on average over the run
    per_depth = 1 if ctx.strategy == "cot" else ctx.keep * ctx.branching
    first = 1 if ctx.strategy == "cot" else ctx.branching  # the root has one state to expand
    candidates = first + per_depth * (depth - 1)
    candidates_at_most = first + per_depth * (depth_limit - 1)
    calls = [Call(stage, prompt, n * candidates, None if most is None else most * candidates_at_most,
                  fields_tokens=fields, output_tokens=out)
             for stage, prompt, n, most, fields, out in _grounded_step(ctx, chain)]
    assumptions = [f"{depth} of at most {depth_limit} steps"
                   + ("" if ctx.strategy == "cot" else f", k = {ctx.branching} candidates of t = {ctx.keep} states")]
    if ctx.interaction == "explore":
        assumptions.append(f"exploration: 2 topic entities, {ctx.max_relations} relations each, over "
                           f"d = {ctx.search_depth} levels (the graph bounds the rest)")
    else:
        assumptions.append("an observation fills half of observation_chars")
    if ctx.strategy != "cot":
        levels, levels_at_most = depth, depth_limit
        if ctx.evaluator == "score":
            calls.append(Call("score vote", GR.SCORE_VOTE, ctx.score_samples * candidates,
                              ctx.score_samples * candidates_at_most, fields_tokens=chain, output_tokens=40))
        else:
            votes = ctx.vote_samples if ctx.selection == "vote" else 1
            prompt = GR.SELECTION_BEST if ctx.selection == "vote" else GR.SELECTION_VOTE
            calls.append(Call("selection vote", prompt, votes * levels, votes * levels_at_most,
                              fields_tokens=chain * ctx.branching, output_tokens=60))
        if ctx.strategy == "got":
            calls.append(Call("merge thoughts", GR.MERGE, candidates // 2, candidates_at_most // 2,
                              fields_tokens=chain * 2, output_tokens=120))
    calls.append(Call("final answer", GR.FINAL_ANSWER, 1, 1, fields_tokens=chain, output_tokens=60))
    return CallStructure(calls, assumptions)


def _references(ctx: Any) -> int:
    """Assumed tokens of one batch of Agent-G's references: pages (generation) or retrieved items (retrieval)."""
    return tokens(ctx.batch_size * ctx.page_chars) if ctx.task == "generation" else 30 * ctx.top_k


def _agent_g(ctx: Any) -> CallStructure:
    limit = ctx.max_iterations
    iterations = min(2, limit)
    generation = ctx.task == "generation"
    references = _references(ctx)
    agent_examples = AG.AGENT_EXAMPLES_GENERATION if generation else AG.AGENT_EXAMPLES_RETRIEVAL
    commentor_examples = AG.COMMENTOR_EXAMPLES_GENERATION if generation else AG.COMMENTOR_EXAMPLES_RETRIEVAL
    validator = AG.VALIDATOR_GENERATION if generation else AG.VALIDATOR_RETRIEVAL
    return CallStructure([
        Call("agent", AG.AGENT + agent_examples, iterations, limit, fields_tokens=150, output_tokens=120),
        Call("generator", AG.GENERATOR + AG.GENERATOR_EXAMPLE, iterations, limit, fields_tokens=references,
             output_tokens=80),
        Call("validator", validator, iterations, limit,
             fields_tokens=references if ctx.validator_context else 60, output_tokens=10),
        Call("commentor", AG.COMMENTOR + commentor_examples, iterations - 1, limit - 1, fields_tokens=200,
             output_tokens=120),
    ], [f"{iterations} of at most {limit} iterations (the first answer rejected once)",
        "references: " + (f"{ctx.batch_size} pages of page_chars" if generation else f"{ctx.top_k} retrieved items")])


def _one_call(prompt: str, fields: Callable[[Any], int], what: str) -> Callable[[Any], CallStructure]:
    def structure(ctx: Any) -> CallStructure:
        return CallStructure([Call("answer", prompt, 1, 1, fields_tokens=fields(ctx), output_tokens=100)],
                             [f"one call; {what}"])
    return structure


def _react(ctx: Any) -> CallStructure:
    steps = ctx.react_steps
    return CallStructure([Call("react step", AG.REACT_STEP + AG.REACT_EXAMPLES, min(3, steps), steps,
                               fields_tokens=300, output_tokens=120)],
                         [f"{min(3, steps)} of at most react_steps = {steps} steps, ~300 tokens of observations"])


def _corrective(ctx: Any) -> CallStructure:
    documents = ctx.batch_size
    return CallStructure([
        Call("retrieval evaluator", AG.CORRECTIVE_EVALUATOR, documents, documents,
             fields_tokens=tokens(ctx.page_chars), output_tokens=10),
        Call("generator", AG.GENERATOR + AG.GENERATOR_EXAMPLE, 1, 1,
             fields_tokens=tokens(documents * ctx.page_chars), output_tokens=80),
    ], [f"each of batch_size = {documents} documents graded, then one answer"])




#: workflow name -> its call structure (what ``Workflow.call_structure`` names).
STRUCTURES: dict[str, Callable[[Any], CallStructure]] = {
    "kgot": _kgot,
    "fusion": _fusion,
    "ark": _ark,
    "grounded": _grounded,
    "agent-g": _agent_g,
    "zeroshot": _one_call(BL.ZERO_SHOT, lambda ctx: 0, "the question alone"),
    "rag": _one_call(BL.RAG_ANSWER, lambda ctx: tokens(ctx.rag_top_k * ctx.embed_chars),
                     "rag_top_k chunks of embed_chars"),
    "base": _one_call(GR.ZERO_SHOT_ANSWER, lambda ctx: 0, "the question alone"),
    "text-rag": _one_call(GR.KG_RAG_ANSWER, lambda ctx: tokens(ctx.context_chars), "context_chars of context"),
    "graph-rag": _one_call(GR.KG_RAG_ANSWER, lambda ctx: tokens(ctx.context_chars), "context_chars of context"),
    "agent-g-cot": _one_call(AG.GENERATOR + AG.GENERATOR_EXAMPLE, lambda ctx: 0, "no references"),
    "agent-g-text-rag": _one_call(AG.GENERATOR + AG.GENERATOR_EXAMPLE, _references, "one batch of references"),
    "agent-g-graph-rag": _one_call(AG.GENERATOR + AG.GENERATOR_EXAMPLE, _references, "one batch of references"),
    "agent-g-hybrid-rag": _one_call(AG.GENERATOR + AG.GENERATOR_EXAMPLE, lambda ctx: 2 * _references(ctx),
                                    "a batch of references from each module"),
    "agent-g-corrective-rag": _corrective,
    "agent-g-react": _react,
}


def structure_of(workflow: str, context: Any) -> CallStructure | None:
    """The call structure of ``workflow`` under ``context`` (``None``: none is declared for it)."""
    structure = STRUCTURES.get(workflow)
    return None if structure is None else structure(context)
