"""The paper's protocol as settings (and the ``paper-*`` presets that turn them on): ToT's best-choice vote, ...
Each test drives the real graph and store with a scripted model."""

from __future__ import annotations

import json
import re

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.cli.grounded import gold_path_steps
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.grbench import QUESTIONS_DIR, fixture_graph, fixture_questions
from kgagents.graphs.grounded import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.grounded import GroundedContext, evaluate, generate
from kgagents.nodes.llm import LLMCaller
from kgagents.prompts.grounded_domains import DOMAINS, domain_of_types
from kgagents.tools.graph_functions import parse_actions
from kgagents.tools.pgraph import open_graph
from kgagents.tools.pgraph.build import GraphBuilder
from tests.grounded.conftest import step, thought
from tests.grounded.test_graph import explore, run

GOLD = "Ann Lee, Bo Chen"


def _call(name: str, **args) -> list[dict]:
    return [{"name": name, "args": args}]


# --------------------------------------------------------------------------------------------------------------
# Selection as ToT's vote
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_selection_by_vote_keeps_the_states_with_most_votes(academic):
    steps = [
        step(r"\[stage: agent thought, step 1, candidate 1 ", content="Look at the venue."),
        step(r"\[stage: agent thought, step 1, candidate 2 ", content="Find the paper."),
        step(r"\[stage: agent thought, step 1, candidate 3 ", content="Look at an author."),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at the venue",
             tool_calls=_call("RetrieveNode", keyword="KDD")),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Find the paper", tool_calls=_call("RetrieveNode",
                                                                                          keyword="Deep Graphs")),
        step(r"\[stage: agent action, step 1\b.*Thought 1: Look at an author", tool_calls=_call("RetrieveNode",
                                                                                             keyword="Ann Lee")),
        # five votes: choice 2 twice, choice 3 twice, choice 1 once; one reply names no choice
        step(r"\[stage: selection vote, depth 1\]", times=2, structured={"analysis": "2 found it", "best": 2}),
        step(r"\[stage: selection vote, depth 1\]", times=1,
             structured={"analysis": "3", "best": "The best choice is 3"}),
        step(r"\[stage: selection vote, depth 1\]", times=1, structured={"analysis": "none", "best": 7}),
        step(r"\[stage: selection vote, depth 1\]", times=1, structured={"analysis": "3 again", "best": [3]}),
        step(r"\[stage: agent thought, step 2\b", times=0, content="Finish."),
        step(r"\[stage: agent action, step 2\b.*node is p1", times=0, tool_calls=_call("Finish", answer=GOLD)),
        step(r"\[stage: agent action, step 2\b", times=0, tool_calls=_call("Finish", answer="KDD")),
        step(r"\[stage: selection vote, depth 2\]", times=0, structured={"analysis": "the paper's", "best": 1}),
    ]
    state, model, _ = await run(academic, steps, strategy="tot", branching=3, keep=2, selection="vote",
                                vote_samples=5)
    depth1 = state["selections"][0]
    assert depth1["kept"] == ["t0.2", "t0.3"]  # 2 votes each (ties in candidate order), t0.1 has none
    assert "4 of 5 vote(s) counted" in depth1["reason"]
    assert {c: state["thoughts"][c]["votes"] for c in ("t0.1", "t0.2", "t0.3")} == {"t0.1": 0, "t0.2": 2, "t0.3": 2}
    vote = next(c for c in model.calls if "[stage: selection vote, depth 1]" in c)
    assert "The best choice is s" in vote and "Choice 2:\nThought 1: Find the paper." in vote
    assert sum("[stage: selection vote, depth 1]" in c for c in model.calls) == 5
    assert state["final_answer"] == GOLD and state["best"] == "t0.2.1"


# --------------------------------------------------------------------------------------------------------------
# Text actions (Graph-CoT's protocol)
# --------------------------------------------------------------------------------------------------------------
def text_action(step_no: int, text: str, *, times: int = 1) -> dict:
    return step(rf"\[stage: agent action, step {step_no}\b", times=times, content=text)


