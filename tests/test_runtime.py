"""The per-run plumbing the nodes share: concurrent samples, prepared work dirs, sandboxes and the task KG
built on the event loop, the isolation probe handed to worker processes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import kgagents.nodes.kgot.env as kgot_env
import kgagents.nodes.runtime as rt
import kgagents.tools.sandbox as sb
from kgagents.graphs.io import final_state
from kgagents.graphs.kgot import build
from kgagents.nodes.kgot import KGoTContext
from kgagents.tools.kg.stores import backend_names, opens_without_io
from kgagents.tools.sandbox import bwrap as sb_bwrap
from kgagents.tools.sandbox import isolation as sb_isolation


async def test_samples_run_concurrently_in_order():
    running, peak = 0, 0

    async def sample(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (5 - i))  # the last ones finish first
        running -= 1
        return i

    assert await rt.gather_bounded(None, [sample(i) for i in range(5)]) == [0, 1, 2, 3, 4]
    assert peak == 5
    peak = 0
    assert await rt.gather_bounded({"max_concurrency": 2}, [sample(i) for i in range(5)]) == [0, 1, 2, 3, 4]
    assert peak == 2


async def test_a_failing_sample_cancels_the_others_and_is_raised_as_it_is():
    started, cancelled = [], []

    async def slow(i: int) -> int:
        started.append(i)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise
        return i

    async def fails() -> int:
        await asyncio.sleep(0.01)
        raise ValueError("bad sample")

    with pytest.raises(ValueError, match="bad sample"):
        await rt.gather_bounded(None, [slow(0), fails(), slow(2)])
    assert sorted(cancelled) == [0, 2]
    started.clear()
    calls = [fails(), slow(1), slow(2), slow(3)]
    with pytest.raises(ValueError, match="bad sample"):
        await rt.gather_bounded({"max_concurrency": 2}, calls)
    assert 3 not in started  # still waiting for its turn: never started
    assert all(c.cr_frame is None for c in calls)  # none left suspended or unawaited


def test_the_kgot_graph_has_one_node_per_step_of_the_paper():
    nodes = set(build().compile().get_graph().nodes) - {"__start__", "__end__"}
    assert nodes == {"receive_task", "decide_next_step", "define_tool_calls", "run_tool_call",
                     "integrate_new_information", "mitigate_noise", "solve_with_query", "solve_directly",
                     "solve_forced", "generate_forced_solution", "process_math", "parse_solution",
                     "output"}  # the output schema's step (kgagents.graphs.io)


async def test_a_run_work_dir_is_prepared_once_then_found_without_a_thread(tmp_path, monkeypatch):
    ctx = KGoTContext(work_dir=str(tmp_path / "work"))
    config = {"configurable": {"thread_id": "prepared-once"}}
    hops = []
    real_to_thread = asyncio.to_thread

    async def counting_to_thread(fn, *args, **kwargs):
        hops.append(fn)
        return await real_to_thread(fn, *args, **kwargs)

    monkeypatch.setattr(rt.asyncio, "to_thread", counting_to_thread)
    first = await rt.run_work_dir(ctx, config)
    assert first == (tmp_path / "work").resolve() and first.is_dir() and len(hops) == 1
    assert await rt.run_work_dir(ctx, config) == first and len(hops) == 1
    other = await rt.run_work_dir(ctx, {"configurable": {"thread_id": "another-run"}})
    assert other == first and len(hops) == 2  # another run prepares its own (here: the same folder)
    # no thread id (no checkpointer): a fresh temporary folder each time, never cached
    a, b = await rt.run_work_dir(KGoTContext(), None), await rt.run_work_dir(KGoTContext(), None)
    assert a != b and len(hops) == 4


@pytest.mark.slow
async def test_sandboxes_and_the_networkx_kg_open_on_the_loop_without_touching_files(tmp_path, monkeypatch):
    ctx = KGoTContext(work_dir=str(tmp_path / "run"))
    config = {"configurable": {"thread_id": "no-io"}}
    await rt.run_work_dir(ctx, config)  # prepared (in a thread)

    def no_io(*args, **kwargs):
        raise AssertionError("file-system access on the event loop")

    for name in ("stat", "lstat", "mkdir", "getcwd"):
        monkeypatch.setattr(os, name, no_io)
    box = sb.Sandbox(Path(ctx.work_dir) / "tools" / "python")
    store = await kgot_env.open_task_kg(ctx, config, None)
    monkeypatch.undo()
    assert box.work_dir == (tmp_path / "run").resolve() / "tools" / "python"
    assert not box.work_dir.exists()  # created when code first runs there
    result = await box.run("print('hi')")
    assert result.ok and result.stdout.strip() == "hi" and box.work_dir.is_dir()
    assert (await store.write("G.add_node('a', label='Thing')")).ok


@pytest.mark.skipif(sb.isolation_status()[0] != "bwrap", reason="no bubblewrap here")
async def test_the_context_sets_the_disk_quota_of_the_runs_sandboxes(tmp_path):
    from kgagents.tools.python_tool import make_python_tool

    ctx = KGoTContext(work_dir=str(tmp_path / "run"), sandbox_call_quota_mb=1, sandbox_call_quota_files=50,
                      sandbox_run_quota_mb=2, sandbox_run_quota_files=100)
    quota = sb.DiskQuota(call_mb=1, call_files=50, run_mb=2, run_files=100)
    assert kgot_env.sandbox_limits(ctx).quota == quota  # the task KG's sandbox
    work = await rt.run_work_dir(ctx, {"configurable": {"thread_id": "quota"}})
    tool = make_python_tool(await kgot_env.atool_env(ctx, work / "tools"))
    assert tool.sandbox.limits.quota == quota
    out = await tool.ainvoke({"code": "open('big', 'wb').write(b'x' * 2_000_000)"})
    assert out.startswith("Error: disk quota exceeded: the code wrote 1.9 MB into its work dir "
                          "(a call may write 1 MB)")
    assert list((work / "tools" / "python").iterdir()) == []


def test_only_the_embedded_backend_opens_without_io():
    assert opens_without_io("networkx")
    assert not any(opens_without_io(name) for name in backend_names() if name != "networkx")


def test_a_worker_process_adopts_the_probe_of_its_coordinator(monkeypatch):
    probe = sb.isolation_probe()
    search_path, path, info = probe
    assert search_path == os.environ.get("PATH", os.defpath) and sb.isolation_known()
    # a fresh process: nothing probed
    monkeypatch.setattr(sb_bwrap, "_found", {})
    monkeypatch.setattr(sb_bwrap, "_probes", {})
    monkeypatch.setattr(sb_isolation, "_isolation_checked", set())
    monkeypatch.setattr(sb_bwrap, "_run_probe", lambda p: pytest.fail("probed again"))
    assert not sb.isolation_known()
    sb.adopt_isolation_probe(probe)
    assert sb.isolation_known() and sb_bwrap._probes.get(path) == info
    assert sb.isolation_status()[0] == "bwrap"
    # another PATH is another environment: not adopted
    monkeypatch.setattr(sb_isolation, "_isolation_checked", set())
    sb.adopt_isolation_probe(("/elsewhere/bin", path, info))
    assert not sb.isolation_known()


async def test_a_tool_call_builds_only_its_own_tool(tmp_path):
    from langchain_core.tools import StructuredTool

    from kgagents.nodes.kgot import tool_manager
    from kgagents.tools.manager import register_tool, unregister_tool

    built: list[str] = []

    def factory(name: str):
        def make(env):
            built.append(name)

            async def answer(query: str) -> str:
                return name

            return StructuredTool.from_function(coroutine=answer, name=name, description=f"The {name} tool.")
        return make

    for name in ("tool_a", "tool_b"):
        register_tool(factory(name), name=name)
    try:
        ctx = KGoTContext(work_dir=str(tmp_path), tools=["tool_a", "tool_b"])
        config = {"configurable": {"thread_id": "only-one"}}
        everything = await tool_manager(ctx, config)
        assert sorted(t.name for t in everything.get_tools()) == ["tool_a", "tool_b"] and len(built) == 2
        built.clear()
        one = await tool_manager(ctx, config, only="tool_b")
        assert [t.name for t in one.get_tools()] == ["tool_b"] and built == ["tool_b"]
        for other in ("no_such_tool", "run_python_code"):  # unknown, or not among the run's tools
            assert (await tool_manager(ctx, config, only=other)).get(other) is None
    finally:
        for name in ("tool_a", "tool_b"):
            unregister_tool(name)


async def test_a_thread_in_another_runs_dir_gets_its_own_work_dir(tmp_path, monkeypatch):
    config = {"configurable": {"thread_id": "same-thread"}}
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(tmp_path / "runs-1"))
    first = await rt.run_work_dir(KGoTContext(), config)
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(tmp_path / "runs-2"))
    second = await rt.run_work_dir(KGoTContext(), config)
    assert first == (tmp_path / "runs-1" / "work" / "same-thread").resolve()
    assert second == (tmp_path / "runs-2" / "work" / "same-thread").resolve()


async def test_the_tools_model_is_built_off_the_event_loop(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A tools model that was never built (its own KGAGENTS_TOOLS_MODEL) is resolved in a worker thread; the
    next tool call of the process finds it built and stays on the loop."""
    import threading

    import kgagents.nodes.models
    from kgagents.nodes.kgot import tool_manager

    script = tmp_path / "tools-model.json"
    script.write_text('{"name": "tools-model", "steps": []}', encoding="utf-8")
    monkeypatch.setenv("KGAGENTS_TOOLS_MODEL", f"scripted:{script}")
    monkeypatch.setattr(kgagents.nodes.models, "_cache", {})
    threads: list[str] = []
    real = kgagents.nodes.models.resolve_model

    def resolve(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(kgagents.nodes.models, "resolve_model", resolve)
    ctx = KGoTContext(work_dir=str(tmp_path / "work"), tools=[])
    config = {"configurable": {"thread_id": "tools-model"}}
    first = await tool_manager(ctx, config)
    assert first.env.llm is not None and first.env.llm.script_name == "tools-model"
    assert threads and threading.current_thread().name not in threads
    threads.clear()
    second = await tool_manager(ctx, config)
    assert second.env.llm is first.env.llm and threads == []  # built before: found on the loop


@pytest.mark.slow
async def test_a_run_without_a_checkpointer_keeps_one_work_dir_of_its_own(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """The exported graph (no checkpointer, no thread id): every step of a run works in the same temporary
    folder, and another run in another one (they used to get a new folder per step), both in the process's
    own temporary folder (removed when the process exits: tests/test_tempdirs.py)."""
    import tempfile

    from kgagents.core import tempdirs
    from kgagents.core.scripted import ScriptedChatModel
    from kgagents.graphs.kgot import graph
    from tests import kgot_script as S
    from tests.test_kgot_graph import QUESTION, READ_SORTED, enhance_once

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tempdirs, "_current", None)
    keys = []
    for _ in range(2):
        steps = [*enhance_once(), *S.retrieve(READ_SORTED), *S.need_math(True), *S.math("print(23 + 42)"),
                 *S.parse("65", "65", "65")]
        ctx = KGoTContext(model=ScriptedChatModel(steps=steps), api_backoff_base_s=0.001, tool_backoff_base_s=0.001)
        state = await final_state(graph, {"question": QUESTION}, {"recursion_limit": 200}, context=ctx)
        assert state["final_answer"] == "65" and state["math_output"].strip() == "65"
        keys.append(state["run_key"])
    assert len(set(keys)) == 2 and all(k.startswith(f"{rt.EPHEMERAL}-") for k in keys)
    assert list(tmp_path.glob("kgagents-*")) == [tempdirs.process_dir()]
    assert sorted(p.name for p in (tempdirs.process_dir() / "runs").iterdir()) == sorted(keys)


def test_for_run_gives_helpers_the_run_key_only_without_a_thread():
    state = {"run_key": "ephemeral-abc"}
    assert rt.thread_id_of(rt.for_run(None, state)) == "ephemeral-abc"
    assert rt.thread_id_of(rt.for_run({"max_concurrency": 2}, state)) == "ephemeral-abc"
    threaded = {"configurable": {"thread_id": "t1"}}
    assert rt.for_run(threaded, state) is threaded and rt.for_run(None, {}) is None
    assert rt.new_run_key(threaded) == {} and rt.new_run_key(None)["run_key"].startswith("ephemeral-")
