"""What a served run trusts its caller with (nodes/served.py): every context field's decision, and the wall inside
the graph. A run the LangGraph server starts carries its assistant and graph in ``configurable`` (LangGraph gives
its nodes ``runtime.server_info`` from them): such a run refuses a context that sets what a caller may not choose,
a graph named by path and a path attachment, whatever reached it, while a Python or CLI run keeps every form."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import pickle
import stat
from importlib import resources
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.evals.grbench import fixture_graph
from kgagents.graphs import registry
from kgagents.graphs.ark import build as build_ark
from kgagents.graphs.baselines import build_zeroshot
from kgagents.graphs.fusion import build as build_fusion
from kgagents.graphs.grounded import build as build_grounded
from kgagents.graphs.io import final_state
from kgagents.graphs.kg_rag import build_graph_rag
from kgagents.nodes.context import CALLER_MODEL, OPERATOR, BaseContext, served_decision
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.served import (
    LANGGRAPH_CONFIGURABLE,
    MAX_ATTACHMENTS,
    ServedRequestError,
    admit,
    attachment_content,
    caller_fields,
    check_attachments,
    check_command,
    check_context,
    check_context_values,
    check_input,
    decisions_of,
    graph_source,
    is_state_write,
    served_config,
    trusted_graph_ref,
)
from kgagents.tools.pgraph import graphs_dir, import_edges, import_graph, resolve
from kgagents.tools.pgraph.catalog import build_fingerprint, content_hash
from kgagents.tools.pgraph.registry import catalog_entry
from tests.fakes import closed_port

#: Fields that name an address, a path, a credential's destination or the sandbox: the operator's, wherever a
#: workflow has them.
OPERATORS = {"base_url", "kg_url", "kg_scope", "work_dir", "allow_weak_sandbox", "sandbox_timeout_s",
             "sandbox_memory_mb", "sandbox_call_quota_mb", "sandbox_call_quota_files", "sandbox_run_quota_mb",
             "sandbox_run_quota_files", "kgot_results", "kgot_checkpointer", "crag_api_url", "embedding_base_url",
             "embedding_model", "linking_model", "stark_embeddings", "embedding_cache", "agent_examples",
             "commentor_examples", "react_examples", "llm_timeout_s", "max_api_retries", "max_tool_retries"}
CHAT_MODELS = {"model", "graph_executor_model", "tool_executor_model", "tools_model", "ark_agent_model",
               "reasoner_model", "agent_g_model"}


def contexts() -> list[type[BaseContext]]:
    return [w.context for w in registry.workflows()]


def test_every_field_of_every_served_context_says_who_chooses_it():
    for cls in contexts():
        undecided = [f.name for f in dataclasses.fields(cls) if served_decision(f) is None]
        assert not undecided, f"{cls.__name__}: no served decision for {undecided}"
    decisions = decisions_of(contexts())  # one decision per name across the workflows
    assert {n for n, (d, _) in decisions.items() if d == CALLER_MODEL} == CHAT_MODELS
    assert {n for n, (d, _) in decisions.items() if d == OPERATOR} >= OPERATORS
    for name, (decision, _) in decisions.items():  # a field a new workflow adds with such a name is decided too
        if any(word in name for word in ("url", "dir", "path", "file", "checkpointer", "examples", "sandbox")):
            assert decision == OPERATOR, name


def test_a_callers_context_may_set_plain_values_and_listed_models_only():
    decisions = decisions_of([KGoTContext])
    check_context_values({"temperature": 0.2, "max_iterations": 3, "tools": ["llm_query"], "model": None},
                         decisions, models=())
    check_context_values({"model": "openai:gpt-4o-mini", "tools_model": "openai:gpt-4o-mini"}, decisions,
                         models=("openai:gpt-4o-mini",))
    check_context_values({"work_dir": None, "allow_weak_sandbox": None}, decisions, models=())  # the defaults
    with pytest.raises(ServedRequestError) as refused:
        check_context_values({"base_url": "http://127.0.0.1:9/v1", "kg_url": "bolt://x", "temperature": 0.1,
                              "model": "scripted:/tmp/x.json", "nosuch": 1}, decisions, models=("openai:gpt-4o",))
    message = str(refused.value)
    for part in ("base_url: set by the server's operator", "kg_url: set by the server's operator",
                 "'scripted:/tmp/x.json' is not a model of this server's list; a caller may choose one of "
                 "openai:gpt-4o", "nosuch: no served workflow", "A caller may set: "):
        assert part in message
    assert "temperature:" not in message.partition("A caller may set")[0]
    with pytest.raises(ServedRequestError, match="the server lists none in KGAGENTS_SERVE_MODELS"):
        check_context_values({"model": "openai:gpt-4o"}, decisions, models=())
    with pytest.raises(ServedRequestError, match="graph_executor_model"):
        check_context_values({"graph_executor_model": {"provider": "x"}}, decisions, models=("x",))


def test_a_context_instance_is_checked_field_by_field_and_a_derived_one_is_admitted():
    check_context(KGoTContext(temperature=0.3, max_iterations=2), models=())
    with pytest.raises(ServedRequestError, match="work_dir"):
        check_context(KGoTContext(work_dir="/tmp/elsewhere"), models=())
    with pytest.raises(ServedRequestError, match="allow_weak_sandbox"):
        check_context(KGoTContext(allow_weak_sandbox=True), models=())
    variant = admit(dataclasses.replace(KGoTContext(), kg_scope="networkx:query"))
    check_context(variant, models=())
    with pytest.raises(ServedRequestError, match="kg_scope"):
        check_context(KGoTContext(kg_scope="networkx:query"), models=())


def test_attachments_as_content():
    data = b"a,b\n1,2\n"
    assert attachment_content({"name": "t.csv", "content_base64": base64.b64encode(data).decode()}) == ("t.csv", data)
    for bad, message in [({"name": "t.csv"}, "keys name and content_base64"),
                         ({"name": "t.csv", "content_base64": "", "path": "/etc"}, "keys name and content_base64"),
                         ({"name": "../t.csv", "content_base64": ""}, "file name"),
                         ({"name": "a/b", "content_base64": ""}, "file name"),
                         ({"name": "..", "content_base64": ""}, "file name"),
                         ({"name": "x", "content_base64": "not base64!"}, "not base64"),
                         ({"name": "x", "content_base64": 7}, "base64 string")]:
        with pytest.raises(ServedRequestError, match=message):
            attachment_content(bad)
    big = base64.b64encode(b"x" * (20 * 2**20 + 1)).decode()
    with pytest.raises(ServedRequestError, match="limit of one attachment"):
        attachment_content({"name": "big.bin", "content_base64": big})
    one = {"name": "a", "content_base64": ""}
    with pytest.raises(ServedRequestError, match="at most"):
        check_attachments([one] * (MAX_ATTACHMENTS + 1), served=True)
    with pytest.raises(ServedRequestError, match="same name"):
        check_attachments([one, one], served=False)
    assert check_attachments(["/data/x.pdf"], served=False) == ["/data/x.pdf"]
    with pytest.raises(ServedRequestError, match="never a path of the server"):
        check_attachments(["/data/x.pdf"], served=True)


def test_inputs_name_graphs_by_catalog_name_and_carry_no_server_path(tmp_path):
    source = str(fixture_graph("goodreads"))
    assert graph_source(source, served=False) == source
    for bad in (source, "../graphs/goodreads", "/etc", "nosuch", ["goodreads"]):
        with pytest.raises(ServedRequestError):
            graph_source(bad, served=True)
    import_graph(source, name="goodreads")
    folder = graph_source("goodreads", served=True)
    assert resolve(folder)["location"] == str((graphs_dir() / "goodreads").resolve())
    check_input({"question": "q", "graph": "goodreads", "kg": [["a", "b", {"relation": "r"}]],
                 "attachments": [{"name": "g.json", "content_base64": ""}]})
    for bad, message in [({"kg_file": "/srv/graphs/x.json"}, "takes no kg_file"),
                         ({"graph": "/srv/graphs/x"}, "never by a path"),
                         ({"attachments": ["/home/op/.env"]}, "never a path of the server")]:
        with pytest.raises(ServedRequestError, match=message):
            check_input(bad)


def test_a_catalog_entry_is_an_imported_graph_or_a_cached_build(tmp_path):
    root = tmp_path / "graphs"
    for entry in ("goodreads", "cache/inline-0123456789abcdef", "cache/triples-0123456789abcdef"):
        assert catalog_entry(root / entry, root) == root / entry
    assert catalog_entry(f"{root}/cache/../goodreads", root) == root / "goodreads"
    for other in (root, root / "cache", root / "goodreads" / "nodes", root / "cache" / "inline-0123456789abcdef" / "x",
                  root / "goodreads.tmp-7-8", root / "cache" / "inline-0123.tmp-7-8", root / "cache" / "Inline-x",
                  root / ".hidden", tmp_path, tmp_path / "elsewhere", f"{root}/../elsewhere", "relative/path", ""):
        assert catalog_entry(other, root) is None, other
    (root / "cache").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "linked").symlink_to(tmp_path / "elsewhere")  # a link out of the catalog is no entry of it
    assert catalog_entry(root / "linked", root) is None


def test_a_stored_graph_reference_is_trusted_as_a_pointer_into_the_catalog_only(tmp_path):
    """A served run's state is its caller's to steer: a stored reference opens a build of the catalog as the
    catalog's own manifest says, or nothing; its source, format and record are never used, and the refusal quotes
    neither a path nor a file."""
    import_graph(fixture_graph("goodreads"), name="goodreads")
    imported = resolve("goodreads")
    inline = import_edges([["a", "b", {"relation": "r"}]])
    for ref in (imported, inline):
        assert trusted_graph_ref(ref, served=True) == ref
    steered = {**inline, "source": str(tmp_path), "format": "stark", "record": "x", "name": "mine"}
    assert trusted_graph_ref(steered, served=True) == inline  # only the catalog's own reference comes back
    secret = tmp_path / "secrets.txt"
    secret.write_text("OPENAI_API_KEY=sk-canary-0451\n", encoding="utf-8")
    root = graphs_dir()
    planted = [{**inline, "fingerprint": "0" * 16, "source": str(secret), "format": "triples"},
               {**imported, "fingerprint": inline["fingerprint"]},
               {**imported, "location": str(tmp_path)},
               {**imported, "location": str(root)},
               {**imported, "location": str(root / "goodreads" / "nodes")},
               {"name": "x", "source": str(secret), "format": "triples", "fingerprint": "f"},
               {**imported, "location": 7}]
    for ref in planted:
        with pytest.raises(ServedRequestError) as refused:
            trusted_graph_ref(ref, served=True)
        assert str(tmp_path) not in str(refused.value) and "sk-canary" not in str(refused.value)
    built = [p.name for p in (root / "cache").iterdir() if not p.name.startswith(".")]  # not the locks
    assert built == [Path(inline["location"]).name], built  # nothing was built from what the references name
    assert trusted_graph_ref(planted[0], served=False) == planted[0]  # the CLI's and Python's own, as it is


def test_a_callers_writes_of_its_threads_state_are_told_apart_and_refused():
    assert is_state_write({"thread_id": "t"})  # update_state, supersteps: the thread's id alone
    assert not is_state_write({"thread_id": "t", "metadata": {}})  # a metadata patch
    assert not is_state_write({"thread_id": "t", "action": None, "metadata": {"run_ids": None}})  # a cancellation
    for command in (None, {"resume": "yes"}, {"resume": None, "update": None, "goto": None}, {}):
        check_command(command)
    for command, refused in (({"update": {"graph_ref": {}}}, "no update"), ({"goto": "final_answer"}, "no goto"),
                             ({"resume": 1, "update": [["graph_ref", {}]]}, "no update"), ("x", "an object")):
        with pytest.raises(ServedRequestError, match=refused):
            check_command(command)


def test_langgraphs_own_configurable_keys_pass_and_no_other():
    decisions = decisions_of(contexts())
    assert not LANGGRAPH_CONFIGURABLE & decisions.keys()  # none of them can set a context field
    given = {"__event_streaming_v2": True, "thread_id": "t", "checkpoint_id": "c", "temperature": 0.1}
    check_context_values(caller_fields(given), decisions, models=())
    for smuggled in ({"__event_streaming_v3": True}, {"__base_url": "http://x"}, {"thread_id_": 1},
                     {"base_url": "http://x"}):
        with pytest.raises(ServedRequestError):
            check_context_values(caller_fields({**given, **smuggled}), decisions, models=())


def test_a_server_runs_configuration_is_recognised():
    assert served_config({"configurable": {"thread_id": "t", "graph_id": "kgot", "assistant_id": "a"}})
    assert served_config({"configurable": {"langgraph_auth_user": object()}})
    assert not served_config({"configurable": {"thread_id": "t"}}) and not served_config(None)


# --------------------------------------------------------------------------------------------------------------
# The wall inside the graph: runs with a server's configuration
# --------------------------------------------------------------------------------------------------------------
def served(thread: str, graph: str = "zeroshot") -> dict:
    """A run configuration as the LangGraph server gives it (its assistant and graph, its caller)."""
    return {"configurable": {"thread_id": thread, "graph_id": graph, "assistant_id": f"assistant-{graph}",
                             "langgraph_auth_user_id": "alice"}, "recursion_limit": 50}


@pytest.fixture
def answer_model(tmp_path, monkeypatch):
    """A scripted model that answers every zero-shot prompt, on the server's list."""
    script = tmp_path / "answer.json"
    script.write_text(json.dumps({"steps": [{"when": ".", "times": 0, "content": "FINAL ANSWER: 42"}]}),
                      encoding="utf-8")
    model = f"scripted:{script}"
    monkeypatch.setenv("KGAGENTS_SERVE_MODELS", model)
    return model


