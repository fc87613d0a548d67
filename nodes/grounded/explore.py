"""Grounding by automatic graph exploration (Figure 10, Algorithm 1): the thought, entity extraction and
linking, breadth-first search with attribute choice, relation pruning and neighbour pruning, and the End?
decision."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from kgagents.nodes.grounded.chains import _attributes_of, _candidate, _thoughts_of, _triples_of, _visited_of
from kgagents.nodes.grounded.context import GroundedContext
from kgagents.nodes.grounded.replies import (
    AttributeChoice,
    EndDecision,
    EntityChoice,
    EntityList,
    RelationChoice,
    _structured,
)
from kgagents.nodes.grounded.state import StepTask, Thought
from kgagents.nodes.llm import LLMCaller
from kgagents.prompts import grounded as P
from kgagents.prompts.grounded_domains import DOMAINS
from kgagents.tools.graph_functions import one_thought
from kgagents.tools.pgraph import StaticKG
from kgagents.tools.pgraph.vectors import index_kind


async def _search_thought(task: StepTask, ctx: GroundedContext, llm: LLMCaller) -> str:
    """Exploration's next thought (Figure 10) from the thoughts, triples and attributes so far."""
    chain = task["chain"]
    thought = (await llm.text(P.render(
        P.SEARCH_THOUGHT, step=len(chain) + 1, candidate=_candidate(task, ctx),
        examples=DOMAINS[task["domain"]].explore_examples, graph_definition=task["graph_definition"],
        question=task["question"], triples=_triples_of(chain), thoughts=_thoughts_of(chain),
        attributes=_attributes_of(chain))))
    return one_thought(thought)


async def _explore_search(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG,
                          record: Thought) -> None:
    """Entity extraction from the thought → graph search with relation and neighbour pruning → End? (Figure
    10, Algorithm 1)."""
    chain = task["chain"]
    thought = record.get("thought", "")
    text = thought if chain else f"{task['question']}\n{thought}"  # the first step also reads the question
    extracted = await _structured(llm, P.render(P.ENTITY_EXTRACTION, text=text), EntityList)
    entities = [e.strip() for e in (extracted.entities if extracted else []) if e.strip()]
    record["entities"] = entities
    embedder = ctx.embedder()
    linked: dict[str, str] = {}
    for entity in entities:
        node_id = await asyncio.to_thread(_link, graph, entity, embedder, index_kind(ctx.vector_index))
        if node_id is not None:
            linked[entity] = node_id
    record["linked"] = linked
    decisions: list[dict[str, Any]] = []
    triples: list[list[str]] = []
    attributes: list[str] = []
    visited = _visited_of(chain)
    seen = [n for n in dict.fromkeys(linked.values()) if n not in visited]
    explored: list[str] = []
    if not entities:
        record["observation"] = "No entities were found in the thought: nothing to explore."
    elif not linked:
        record["observation"] = "None of the entities was found in the graph: " + ", ".join(entities)
    for level in range(ctx.search_depth):
        frontier = [n for n in seen if n not in visited]
        if not frontier and level > 0:
            break
        visited.update(frontier)
        explored += frontier
        # Algorithm 1 prunes each entity of the frontier on its own: all of them at once, their findings taken
        # in the frontier's order (as one after the other would give them)
        found = await asyncio.gather(*(_explore_entity(task, ctx, llm, graph, node_id, level)
                                       for node_id in frontier))
        for new_nodes, new_triples, new_attributes, new_decisions in found:
            decisions += new_decisions
            triples += new_triples
            attributes += new_attributes
            seen += [n for n in new_nodes if n not in seen]
        so_far = [*chain, Thought(thought=thought, triples=triples, attributes=attributes)]
        end = await _structured(llm, P.render(P.SEARCH_END, question=task["question"],
                                              thoughts=_thoughts_of(so_far), triples=_triples_of(so_far),
                                              attributes=_attributes_of(so_far)), EndDecision)
        decisions.append({"stage": "end", "level": level + 1, "sufficient": bool(end and end.sufficient),
                          "reason": end.reason if end else "(no usable reply)"})
        if end is not None and end.sufficient:
            record["finished"] = True
            break
    record.update({"visited": explored, "triples": _unique(triples),
                   "attributes": list(dict.fromkeys(attributes)), "decisions": decisions})


