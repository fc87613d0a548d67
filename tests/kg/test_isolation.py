"""Each run's KG is its own: LLM-written attacks in one run leave a concurrent run's KG intact."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from langchain_core.tools import tool

from kgagents.tools.manager import register_tool, unregister_tool
from tests import kgot_script as S
from tests.kg.conftest import CODE, Backend
from tests.kg.helpers import kg_shape, run, two_writes

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


@pytest.mark.slow
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


@pytest.mark.slow
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
    from kgagents.tools.kg.stores import open_store
    from kgagents.tools.sandbox import SandboxLimits

    tid = f"shared-{uuid.uuid4().hex[:6]}"
    a = open_store(cypher_backend.backend, snapshot=None, work_dir=tmp_path, thread_id=f"{tid}/neo4j:query",
                   limits=SandboxLimits(), url=cypher_backend.url)
    b = open_store(cypher_backend.backend, snapshot=None, work_dir=tmp_path, thread_id=f"{tid}/neo4j:direct",
                   limits=SandboxLimits(), url=cypher_backend.url)
    assert (await b.write(CODE["cypher"]["write_array"])).ok
    assert (await a.write(attack)).ok
    assert len(cypher_backend.db_snapshot(b)["nodes"]) == 2


# --------------------------------------------------------------------------------------------------------------
# Bolt: a database per run, or one run at a time
# --------------------------------------------------------------------------------------------------------------
def _bolt(arcadedb_server, monkeypatch, **env: str):
    """The test ArcadeDB server as a Bolt backend configured by ``env`` (a fresh server object per test)."""
    from kgagents.tools.kg import cypher_store
    from tests.kg.conftest import Backend

    for name in ("KGAGENTS_ARCADEDB_HTTP", "KGAGENTS_BOLT_CONCURRENT", "KGAGENTS_BOLT_ISOLATION",
                 "KGAGENTS_BOLT_LEASE_S", "NEO4J_URI"):
        monkeypatch.delenv(name, raising=False)
    base = {"NEO4J_URI": arcadedb_server.url, "NEO4J_USER": arcadedb_server.extra["user"],
            "NEO4J_PASSWORD": arcadedb_server.extra["password"], "NEO4J_DATABASE": arcadedb_server.extra["database"]}
    for name, value in {**base, **env}.items():
        monkeypatch.setenv(name, value)
    config = cypher_store.bolt_config(arcadedb_server.url)
    with cypher_store._servers_lock:  # the server object reads the lease settings when made
        stale = cypher_store._servers.pop(config, None)
    if stale is not None:
        stale.close()
    server = cypher_store.server_for(config)
    with server._session(config.database) as session:  # no lease left by an earlier test
        session.run(f"MATCH (l:`{cypher_store.LEASE_LABEL}`) DELETE l").consume()
    return Backend("neo4j", "neo4j", "cypher", arcadedb_server.url, {**base, **env}, arcadedb_server), config


async def test_each_run_has_a_database_of_its_own(arcadedb_server, tmp_path, monkeypatch):
    from kgagents.tools.kg import cypher_store

    backend, config = _bolt(arcadedb_server, monkeypatch,
                            KGAGENTS_ARCADEDB_HTTP=f"http://127.0.0.1:{arcadedb_server.extra['http_port']}")
    a = backend.open(f"db-a-{uuid.uuid4().hex[:6]}", None, tmp_path)
    b = backend.open(f"db-b-{uuid.uuid4().hex[:6]}", None, tmp_path)
    assert cypher_store.server_for(config).mode == "database"
    assert a.database != b.database and a.database.startswith("kg-")  # type: ignore[attr-defined]
    assert (await a.write(CODE["cypher"]["write_array"])).ok
    # a query with no label at all (the checks switched off) still sees its own database only
    monkeypatch.setattr(cypher_store, "prepare", lambda statement, dialect, label=None, read_only=False: statement)
    seen = await b.read("MATCH (n) RETURN count(n) AS n")
    assert seen.ok and seen.result == [{"n": 0}]
    assert (await b.write("MATCH (n) DETACH DELETE n")).ok
    assert len(backend.db_snapshot(a)["nodes"]) == 2


@pytest.mark.slow
async def test_idle_databases_beyond_the_cap_are_dropped_and_come_back_from_the_state(arcadedb_server, tmp_path,
                                                                                       monkeypatch):
    from kgagents.tools.kg import cypher_store

    backend, config = _bolt(arcadedb_server, monkeypatch,
                            KGAGENTS_ARCADEDB_HTTP=f"http://127.0.0.1:{arcadedb_server.extra['http_port']}")
    server = cypher_store.server_for(config)
    monkeypatch.setattr(server, "max_databases", 2)
    first = backend.open(f"cap-0-{uuid.uuid4().hex[:6]}", None, tmp_path)
    assert (await first.write(CODE["cypher"]["write_array"])).ok
    for k in (1, 2):
        other = backend.open(f"cap-{k}-{uuid.uuid4().hex[:6]}", None, tmp_path)
        assert (await other.write(CODE["cypher"]["write_noise"].split(";")[0])).ok
    admin = server.admin
    assert admin is not None and not admin.exists(first.database)  # type: ignore[attr-defined,union-attr]
    # the first run's next operation finds its database gone: it is made again from the run's KG
    seen = await first.read(CODE["cypher"]["read_sorted"])
    assert seen.ok and seen.result == [{"third": 23, "fifth": 42}]
    assert len(server._databases) <= 2


@pytest.mark.slow
async def test_a_single_database_server_serves_one_run_at_a_time(arcadedb_server, tmp_path, monkeypatch):
    from kgagents.tools.kg.base import KGError
    from kgagents.tools.kg.stores import release_run

    backend, _ = _bolt(arcadedb_server, monkeypatch, KGAGENTS_BOLT_LEASE_S="2")
    first = backend.open(f"lease-a-{uuid.uuid4().hex[:6]}", None, tmp_path)
    assert (await first.write(CODE["cypher"]["write_array"])).ok
    with pytest.raises(KGError, match=r"single-tenant.*KGAGENTS_BOLT_CONCURRENT=1"):
        backend.open(f"lease-b-{uuid.uuid4().hex[:6]}", None, tmp_path)
    # the first run goes on; once it gives the server back, the next run starts at once
    assert (await first.read(CODE["cypher"]["read_sorted"])).ok
    release_run("neo4j", run_id=first._run, url=backend.url)  # type: ignore[attr-defined]
    second = backend.open(f"lease-b-{uuid.uuid4().hex[:6]}", None, tmp_path)
    assert (await second.write(CODE["cypher"]["write_total"].replace("MATCH (s {id: 'sorted_array'}) ", "")
                               .replace("(s)-[:SUMS_TO]->", ""))).ok
    # a lease nobody renews runs out
    with pytest.raises(KGError, match="single-tenant"):
        backend.open(f"lease-c-{uuid.uuid4().hex[:6]}", None, tmp_path)
    await asyncio.sleep(2.5)
    assert backend.open(f"lease-c-{uuid.uuid4().hex[:6]}", None, tmp_path)


@pytest.mark.slow
async def test_a_kgot_run_gives_a_single_database_server_back_when_it_ends(arcadedb_server, tmp_path, monkeypatch):
    backend, _ = _bolt(arcadedb_server, monkeypatch, KGAGENTS_BOLT_LEASE_S="600")
    first, _ = await run(backend, tmp_path / "1", two_writes("cypher"), thread=f"lease-run-{uuid.uuid4().hex[:6]}")
    second, _ = await run(backend, tmp_path / "2", two_writes("cypher"), thread=f"lease-run-{uuid.uuid4().hex[:6]}")
    assert first["final_answer"] == second["final_answer"] == "65"


@pytest.mark.slow
async def test_queries_stop_at_the_time_limit(falkordb_server, tmp_path, monkeypatch):
    from tests.kg.conftest import Backend

    monkeypatch.setenv("KGAGENTS_KG_QUERY_TIMEOUT_S", "0.5")
    backend = Backend("falkordb", "falkordb", "cypher", falkordb_server.url, {}, falkordb_server)
    store = backend.open(f"slow-{uuid.uuid4().hex[:6]}", None, tmp_path)
    # bounds the query check cannot see (it refuses literal ranges of 25 million rows): the server's limit stops it
    slow = await store.read("UNWIND range(1, toInteger('5000')) AS x UNWIND range(1, toInteger('5000')) AS y "
                            "WITH x, y WHERE x * y = -1 RETURN count(*) AS c")
    assert not slow.ok and "timed out" in (slow.error or "").lower()
