"""Each run's KG is its own: LLM-written attacks in one run leave a concurrent run's KG intact."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langchain_core.tools import tool

from tests import kgot_script as S
from tests.kg.conftest import CODE, Backend
from tests.kg.helpers import kg_shape, run, two_writes
from tools.manager import register_tool, unregister_tool

CYPHER_ATTACKS = [
    "MATCH (n) DETACH DELETE n",
    "MATCH ()-[r]->() DELETE r",
    "MATCH (n) SET n.pwned = true",
    "MATCH (n) WITH n MATCH (m) DETACH DELETE m",
    "MATCH (a) WITH a MATCH (b) WITH a MERGE (b {id: 'array'}) SET b.pwned = true",
    "FOREACH (x IN [1] | MERGE (n {id: 'array'}) SET n.pwned = x)",
    "MATCH p = ()-[*]-() UNWIND nodes(p) AS x DETACH DELETE x",
    "MATCH (n) RETURN n.id AS id UNION MATCH (m) DETACH DELETE m RETURN m.id AS id",
    "OPTIONAL MATCH (n) WHERE n.id = 'array' DETACH DELETE n",
    "MERGE (n {id: 'sorted_array'}) ON MATCH SET n.pwned = true",
    "UNWIND ['array', 'sorted_array'] AS i MATCH (n) WHERE n.id = i DETACH DELETE n",
    "CREATE (:Leak {id: 'leak', ids: [(m)-->() | m.id]})",
    # rejected before they run
    "CALL db.clearQueryCaches()",
    "MATCH (n) CALL { WITH n DETACH DELETE n }",
    "MATCH (n IS Array) DETACH DELETE n",
    "MATCH (n:Array|SortedArray) DETACH DELETE n",
    "MATCH (n) CALL apoc.nodes.delete(n, 10) YIELD value RETURN value",
    "MATCH (n) RETURN apoc.node.degree(n)",
    "MATCH (n) SET n:KGScope_00000000000000000000",
    "MATCH (n) SET n:$('Other')",
    "DROP DATABASE neo4j",
    "CREATE INDEX FOR (n:Array) ON (n.id)",
    "LOAD CSV FROM 'file:///etc/passwd' AS row CREATE (:Leak {row: row})",
]


def sparql_attacks(other_graph: str) -> list[str]:
    return [
        "DROP ALL", "CLEAR ALL", "DROP NAMED", "CLEAR DEFAULT",
        "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }",
        "DELETE { GRAPH ?g { ?s ?p ?o } } WHERE { GRAPH ?g { ?s ?p ?o } }",
        f"DROP GRAPH <{other_graph}>",
        f"INSERT {{ GRAPH <{other_graph}> {{ kg:array kg:pwned true }} }} WHERE {{}}",
        f"WITH <{other_graph}> DELETE {{ ?s ?p ?o }} WHERE {{ ?s ?p ?o }}",
        f"MOVE DEFAULT TO <{other_graph}>",
        f"DELETE {{ ?s ?p ?o }} USING <{other_graph}> WHERE {{ ?s ?p ?o }}",
        "LOAD <http://127.0.0.1:9/data.ttl>",
    ]


def sparql_peeks(other_graph: str) -> list[str]:
    return [
        "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
        f"SELECT * FROM <{other_graph}> WHERE {{ ?s ?p ?o }}",
        f"SELECT * FROM NAMED <{other_graph}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ GRAPH <{other_graph}> {{ ?s ?p ?o }} }}",
    ]


async def test_attacks_in_one_run_leave_another_runs_kg_intact(backend: Backend, tmp_path):
    code = CODE[backend.language]
    suffix = uuid.uuid4().hex[:6]
    victim = backend.open(f"victim-{suffix}", None, tmp_path / "v")
    attacker = backend.open(f"attacker-{suffix}", None, tmp_path / "a")
    assert (await victim.write(code["write_array"])).ok
    assert (await victim.write(code["write_noise"])).ok  # "weather" exists in the victim's KG only
    assert (await attacker.write(code["write_array"])).ok  # the same ids in another run's KG
    kept = await victim.snapshot()
    if backend.language == "cypher":
        attacks = CYPHER_ATTACKS
    elif backend.language == "sparql":
        attacks = sparql_attacks(victim.graph)  # type: ignore[attr-defined]
    else:
        attacks = [code["attack"]]
    rejected = 0
    for attack in attacks:
        result = await attacker.write(attack)
        rejected += not result.ok
        assert backend.db_snapshot(victim) == kept, attack
        # the attacker's own KG is whatever its store reports, the database agrees, nothing leaked into it
        assert backend.db_snapshot(attacker) == await attacker.snapshot(), attack
        assert "weather" not in json.dumps(await attacker.snapshot()), attack
    if backend.backend == "neo4j":
        assert rejected >= 11  # the scope rewrite refuses what could reach past node patterns
    # reads see the run's own KG only
    own = await attacker.read(code["count"])
    assert own.ok, own.error
    if backend.language == "sparql":
        for peek in sparql_peeks(victim.graph):  # type: ignore[attr-defined]
            seen = await attacker.read(peek)
            assert seen.ok and "sorted_array" not in str(seen.result) and seen.result in ([], [{}]), peek
    if backend.language == "cypher":
        for peek in ("MATCH (n) RETURN collect(n.id) AS ids", "RETURN [(m)-->(k) | m.id] AS ids",
                     "RETURN CASE WHEN COUNT { (m {id: 'weather'}) } > 0 THEN 'weather' ELSE 'none' END AS x"):
            seen = await attacker.read(peek)
            # the victim's "weather" and "array_copy" stay invisible (an engine may also refuse the syntax)
            assert "weather" not in str(seen.result) and "array_copy" not in str(seen.result), peek
    # and the victim run goes on as before
    assert (await victim.write(code["write_total"])).ok
    assert {"array", "sorted_array", "total"} <= {n["id"] for n in backend.db_snapshot(victim)["nodes"]}


async def test_concurrent_runs_one_of_which_wipes_the_database(backend: Backend, tmp_path):
    """Two KGoT runs at once; the attacker's LLM writes a wipe-out while the victim is between two writes."""
    events = {name: asyncio.Event() for name in ("victim_wrote", "attacked")}

    @tool
    async def rendezvous(signal: str = "", wait: str = "") -> str:
        """Set one event and wait for another (test choreography)."""
        if signal:
            events[signal].set()
        if wait:
            await asyncio.wait_for(events[wait].wait(), timeout=60)
        return f"signalled {signal or '-'}, waited for {wait or '-'}"

    wipe = {"python": "G.clear()\nG.add_node('attacker', label='Attacker')",
            "cypher": "MATCH (n) DETACH DELETE n; CREATE (:Attacker {id: 'attacker'})",
            "sparql": "DROP ALL ; CLEAR ALL ; INSERT DATA { kg:attacker a kg:Attacker . }"}[backend.language]
    mark = {"python": "G.add_node('done', label='Signalled')",
            "cypher": "CREATE (:Signalled {id: 'done'})",
            "sparql": "INSERT DATA { kg:done a kg:Signalled . }"}[backend.language]
    attacker_steps = [
        *S.votes("INSERT", 0, unless="Label: Signalled"), *S.votes("RETRIEVE", 0, when_extra="Label: Signalled"),
        *S.merge(times=0),
        S.step(S.DEFINE_TOOLS, unless="Label: Attacker", times=0,
               tool_calls=[{"name": "rendezvous", "args": {"wait": "victim_wrote"}}]),
        S.step(S.DEFINE_TOOLS + ".*Label: Attacker", times=0,
               tool_calls=[{"name": "rendezvous", "args": {"signal": "attacked"}}]),
        S.step(S.WRITE, unless="Label: Attacker", times=0, structured={"code": wipe}),
        S.step("Label: Attacker.*" + S.WRITE, times=0, structured={"code": mark}),
        S.step(S.DIRECT, times=0, structured={"solution": "nothing"}), *S.need_math(False, times=0),
        S.step(S.PARSE, times=0, structured={"final_answer": "nothing"}),
    ]
    victim_steps = two_writes(backend.language)
    # the victim's second tool call tells the attacker to strike, and waits until it has
    for step in victim_steps:
        if step["when"] == S.DEFINE_TOOLS + ".*SortedArray":
            step["tool_calls"] = [{"name": "rendezvous", "args": {"signal": "victim_wrote", "wait": "attacked"}}]
    register_tool(rendezvous)
    try:
        (victim, _), (attacker, _) = await asyncio.gather(
            run(backend, tmp_path / "victim", victim_steps, thread=f"victim-{uuid.uuid4().hex[:6]}"),
            run(backend, tmp_path / "attacker", attacker_steps, thread=f"attacker-{uuid.uuid4().hex[:6]}",
                solve_mode="direct"))
    finally:
        unregister_tool("rendezvous")
    assert events["attacked"].is_set()
    assert victim["final_answer"] == "65"
    assert [w["status"] for w in victim["kg_writes"]] == ["applied", "applied"]
    assert kg_shape(victim["kg"])[0] == [("array", ("Array",)), ("sorted_array", ("SortedArray",)),
                                         ("total", ("Total",))]
    assert sorted(n["id"] for n in attacker["kg"]["nodes"]) == ["attacker", "done"]


@pytest.mark.parametrize("attack", ["MATCH (n) DETACH DELETE n"])
async def test_bolt_scope_is_per_thread_and_per_fusion_variant(cypher_backend: Backend, tmp_path, attack):
    """Two KGs of one thread (fusion variants) are separate scopes too."""
    from tools.kg.stores import open_store
    from tools.sandbox import SandboxLimits

    tid = f"shared-{uuid.uuid4().hex[:6]}"
    a = open_store(cypher_backend.backend, snapshot=None, work_dir=tmp_path, thread_id=f"{tid}/neo4j:query",
                   limits=SandboxLimits(), url=cypher_backend.url)
    b = open_store(cypher_backend.backend, snapshot=None, work_dir=tmp_path, thread_id=f"{tid}/neo4j:direct",
                   limits=SandboxLimits(), url=cypher_backend.url)
    assert (await b.write(CODE["cypher"]["write_array"])).ok
    assert (await a.write(attack)).ok
    assert len(cypher_backend.db_snapshot(b)["nodes"]) == 2