def _unique(triples: list[list[str]]) -> list[list[str]]:
    return [list(t) for t in dict.fromkeys(tuple(t) for t in triples)]


def _link(graph: StaticKG, entity: str, embedder: Any, index: str | None = None) -> str | None:
    """The node an extracted entity names: an exact name, else an id, else the nearest name."""
    named = graph.nodes_named(entity)
    if named:
        return named[0].id
    if graph.has_node(entity):
        return entity
    near = graph.nearest_nodes(entity, 1, embedder=embedder, kind=index)
    return near[0][0] if near else None


async def _explore_entity(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG, node_id: str,
                          level: int) -> tuple[list[str], list[list[str]], list[str], list[dict[str, Any]]]:
    """Algorithm 1, lines 10–13 for one entity: its attributes, relation pruning, neighbour pruning, triples,
    and the decisions taken. The attribute choice and the relation pruning do not wait for each other, nor
    does the neighbour pruning of one relation for another's (their results are kept in the order of the
    listing)."""
    node = graph.node(node_id)
    if node is None:
        return [], [], [], []
    name = node.name
    features = await asyncio.to_thread(graph.features, node_id)
    (attributes, attribute_decisions), (new_nodes, triples, relation_decisions) = await asyncio.gather(
        _choose_attributes(task, llm, name, features, level),
        _follow_relations(task, ctx, llm, graph, node_id, name, level))
    return new_nodes, triples, attributes, attribute_decisions + relation_decisions


async def _choose_attributes(task: StepTask, llm: LLMCaller, name: str, features: dict[str, Any], level: int
                             ) -> tuple[list[str], list[dict[str, Any]]]:
    """The entity's attributes the model finds relevant (none offered: no call)."""
    shown = {k: v for k, v in features.items() if not (isinstance(v, str) and v == name)}
    if not shown:
        return [], []
    listing = "; ".join(f"{k}: {str(v)[:300]}" for k, v in shown.items())
    chosen = await _structured(llm, P.render(P.SEARCH_ATTRIBUTES, question=task["question"], entity=name,
                                             attributes=listing), AttributeChoice)
    keep = [a for a in (chosen.attributes if chosen else []) if a in shown]
    return ([f"{name} — {k}: {str(shown[k])[:500]}" for k in keep],
            [{"stage": "attributes", "level": level + 1, "entity": name, "offered": list(shown),
              "chosen": keep}])


async def _follow_relations(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG,
                            node_id: str, name: str, level: int
                            ) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    """Relation pruning, then the neighbour pruning of every relation kept: new nodes, triples, decisions."""
    offered = _relation_labels(graph, node_id, ctx.reverse_relations)
    if not offered:
        return [], [], [{"stage": "relations", "level": level + 1, "entity": name, "offered": [],
                         "chosen": []}]
    chosen_relations = await _structured(llm, P.render(P.PRUNE_RELATIONS, question=task["question"],
                                                       entity=name, relations="\n".join(offered),
                                                       limit=ctx.max_relations), RelationChoice)
    picked = [r for r in (chosen_relations.relations if chosen_relations else []) if r in offered]
    picked = picked[: ctx.max_relations]
    decisions = [{"stage": "relations", "level": level + 1, "entity": name, "offered": offered,
                  "chosen": picked}]
    new_nodes: list[str] = []
    triples: list[list[str]] = []
    pruned = await asyncio.gather(*(_prune_tails(task, ctx, llm, graph, node_id, name, label, level)
                                    for label in picked))
    for tails, decision in pruned:
        decisions.append(decision)
        for triple, tail_id in tails:
            triples.append(triple)
            new_nodes.append(tail_id)
    return new_nodes, triples, decisions