async def test_a_served_run_refuses_a_context_a_caller_may_not_set(tmp_path, answer_model):
    graph = build_zeroshot().compile(checkpointer=InMemorySaver())
    elsewhere = tmp_path / "attacker-chosen"
    attacks = {"work_dir": {"work_dir": str(elsewhere)},
               "base_url": {"model": "gpt-4o-mini", "base_url": f"http://127.0.0.1:{closed_port()}/v1"},
               "kg_url": {"backend": "neo4j", "kg_url": f"bolt://127.0.0.1:{closed_port()}"},
               "allow_weak_sandbox": {"allow_weak_sandbox": True},
               "model": {"model": f"scripted:{tmp_path / 'other.json'}"}}
    for i, (field, context) in enumerate(attacks.items()):
        with pytest.raises(ValueError, match=f"{field}: "):
            await final_state(graph, {"question": "What is six times seven?"}, served(f"t{i}"),
                              context={"model": answer_model, **context})
    assert not elsewhere.exists()
    state = await final_state(graph, {"question": "What is six times seven?"}, served("ok"),
                              context={"model": answer_model, "temperature": 0.0})
    assert state["final_answer"] == "42"


async def test_a_python_run_keeps_every_field(tmp_path, answer_model):
    graph = build_zeroshot().compile(checkpointer=InMemorySaver())
    state = await final_state(graph, {"question": "What is six times seven?"},
                              {"configurable": {"thread_id": "cli"}},
                              context={"model": answer_model, "work_dir": str(tmp_path / "mine")})
    assert state["final_answer"] == "42"