async def test_text_actions_several_per_step(academic):
    steps = [
        thought(1, "I need the paper node first."), text_action(1, "Action 1: RetrieveNode[Deep Graphs]"),
        thought(2, "Its authors."), text_action(2, "NeighbourCheck[p1, author]\nObservation 2: (made up)"),
        thought(3, "Their names."), text_action(3, "NodeFeature[a1, name], NodeFeature[a2, name]"),
        thought(4, "Done."), text_action(4, "Finish[Ann Lee, Bo Chen]"),
    ]
    state, model, _ = await run(academic, steps, action_format="text")
    assert state["final_answer"] == GOLD and state["exit_reason"] == "finished"
    chain = [state["thoughts"][t] for t in ("t0.1", "t0.1.1", "t0.1.1.1")]
    assert chain[1]["actions"] == [{"name": "NeighbourCheck", "args": {"node_id": "p1", "neighbor_type": "author"},
                                    "observation": 'The author neighbors of p1 are: ["a1", "a2"].', "ok": True}]
    assert [a["observation"] for a in chain[2]["actions"]] == ["The name feature of a1 is: Ann Lee.",
                                                              "The name feature of a2 is: Bo Chen."]
    action_prompt = model.calls[1]
    assert "Write Action 1:" in action_prompt and "Function[arguments]" in action_prompt
    assert "Action 3: NodeFeature[a1, name], NodeFeature[a2, name]\nObservation 3.1: The name feature of a1 is: " \
        "Ann Lee.\nObservation 3.2: The name" in model.calls[-1]


async def test_malformed_text_actions_become_clear_observations(academic):
    steps = [
        thought(1, "Try things."),
        text_action(1, "NodeFeature[p1], Fly[moon], NeighbourCheck[p1, editor], RetrieveNode[Deep Graphs"),
        thought(2, "Think aloud."), text_action(2, "I should look up the paper."),
        thought(3, "Finish."), text_action(3, "Finish[nobody]"),
    ]
    state, model, _ = await run(academic, steps, action_format="text")
    first = state["thoughts"]["t0.1"]["actions"]
    assert [a["observation"] for a in first] == [
        "NodeFeature takes 2 arguments: write NodeFeature[node_id, feature], e.g. NodeFeature[p_12, title].",
        ("Invalid action 'Fly'. Valid actions are RetrieveNode[keyword], NodeFeature[node_id, feature], "
        "NeighbourCheck[node_id, neighbor_type], NodeDegree[node_id, neighbor_type] and Finish[answer]."),
        "Node p1 has no 'editor' neighbours; its neighbour types are: author, venue.",
        "RetrieveNode[...] has no closing bracket: write RetrieveNode[arguments]."]
    assert not any(a["ok"] for a in first)
    second = state["thoughts"]["t0.1.1"]["actions"][0]
    assert second["observation"].startswith("Invalid action: no Function[arguments] was found in 'I should look up")
    assert ("Action 1: NodeFeature[p1], Fly[moon], NeighbourCheck[p1, editor], RetrieveNode[Deep Graphs"
            in model.calls[2])
    assert "Action 2: I should look up the paper." in model.calls[4]
    assert state["final_answer"] == "nobody"


# --------------------------------------------------------------------------------------------------------------
# At the step limit
# --------------------------------------------------------------------------------------------------------------
async def test_at_the_step_limit_the_paper_protocol_answers_nothing(academic):
    steps = [thought(i, f"Looking around {i}.") for i in (1, 2)] + [
        text_action(1, "RetrieveNode[KDD]"), text_action(2, "NodeDegree[v1, paper]"),
        step(r"\[stage: final answer\]", structured={"answer": "2 papers"})]
    state, model, _ = await run(academic, steps, max_steps=2, action_format="text", answer_at_limit=False)
    assert state["answer"] == "" and state["final_answer"] == "No solution found"
    assert state["exit_reason"] == "reached the step limit (no answer: answer_at_limit is off)"
    assert not any("[stage: final answer]" in c for c in model.calls) and len(model.calls) == 4

    from kgagents.evals.grbench import error_type, given_answer
    assert given_answer(state) == "" and error_type(False, "Bo Chen", state) == "reached the step limit"
    forced, model, _ = await run(academic, steps, max_steps=2, action_format="text")
    assert forced["final_answer"] == forced["answer"] == "2 papers" and "[stage: final answer]" in model.calls[-1]