async def _prune_tails(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG, node_id: str,
                       name: str, label: str, level: int
                       ) -> tuple[list[tuple[list[str], str]], dict[str, Any]]:
    """The neighbours of one relation the model keeps: (triple, node id) each, and the decision."""
    relation, direction = _parse_label(label)
    tails = await asyncio.to_thread(graph.neighbours, node_id, relation, direction,
                                    limit=ctx.neighbours_shown)
    names = await asyncio.to_thread(_tail_labels, graph, list(dict.fromkeys(tails)))
    if not names:
        return [], {"stage": "entities", "level": level + 1, "entity": name, "relation": label, "offered": [],
                    "chosen": []}
    chosen = await _structured(llm, P.render(P.PRUNE_ENTITIES, question=task["question"], head_entity=name,
                                             relation=label, tail_entities="\n".join(names),
                                             limit=ctx.max_neighbours), EntityChoice)
    keep = _matching(chosen.entities if chosen else [], names)[: ctx.max_neighbours]
    decision = {"stage": "entities", "level": level + 1, "entity": name, "relation": label,
                "offered": list(names), "chosen": keep}
    return [([name, relation, tail] if direction == "out" else [tail, relation, name], names[tail])
            for tail in keep], decision


def _tail_labels(graph: StaticKG, tails: list[str]) -> dict[str, str]:
    """How tail nodes are offered to pruning: by name, with the id where two share a name; label → id."""
    nodes = [graph.node(t) for t in tails]
    counts: dict[str, int] = {}
    for node in nodes:
        if node is not None:
            counts[node.name] = counts.get(node.name, 0) + 1
    return {(n.name if counts[n.name] == 1 else f"{n.name} [{n.id}]"): n.id for n in nodes if n is not None}


def _matching(chosen: list[str], labels: dict[str, str]) -> list[str]:
    """The offered labels the model chose: exactly, or by the node's id, or case-insensitively."""
    by_id = {node_id: label for label, node_id in labels.items()}
    folded = {label.casefold(): label for label in labels}
    out: list[str] = []
    for text in chosen:
        label = text if text in labels else by_id.get(text) or folded.get(text.strip().casefold())
        if label is not None and label not in out:
            out.append(label)
    return out


_REVERSE = " (reverse)"


def _relation_labels(graph: StaticKG, node_id: str, reverse: str = "missing") -> list[str]:
    """The node's relations as offered to pruning: outgoing ones by name; incoming-only ones marked reverse
    where the graph does not list them the other way too (``reverse`` = ``missing``; ``always``: every
    one)."""
    out = graph.relations_of(node_id, "out")
    inbound = [r for r in graph.relations_of(node_id, "in") if r not in out]
    if reverse == "missing" and inbound:
        node_type = graph.node_type(node_id) or ""
        schema = graph.schema()
        inbound = [r for r in inbound if not _listed_both_ways(schema, r, node_type)]
    return [*out, *(r + _REVERSE for r in inbound)]


def _listed_both_ways(schema: list[tuple[str, str, str, int]], relation: str, node_type: str) -> bool:
    """Whether the graph lists the edges ``S -relation-> node_type`` the other way too, as GRBench lists every
    neighbour at both ends: for each such pattern some ``node_type -r-> S`` has at least as many edges (10 %
    short is tolerated: a dataset's lists may miss a few)."""
    into = [(head, count) for head, r, tail, count in schema if r == relation and tail == node_type]
    back: dict[str, int] = {}
    for head, _, tail, count in schema:
        if head == node_type:
            back[tail] = max(back.get(tail, 0), count)
    return bool(into) and all(back.get(head, 0) >= 0.9 * count for head, count in into)


def _parse_label(label: str) -> tuple[str, Literal["out", "in"]]:
    if label.endswith(_REVERSE):
        return label[: -len(_REVERSE)], "in"
    return label, "out"