async def test_served_attachments_are_content_written_into_the_runs_own_folder(tmp_path, answer_model):
    secret = tmp_path / "server.env"
    secret.write_text("OPENAI_API_KEY=sk-server-secret\n", encoding="utf-8")
    graph = build_zeroshot().compile(checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="never a path of the server"):
        await final_state(graph, {"question": "What is in the file?", "attachments": [str(secret)]}, served("p"),
                          context={"model": answer_model})
    note = {"name": "note.txt", "content_base64": base64.b64encode(b"six times seven").decode()}
    state = await final_state(graph, {"question": "What is in the file?", "attachments": [note]}, served("c"),
                              context={"model": answer_model})
    [path] = state["attachments"]
    written = Path(path)
    assert written.read_bytes() == b"six times seven" and written.name == "note.txt"
    assert written.parent == Path(os.environ["KGAGENTS_RUNS_DIR"]) / "work" / "c" / "attachments"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert "six times seven" not in json.dumps(state)  # the state keeps the path, not the content


async def test_a_served_run_names_its_graph_by_catalog_name():
    graph = build_grounded().compile(checkpointer=InMemorySaver())
    source = str(fixture_graph("goodreads"))
    with pytest.raises(ValueError, match="never by a path"):
        await final_state(graph, {"question": "Who wrote it?", "graph": source}, served("g", "grounded"))
    with pytest.raises(ValueError, match="no graph named 'goodreads' is imported"):
        await final_state(graph, {"question": "Who wrote it?", "graph": "goodreads"}, served("h", "grounded"))


