"""Agent-G on CRAG as the paper runs it: its three-way evaluator (``--scorer agent-g-paper``) beside CRAG's
own local evaluation, the generator's prompt without an added "I don't know" instruction, and the bugs that
made pages vanish, sent the text module back to its first batch, or turned short replies into error types."""

from __future__ import annotations

import json

import pytest

from kgagents.cli import main
from kgagents.core.scripted import ScriptedChatModel
from kgagents.evals.crag import ACCURATE, HALLUCINATION, MISSING, parse_paper_judgement
from kgagents.evals.datasets import Item, load_plugins
from kgagents.evals.scorers import make_scorer
from kgagents.graphs import agent_g_baselines as B
from kgagents.nodes.agent_g import AgentGContext, references_text
from kgagents.nodes.agent_g.critic import _match_error
from kgagents.nodes.retriever_bank import Reference, Retrieval
from kgagents.prompts import agent_g as P
from kgagents.tools.pgraph.build import GraphBuilder
from tests.agent_g.conftest import comment, decide, step, validate
from tests.agent_g.test_baselines import run as run_baseline
from tests.agent_g.test_graph import run

load_plugins()


def evaluator_step(prediction: str, reply: str) -> dict:
    return {"when": r"\[stage: agent-g evaluator\].*### Predicted Answer: " + prediction, "content": reply,
            "times": 0}


# --------------------------------------------------------------------------------------------------------------
# The paper's evaluator
# --------------------------------------------------------------------------------------------------------------
async def test_the_papers_three_way_evaluator():
    judge = ScriptedChatModel(steps=[evaluator_step("paris", "Accurate"), evaluator_step("lyon", "incorrect."),
                                     evaluator_step("I don't know", "Missing"),
                                     evaluator_step("marseille", "The prediction is inaccurate.")])
    scorer = make_scorer("agent-g-paper", grader_model=judge)
    item = Item(id="x", question="capital of france?", gold="Paris", meta={"alternative_answers": ["paree"]})
    grades = {p: (await scorer.score(item, p)).grade for p in ("paris", "lyon", "I don't know", "marseille")}
    assert grades == {"paris": ACCURATE, "lyon": HALLUCINATION, "I don't know": MISSING,
                      "marseille": HALLUCINATION}  # no rule first: even "I don't know" goes to the LLM
    assert len(judge.calls) == 4  # even the exact match is the LLM's to judge
    prompt = judge.calls[0]
    assert "### Question: capital of france?\n### True Answer: Paris\n### Predicted Answer: paris" in prompt
    assert "accurate, incorrect, or missing? The" in prompt and "paree" not in prompt  # one true answer
    assert parse_paper_judgement("INCORRECT") == "incorrect" and parse_paper_judgement("inaccurate") is None
    detail = (await scorer.score(item, "lyon")).details
    assert detail == {"rule": "agent-g evaluator", "judgement": "incorrect", "reply": "incorrect.",
                      "judge model": "scripted"}
    assert scorer.metrics([{"grade": ACCURATE}])["judge model"] == "scripted"