# --------------------------------------------------------------------------------------------------------------
# Per-domain examples and definitions
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fixture_domain, expected", [("dblp", "dblp"), ("maple/Physics", "maple"),
                                                      ("goodreads", "goodreads"), ("amazon", "amazon"),
                                                      ("biomedical", "biomedical")])
def test_the_domain_of_each_grbench_graph(fixture_domain, expected):
    graph = open_graph(str(fixture_graph(fixture_domain)))
    assert domain_of_types(graph.type_features()) == expected


def test_the_domain_of_other_graphs():
    legal = {"opinion": ["plain_text"], "opinion_cluster": ["syllabus"], "docket": ["case_name"],
             "court": ["full_name"]}
    assert domain_of_types(legal) == "legal"
    assert domain_of_types({"paper": ["title", "label"], "author": ["name"], "venue": ["name"]}) == "maple"
    assert domain_of_types({"person": ["name"], "city": ["name"]}) == "generic"


_OBSERVATION = re.compile(r"Observation \d+(\.\d+)?: (The ID of this retrieval target node is \S+\.|The \S+( \S+)? "
                          r"neighbors of \S+ are: \[.*\]\.|The \w+ feature of \S+ is: .+\.|"
                          r"The \S+( \S+)? neighbor node degree of \S+ is: \d+\.)$")


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_each_domain_s_examples_are_written_as_the_functions_answer(domain):
    """Every example action parses, and every observation is written as kgagents.tools.graph_functions writes it."""
    text = DOMAINS[domain].agent_examples
    actions = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Action ")]
    assert actions and all(a.error is None for line in actions for a in parse_actions(line))
    observations = [line for line in text.splitlines() if line.startswith("Observation ")]
    assert observations and [o for o in observations if not _OBSERVATION.match(o)] == []
    assert text.count("Question:") >= 2 and "Finish[" in text