class CodeInAPickle:
    """A pickle that, when loaded, writes a marker file (what a payload could do with the server's rights)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def operators_files(tmp_path: Path) -> tuple[Path, Path]:
    """Two files of the server's operator, readable by the operator only: a secret and a table of triples."""
    folder = tmp_path / "operator"
    folder.mkdir(mode=0o700)
    secret, table = folder / "secrets.txt", folder / "private.tsv"
    secret.write_text("OPENAI_API_KEY=sk-canary-0451\n", encoding="utf-8")
    table.write_text("vault_code\tis\t4417\n", encoding="utf-8")
    for path in (secret, table):
        path.chmod(0o600)
    return secret, table


async def test_a_graph_reference_planted_in_a_served_ark_runs_state_opens_nothing_else(tmp_path, answer_model):
    """Behind the auth handler, which refuses a caller's writes of its thread's state: a served ARK run whose
    state holds a graph reference with its own inline graph's location, a wrong fingerprint and a source
    elsewhere (its attachments folder as STaRK, where it attached a code-running ``node_info.pkl``; an operator's
    file as triples) stops with the served refusal before anything is read: nothing unpickled or built, and the
    error quotes neither the file nor a path."""
    secret, _ = operators_files(tmp_path)
    marker = tmp_path / "code-ran"
    graph = build_ark().compile(checkpointer=InMemorySaver(), interrupt_after=["initialise_context"])
    config, context = served("ark-planted", "ark"), {"model": answer_model}
    pkl = {"name": "node_info.pkl", "content_base64": base64.b64encode(pickle.dumps(CodeInAPickle(marker))).decode()}
    await graph.ainvoke({"question": "Who?", "kg": [["a", "b", {"relation": "r"}]], "attachments": [pkl]}, config,
                        context=context)
    values = (await graph.aget_state(config)).values
    for source, fmt in ((str(Path(values["attachments"][0]).parent), "stark"), (str(secret), "triples")):
        planted = {**values["graph_ref"], "fingerprint": "0" * 16, "source": source, "format": fmt}
        await graph.aupdate_state(config, {"graph_ref": planted})
        with pytest.raises(ServedRequestError, match="start a new thread") as refused:
            await graph.ainvoke(None, config, context=context)
        assert str(tmp_path) not in str(refused.value) and "sk-canary" not in str(refused.value)
    assert not marker.exists()
    assert [p.name for p in (graphs_dir() / "cache").iterdir() if not p.name.startswith(".")] == [
        Path(values["graph_ref"]["location"]).name]