@pytest.mark.slow
def test_eval_with_the_papers_evaluator(tmp_path, capsys):
    from kgagents.tools.crag_api import CragMockServer

    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps({"steps": [decide(1, source="text documents", domain="encyclopedia", times=0),
                                           step(r"\[stage: generator", content="Final answer: Yes", times=0),
                                           validate("1", "yes", times=0)]}))
    judge = tmp_path / "judge.json"
    judge.write_text(json.dumps({"steps": [evaluator_step("Yes", "accurate")]}))
    out = tmp_path / "out"
    with CragMockServer() as kg:
        code = main(["eval", "agent-g", "--dataset", "crag", "--model", f"scripted:{agent}", "--grader-model",
                     f"scripted:{judge}", "--limit", "2", "--out", str(out), "--no-progress", "--no-report",
                     "--scorer", "agent-g-paper", "--set", f"crag_api_url={kg.url}"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "accuracy 1.0000" in printed.out and "judge model scripted:" in printed.out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["scorer"] == "agent-g-paper"
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert record["details"]["rule"] == "agent-g evaluator" and record["details"]["judgement"] == "accurate"
    assert main(["eval", "agent-g", "--dataset", "crag", "--scorer", "nosuch", "--model", "scripted:x"]) == 2
    assert "unknown scorer 'nosuch'" in capsys.readouterr().err


def test_a_scorer_of_its_own_gets_a_results_folder_of_its_own():
    from kgagents.cli.eval import default_out_name

    assert default_out_name("agent-g", "crag", "all", None) == "agent-g-crag-all"
    assert default_out_name("agent-g", "crag", "all", None, "agent-g-paper") == "agent-g-crag-all-agent-g-paper"


# --------------------------------------------------------------------------------------------------------------
# The generator's prompt
# --------------------------------------------------------------------------------------------------------------
PAGES = [{"name": f"Page {i}", "url": f"u{i}", "text": f"Maroon 5 fact {i}. " + "Maroon 5 is a band. " * 140
          + f"MARKER-{i}."} for i in range(5)]


@pytest.mark.slow
async def test_the_generator_reads_the_papers_prompt_and_the_whole_batch():
    steps = [decide(1, source="text documents"), step(r"\[stage: generator", content="Final answer: x", times=0),
             validate(1, "yes")]
    task = {"question": "who is in maroon 5?", "pages": PAGES}
    _, model, _ = await run(task, steps, task="generation")
    prompt = next(c for c in model.calls if "[stage: generator" in c)
    assert "I don't know" not in prompt  # the paper's generator prompt has no such instruction
    assert all(f"MARKER-{i}" in prompt for i in range(5))  # five pages of up to 3,000 characters, none cut
    validator = next(c for c in model.calls if "[stage: validator" in c)
    assert "MARKER-4" in validator
    _, model, _ = await run(task, steps, task="generation", generator_idk=True)
    assert 'If you do not know the answer, answer "I don\'t know".' in model.calls[1]


def test_the_references_budget_follows_the_batch():
    pages = [Reference(id=f"p{i}", text="x" * 2990 + f"END{i}", score=1.0, kind="page") for i in range(5)]
    text = references_text(Retrieval(module="text", references=pages), AgentGContext())
    assert all(f"END{i}" in text for i in range(5)) and "more characters cut" not in text
    seven = references_text(Retrieval(module="text", references=pages * 2), AgentGContext(batch_size=7))
    assert seven.count("END") == 7


# --------------------------------------------------------------------------------------------------------------
# Text + Graph RAG keeps both parts
# --------------------------------------------------------------------------------------------------------------
def star_graph(folder, spokes: int = 25) -> str:
    b = GraphBuilder(folder)
    b.add_node("hub", type="band", name="Maroon 5")
    for i in range(spokes):
        b.add_node(f"m{i}", type="song", name=f"Song {i}")
        b.add_edge("hub", "performed", f"m{i}")
    b.finish(name="star", fingerprint="st" * 8, source={"path": "test"})
    return str(folder)


@pytest.mark.slow
async def test_hybrid_rag_keeps_the_pages_beside_many_paths(tmp_path):
    steps = [decide(1, entities=[("Maroon 5", "band")], relations=["performed"]),
             step(r"\[stage: generator", content="Final answer: x", times=0)]
    _, model, _ = await run_baseline(B.hybrid_rag, {"question": "songs of maroon 5", "graph":
                                                        star_graph(tmp_path / "star"), "pages": PAGES}, steps)
    prompt = next(c for c in model.calls if "[stage: generator" in c)
    assert prompt.count("Maroon 5 → performed → Song") == 20  # the top 20 paths
    assert all(f"MARKER-{i}" in prompt for i in range(5))  # and the whole batch of pages after them


# --------------------------------------------------------------------------------------------------------------
# The text module keeps its place across a graph-module detour
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_the_next_batch_after_a_detour_to_the_graph(tmp_path):
    pages = [{"name": f"Page {i}", "url": f"u{i}", "text": f"Maroon 5 page {i}."} for i in range(12)]
    steps = [decide(1, source="text documents"), decide(2, source="text documents", next_batch=True),
             decide(3, entities=[("Maroon 5", "band")], relations=["performed"]),
             decide(4, source="text documents", next_batch=True),
             step(r"\[stage: generator", content="Final answer: x", times=0),
             validate(r"[123]", "no", times=0), validate(4, "yes"),
             comment(r"[123]", "incorrect retrieval module", times=0)]
    task = {"question": "who is in maroon 5?", "pages": pages, "graph": star_graph(tmp_path / "g", 3)}
    state, _, _ = await run(task, steps, task="generation", batch_size=5)
    batches = [(i["action"]["module"], i["action"].get("batch")) for i in state["iterations"]]
    assert batches == [("text", 0), ("text", 1), ("graph", None), ("text", 2)]  # not back to batch 0


@pytest.mark.slow
async def test_react_keeps_its_place_too(tmp_path):
    pages = [{"name": f"Page {i}", "url": f"u{i}", "text": f"Maroon 5 page {i}."} for i in range(12)]
    steps = [step(r"\[stage: react, step 1\]", structured={"action": "search_web"}),
             step(r"\[stage: react, step 2\]", structured={"action": "search_kg"}),
             step(r"\[stage: react, step 3\]", structured={"action": "search_web"}),
             step(r"\[stage: react, step 4\]", structured={"action": "finish", "answer": "x"})]
    task = {"question": "who is in maroon 5?", "pages": pages, "graph": star_graph(tmp_path / "g", 3)}
    state, _, _ = await run_baseline(B.react, task, steps, batch_size=5)
    assert [i["action"].get("batch") for i in state["iterations"][:3]] == [0, 0, 1]


# --------------------------------------------------------------------------------------------------------------
# Commentor replies and settings
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "expected"), [
    ("no", None), ("incorrect", None), ("Incorrect.", None), ("entity", None),
    ("Incorrect Entity/Relation.", "incorrect entity/relation"), ('"no intersection"', "no intersection"),
    ("The error is: no intersection between the ego-graphs", "no intersection"),
    ("missing entity (the venue)", "missing entity"), ("incorrect intersection", "incorrect intersection"),
    ("no intersection, or maybe a missing entity", None)])
def test_short_commentor_replies_are_no_error_type(reply, expected):
    assert _match_error(reply, P.ERROR_TYPES_RETRIEVAL) == expected


def test_generation_error_types_are_matched_whole():
    assert _match_error("incorrect question domain", P.ERROR_TYPES_GENERATION) == "incorrect question domain"
    assert _match_error("incorrect question", P.ERROR_TYPES_GENERATION) is None
    assert _match_error("Incorrect retrieval module: use the KG", P.ERROR_TYPES_GENERATION) == \
        "incorrect retrieval module"


def test_a_type_list_without_json_brackets_is_a_clear_error(prime, capsys):
    code = main(["ask", "Which drugs treat strongyloidiasis?", "--workflow", "agent-g", "--graph", prime, "--set",
                 "task=retrieval", "--set", "candidate_types=drug", "--model", "scripted:none"])
    err = capsys.readouterr().err
    assert code == 2 and "candidate_types must be a list of names" in err and "candidate_types=[" in err
    with pytest.raises(ValueError, match="entity_types must be a list of names"):
        AgentGContext(entity_types="author")
    assert AgentGContext(candidate_types=["paper"]).candidate_types == ["paper"]