def test_the_examples_show_no_grbench_question():
    questions = [json.loads(line)["question"].lower() for path in sorted(QUESTIONS_DIR.glob("*.jsonl"))
                 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    entities = {r["entity"].lower() for r in fixture_questions()}
    for domain, prompts in DOMAINS.items():
        text = (prompts.agent_examples + prompts.explore_examples).lower()
        named = re.findall(r'"([^"]{8,})"', text)  # the entities the examples' questions name
        assert named, domain
        for name in named:
            assert not any(name in question for question in questions), (domain, name)
        assert not [e for e in entities if len(e) > 12 and e in text], domain


@pytest.mark.slow
async def test_the_prompts_show_the_domain_s_examples_and_definition(tmp_path):
    row = next(r for r in fixture_questions("goodreads") if r["qid"] == "10")
    source = str(fixture_graph("goodreads"))
    steps = gold_path_steps(row, open_graph(source))
    for definition_source, shown in (("schema", "book -[author]-> author"),
                                     ("domain", "Node types: book, author, publisher, series.")):
        model = ScriptedChatModel(steps=steps)
        context = GroundedContext(model=model, definition_source=definition_source)
        state = await final_state(
            compile_graph(InMemorySaver()),
            {"question": row["question"], "graph": source}, {"configurable": {"thread_id": definition_source}},
            context=context)
        assert state["domain"] == "goodreads" and state["final_answer"] == row["answer"]
        assert shown in model.calls[0] and "The Lantern Keeper's Daughter" in model.calls[0]
        assert "Graph Reasoning at Scale" not in model.calls[0]
    model = ScriptedChatModel(steps=steps)
    state = await final_state(
        compile_graph(InMemorySaver()),
        {"question": row["question"], "graph": source}, {"configurable": {"thread_id": "g"}},
        context=GroundedContext(model=model, domain="generic"))
    assert "Graph Reasoning at Scale" in model.calls[0] and state["domain"] == "generic"


# --------------------------------------------------------------------------------------------------------------
# Exploration as Algorithm 1
# --------------------------------------------------------------------------------------------------------------
EXPLORE_AUTHORS = [
    explore("search thought", content="I need the paper Deep Graphs and its authors."),
    explore("entity extraction", structured={"entities": ["Deep Graphs"]}),
    explore("search attributes", structured={"attributes": []}),
    explore("prune relations", structured={"relations": ["author"]}),
    explore("prune entities", structured={"entities": ["Ann Lee", "Bo Chen"]}),
    explore("search end", structured={"sufficient": True}),
    explore("final answer", structured={"answer": GOLD}),
]


def _offered(state: dict, thought_id: str = "t0.1") -> list[str]:
    return next(d for d in state["thoughts"][thought_id]["decisions"] if d["stage"] == "relations")["offered"]


async def test_no_reverse_duplicates_where_the_graph_lists_both_directions(academic, tmp_path):
    state, _, _ = await run(academic, EXPLORE_AUTHORS, interaction="explore")
    assert _offered(state) == ["author", "venue"] and state["final_answer"] == GOLD
    state, _, _ = await run(academic, EXPLORE_AUTHORS, interaction="explore", reverse_relations="always")
    assert _offered(state) == ["author", "venue", "paper (reverse)"]
    # a graph that lists its edges one way only: incoming relations stay on offer, marked reverse
    b = GraphBuilder(tmp_path / "one-way")
    b.add_node("p1", type="paper", name="Deep Graphs")
    b.add_node("a1", type="author", name="Ann Lee")
    b.add_node("v1", type="venue", name="KDD")
    b.add_edge("a1", "wrote", "p1")
    b.add_edge("p1", "venue", "v1")
    b.finish(name="one-way", fingerprint="0e" * 8, source={"path": "test"})
    state, _, _ = await run(str(tmp_path / "one-way"), EXPLORE_AUTHORS, interaction="explore")
    assert _offered(state) == ["venue", "wrote (reverse)"]


async def test_exploration_decisions_at_the_context_temperature_candidates_at_the_candidate_one(academic,
                                                                                                monkeypatch):
    seen: list[tuple[str, float | None]] = []

    class Recording(LLMCaller):
        async def text(self, prompt, **kw):
            seen.append((prompt.stage, self.temperature))
            return await super().text(prompt, **kw)

        async def structured(self, prompt, schema, **kw):
            seen.append((prompt.stage, self.temperature))
            return await super().structured(prompt, schema, **kw)

    monkeypatch.setattr(generate, "LLMCaller", Recording)  # candidate steps and their grounding
    monkeypatch.setattr(evaluate, "LLMCaller", Recording)  # the selection vote
    steps = [*EXPLORE_AUTHORS, explore("selection vote", structured={"analysis": "", "best": 1})]
    await run(academic, steps, interaction="explore", strategy="tot", branching=2, keep=1, temperature=0.1,
              candidate_temperature=0.9)
    by_stage: dict[str, set] = {}
    for stage, temperature in seen:
        by_stage.setdefault(stage.split(",")[0], set()).add(temperature)
    assert by_stage["search thought"] == {0.9}
    for decision in ("entity extraction", "prune relations", "prune entities", "search end"):
        assert by_stage[decision] == {None}, decision  # None: the context's temperature (0.1)


# --------------------------------------------------------------------------------------------------------------
# GoT: merges of divergent branches, grounded like steps
# --------------------------------------------------------------------------------------------------------------
async def test_a_merged_thought_is_grounded_by_graph_exploration(academic):
    """Both candidates explore Deep Graphs (its venue, KDD); the merged thought names KDD, which exploration then
    explores (an entity the chains had seen but not visited)."""
    steps = [
        explore("search thought", content="Find Deep Graphs."),
        explore("merge thoughts",
                content="Next thought: KDD published Deep Graphs; which other papers did it publish?"),
        explore("entity extraction", context="other papers", structured={"entities": ["KDD"]}),
        explore("entity extraction", structured={"entities": ["Deep Graphs"]}),
        explore("search attributes", structured={"attributes": []}),
        explore("prune relations", context="<head_entity>KDD", structured={"relations": ["paper"]}),
        explore("prune relations", structured={"relations": ["venue"]}),
        explore("prune entities", context="<relation>paper", structured={"entities": ["Shallow Nets"]}),
        explore("prune entities", structured={"entities": ["KDD"]}),
        explore("search end", structured={"sufficient": True}),
        explore("selection vote", structured={"analysis": "the merge", "best": 3}),
        explore("final answer", structured={"answer": "Shallow Nets"}),
    ]
    state, model, _ = await run(academic, steps, interaction="explore", strategy="got", branching=2, keep=1)
    merge = state["thoughts"]["m1.1"]
    assert merge["parents"] == ["t0.1", "t0.2"] and merge["thought"].startswith("KDD published Deep Graphs")
    assert merge["linked"] == {"KDD": "v1"} and merge["visited"] == ["v1"]
    assert merge["triples"] == [["KDD", "paper", "Shallow Nets"]]
    assert merge["finished"] and state["best"] == "m1.1" and state["final_answer"] == "Shallow Nets"
    assert "Triple: KDD -> paper -> Shallow Nets" in model.calls[-1]


# --------------------------------------------------------------------------------------------------------------
# The retriever: the embedder by name, an exact index
# --------------------------------------------------------------------------------------------------------------
def test_the_embedder_is_chosen_by_name():
    from kgagents.graphs.grounded import PAPER_PROTOCOL
    from kgagents.tools.pgraph.embeddings import LazyEmbedder
    from kgagents.tools.pgraph.vectors import DEFAULT_MODEL_ID, model_id_of

    for name in (None, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        ctx = GroundedContext(embedding_model=name)
        assert ctx.embedder() is None and model_id_of(ctx.embedder()) == DEFAULT_MODEL_ID  # the packaged model
    paper = GroundedContext(embedding_model=PAPER_PROTOCOL["embedding_model"]).embedder()
    assert isinstance(paper, LazyEmbedder) and paper.model == "sentence-transformers/all-mpnet-base-v2"
    assert model_id_of(paper) == "sentence-transformers_all-mpnet-base-v2"
    assert GroundedContext().vector_index == "exact" == PAPER_PROTOCOL["vector_index"]


async def test_a_named_embedder_serves_node_search(academic):
    """The packaged model by its name: RetrieveNode's nearest-name search (no exact match) finds the paper."""
    steps = [thought(1, "Find the paper."), text_action(1, "RetrieveNode[deep graph paper]"),
             thought(2, "Done."), text_action(2, "Finish[p1]")]
    state, _, _ = await run(academic, steps, action_format="text", embedding_model="all-MiniLM-L6-v2")
    assert state["thoughts"]["t0.1"]["actions"][0]["observation"] == "The ID of this retrieval target node is p1."
    assert state["final_answer"] == "p1"


async def test_an_embedder_that_cannot_be_loaded_is_a_clear_error_at_the_start(academic, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match=r"cannot be loaded.*needs the network.*embedding_model=all-MiniLM-L6-v2") as e:
        await run(academic, [], embedding_model="sentence-transformers/no-such-embedder-here")
    assert "no-such-embedder-here" in str(e.value)


# --------------------------------------------------------------------------------------------------------------
# Baselines as the paper's
# --------------------------------------------------------------------------------------------------------------
async def test_base_asks_for_the_answer_only(tmp_path):
    from kgagents.graphs.workflows import load_workflow

    model = ScriptedChatModel(steps=[step(r"\[stage: zero-shot answer\]", content=" Yang Yang ")])
    graph = load_workflow("base").compile_graph(InMemorySaver())
    state = await final_state(
        graph,
        {"question": "Who wrote X?", "graph": "ignored"}, {"configurable": {"thread_id": "b"}},
        context={"model": model})
    assert state["answer"] == state["final_answer"] == "Yang Yang"
    prompt = model.calls[0]
    assert "Reply with the answer\nonly" in prompt and "<question>Who wrote X?</question>" in prompt
    assert "<context>" not in prompt and "FINAL ANSWER" not in prompt


@pytest.mark.slow
async def test_rag_retrieves_over_names_by_default_and_over_texts_when_asked():
    from kgagents.graphs.workflows import load_workflow
    from kgagents.nodes.kg_rag import KGRagContext

    row = next(r for r in fixture_questions("dblp") if r["qid"] == "0")
    source = str(fixture_graph("dblp"))
    for field in ("name", "text"):
        model = ScriptedChatModel(steps=[step(r"\[stage: rag answer\]", content="someone")])
        ctx = KGRagContext(model=model) if field == "name" else KGRagContext(model=model, rag_field="text")
        assert ctx.vector_index == "exact"
        state = await final_state(
            load_workflow("graph-rag").compile_graph(InMemorySaver()),
            {"question": row["question"], "graph": source}, {"configurable": {"thread_id": field}}, context=ctx)
        assert state["retrieved"] == [row["start"]], field  # the paper the question names
    assert KGRagContext().rag_field == "name"


# --------------------------------------------------------------------------------------------------------------
# The presets
# --------------------------------------------------------------------------------------------------------------
def test_every_row_has_a_paper_preset_with_the_protocol():
    from kgagents.graphs.grounded import PAPER_PROTOCOL, PRESETS, ROWS
    from kgagents.graphs.workflows import load_workflow, make_context, preset

    assert set(PRESETS) == set(ROWS) | {f"paper-{row}" for row in ROWS} and len(ROWS) == 10
    for row, values in ROWS.items():
        ctx = make_context(load_workflow("grounded"), preset("grounded", f"paper-{row}"))
        assert {k: getattr(ctx, k) for k in values} == values
        assert {k: getattr(ctx, k) for k in PAPER_PROTOCOL} == PAPER_PROTOCOL
    assert PAPER_PROTOCOL["selection"] == "vote" and PAPER_PROTOCOL["vote_samples"] > 1
    assert PAPER_PROTOCOL["action_format"] == "text" and PAPER_PROTOCOL["answer_at_limit"] is False
    assert PAPER_PROTOCOL["definition_source"] == "domain" and GroundedContext().domain == "auto"


def test_retrieve_node_by_embedding_alone_as_graph_cot(academic):
    from kgagents.tools.graph_functions import GraphFunctions

    class Counting:
        model_id = "counting-grounded"

        def __init__(self):
            self.texts = []

        def encode(self, texts):
            import numpy as np

            self.texts += list(texts)
            return np.asarray([[1.0 + ("Deep" in t), 1.0] for t in texts], dtype="float32")

    graph = open_graph(academic)
    exact_first, embedding = Counting(), Counting()
    found = GraphFunctions(graph, embedder=exact_first).retrieve_node("Deep Graphs")
    assert found.text == "The ID of this retrieval target node is p1." and exact_first.texts == []
    found = GraphFunctions(graph, embedder=embedding, retrieve_exact=False).retrieve_node("Deep Graphs")
    assert found.text == "The ID of this retrieval target node is p1." and "Deep Graphs" in embedding.texts
    assert GroundedContext().retrieve_exact is True