async def test_a_graph_reference_planted_in_a_served_rag_runs_state_builds_no_server_file(tmp_path, answer_model):
    """The same on Graph-RAG, which reuses its thread's stored reference: a reference to an operator's table of
    triples, with a wrong fingerprint or with the one its build would have, at the imported graph's location or
    at the cache folder its build would take, builds nothing and puts none of the table into the state."""
    _, table = operators_files(tmp_path)
    import_graph(fixture_graph("goodreads"), name="goodreads")
    graph = build_graph_rag().compile(checkpointer=InMemorySaver())
    config, context = served("rag-planted", "graph-rag"), {"model": answer_model}
    question = {"question": "What is the vault code?", "graph": "goodreads"}
    ref = (await final_state(graph, question, config, context=context))["graph_ref"]
    real = build_fingerprint("triples", None, False, content_hash([table]))
    for location in (ref["location"], str(graphs_dir() / "cache" / "triples-0123456789abcdef")):
        for fingerprint in ("0" * 16, real):
            planted = {**ref, "location": location, "fingerprint": fingerprint, "source": str(table),
                       "format": "triples"}
            await graph.aupdate_state(config, {"graph_ref": planted})
            with pytest.raises(ServedRequestError) as refused:
                await final_state(graph, question, config, context=context)
            assert str(tmp_path) not in str(refused.value) and real not in str(refused.value)
            assert "4417" not in json.dumps((await graph.aget_state(config)).values)
    assert not [p for p in (graphs_dir() / "cache").glob("triples-*")]


@pytest.mark.slow
async def test_a_served_fusion_run_admits_the_variant_contexts_it_derives(monkeypatch):
    """Fusion gives each KGoT variant a context of its own (its KG scope, its share of the budget): the workflow's
    own derivation of the checked context, which the served check lets through."""
    demo = Path(str(resources.files("kgagents") / "data" / "demo_kgot_figure9.json"))
    monkeypatch.setenv("KGAGENTS_SERVE_MODELS", f"scripted:{demo}")
    graph = build_fusion().compile(checkpointer=InMemorySaver())
    question = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of the "
                "third and fifth integers of the sorted list.")
    state = await final_state(graph, {"question": question}, served("f", "fusion"),
                              context={"model": f"scripted:{demo}", "budget_tokens": 1_000_000})
    assert state["final_answer"] == "65" and {r["variant"] for r in state["results"]} == {
        "networkx:query", "networkx:direct"}
    assert not any(r["error"] for r in state["results"]), state["results"]
