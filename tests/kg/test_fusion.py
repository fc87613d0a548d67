"""Fusion: several backend × solve-mode variants of one task at once, their answers combined."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.fusion import compile_graph
from kgagents.graphs.io import final_state
from kgagents.nodes.fusion import parse_variants
from kgagents.nodes.kgot import KGoTContext
from kgagents.prompts.kgot import LANGUAGES
from tests import kgot_script as S
from tests.kg.conftest import CODE
from tests.kg.helpers import QUESTION

LANGUAGE_OF = {"networkx": "python", "neo4j": "cypher", "falkordb": "cypher", "sparql": "sparql"}


def fusion_steps(direct_answer: str = "65") -> list[dict]:
    """A script every variant can follow: its KG writes and reads are chosen by the language the prompt names."""
    steps = [*S.votes("INSERT", 0, unless="SortedArray"),
             *S.votes("INSERT", 0, when_extra="SortedArray", unless="Label: Total"),
             *S.votes("RETRIEVE", 0, when_extra="Label: Total"), *S.merge(times=0),
             S.step(S.DEFINE_TOOLS, unless="SortedArray", times=0,
                    tool_calls=[{"name": "run_python_code",
                                 "args": {"code": "print(sorted([42, 23, 2, 88, 37, 15]))"}}]),
             S.step(S.DEFINE_TOOLS + ".*SortedArray", times=0,
                    tool_calls=[{"name": "run_python_code", "args": {"code": "print(23 + 42)"}}])]
    for language, code in CODE.items():
        name = LANGUAGES[language].name.replace("(", r"\(").replace(")", r"\)")
        steps += [S.step(rf"knowledge graph \({name}\).*<new_information>", unless="SortedArray", times=0,
                         structured={"code": code["write_array"]}),
                  S.step(rf"knowledge graph \({name}\).*SortedArray.*<new_information>", times=0,
                         structured={"code": code["write_total"]}),
                  S.step(rf"knowledge graph \({name}\)\. Write code that retrieves", times=0,
                         structured={"code": code["read_total"]})]
    steps += [S.step(S.DIRECT, times=0, structured={"solution": f"the total is {direct_answer} (direct)"}),
              *S.need_math(False, times=0),
              S.step(S.PARSE + r".*\(direct\)", times=0, structured={"final_answer": direct_answer}),
              S.step(S.PARSE, times=0, structured={"final_answer": "65"})]
    return steps


async def fuse(tmp_path, variants, steps, thread="fusion-1", **ctx):
    model = ScriptedChatModel(steps=steps)
    context = KGoTContext(model=model, work_dir=str(tmp_path / "work"), allow_weak_sandbox=True,
                          num_next_steps_decision=1, max_final_solution_parsing=1, **ctx)
    graph = compile_graph(InMemorySaver())
    state = await final_state(
        graph, {"question": QUESTION, "variants": variants},
        {"configurable": {"thread_id": thread}, "recursion_limit": 300}, context=context)
    return state, model


@pytest.mark.slow
async def test_variants_on_every_backend_agree(tmp_path, request, monkeypatch):
    falkordb = request.getfixturevalue("falkordb_server")
    monkeypatch.setenv("FALKORDB_URL", falkordb.url)
    variants = ["networkx:query", "networkx:direct", "falkordb:query", "falkordb:direct", "sparql:query"]
    state, model = await fuse(tmp_path, variants, fusion_steps())
    assert state["final_answer"] == "65" and state["tally"] == {"65": 5}
    assert sorted(r["variant"] for r in state["results"]) == sorted(variants)
    for result in state["results"]:
        assert result["error"] is None and result["final_answer"] == "65", result
        assert sorted(n["id"] for n in result["kg"]["nodes"]) == ["array", "sorted_array", "total"]
    assert state["usage"]["scripted"]["calls"] == len(model.calls)
    # each variant had its own KG, even on the same database
    from kgagents.tools.kg.falkordb_store import graph_name_for

    assert graph_name_for("fusion-1/falkordb:query") != graph_name_for("fusion-1/falkordb:direct")


@pytest.mark.slow
async def test_majority_wins_and_ties_go_to_the_llm(tmp_path):
    state, _ = await fuse(tmp_path, ["networkx:query", "networkx:direct", "sparql:query"], fusion_steps("64"))
    assert state["final_answer"] == "65" and state["tally"] == {"65": 2, "64": 1}
    assert {r["variant"]: r["final_answer"] for r in state["results"]}["networkx:direct"] == "64"

    steps = [*fusion_steps("64"), S.step(S.CHOOSE, structured={"index": 1})]
    state, model = await fuse(tmp_path, ["networkx:query", "networkx:direct"], steps, thread="fusion-tie")
    choose = next(c for c in model.calls if S.CHOOSE in c and "variant networkx:direct" in c)
    assert "0: 65" in choose and "1: 64" in choose
    assert state["final_answer"] == "64"


def test_variant_specs_are_checked():
    assert parse_variants("networkx:query, networkx:direct,networkx") == ["networkx:query", "networkx:direct"]
    with pytest.raises(ValueError, match="unknown backend"):
        parse_variants("mongo:query")
    with pytest.raises(ValueError, match="solve mode"):
        parse_variants("networkx:guess")


@pytest.mark.slow
def test_cli_ask_fusion_and_show_kg(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "fusion", "steps": fusion_steps()}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGAGENTS_", "OPENAI_", "ANTHROPIC_"))}
    env["KGAGENTS_HOME"] = str(tmp_path / "kgagents-home")  # never the user's data folder
    env.update(KGAGENTS_NO_DOTENV="1", KGAGENTS_RUNS_DIR=str(tmp_path / "runs"), OLLAMA_HOST="http://127.0.0.1:9",
               KGAGENTS_ALLOW_WEAK_SANDBOX="1")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kgagents.cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)

    out = cli("ask", QUESTION, "--model", f"scripted:{script}", "--thread", "fz", "--quiet",
              "--fusion", "networkx:query,sparql:direct", "--set", "num_next_steps_decision=1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "65"
    plain = cli("show", "fz")
    assert plain.returncode == 0, plain.stderr
    assert "networkx:query: '65'" in plain.stdout and "sparql:direct: '65'" in plain.stdout
    assert "2 × '65'" in plain.stdout
    shown = cli("show", "fz", "--kg", "--out", "fusion.html")
    assert shown.returncode == 0, shown.stderr
    page = Path(tmp_path / "fusion.html").read_text()
    assert "variant networkx:query" in page and "variant sparql:direct" in page
    bad = cli("ask", QUESTION, "--model", f"scripted:{script}", "--fusion", "nope:query")
    assert bad.returncode == 2 and "unknown backend" in bad.stderr


async def test_the_variants_share_the_runs_budget_and_say_which_ended_at_it(tmp_path):
    """Two variants with a budget of 2 tokens: each gets 1, ends at its forced solution after one iteration, and
    the run says which variants the budget ended."""
    steps = [*fusion_steps(), S.step(S.FORCED, times=0, structured={"solution": "the total is 65 (direct)"})]
    state, _ = await fuse(tmp_path, ["networkx:query", "networkx:direct"], steps, thread="fusion-budget",
                          budget_tokens=2)
    assert state["final_answer"] == "65"
    assert all(r["budget_stop"].startswith("token budget reached") for r in state["results"])
    assert all(r["iterations"] == 1 for r in state["results"])
    stops = state["budget_stop"].split("; ")
    assert sorted(s.split(": ", 1)[0] for s in stops) == ["networkx:direct", "networkx:query"]
    assert all(s.endswith(" of 1 tokens") for s in stops)  # each variant's share: half of the run's 2
