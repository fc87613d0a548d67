"""The embedding cache of Agent-G's text module (``embedding_cache``): each page's passages embedded and its HTML
converted once per model and content, in memory or on disk, with the run's pages, ranking and answer unchanged."""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.graphs.agent_g import compile_graph
from kgagents.nodes.agent_g import AgentGContext, page_texts
from kgagents.nodes.agent_g import pages as agent_g_pages
from kgagents.nodes.retriever_bank import passages, rank_pages
from kgagents.tools.pgraph import embedding_cache as cache_module
from kgagents.tools.pgraph.embedding_cache import FILE_NAME, EmbeddingCache, check_cache_setting, embedding_cache
from tests.agent_g.conftest import comment, decide, step, validate


class Counting:
    """A deterministic embedder that records what it is asked to embed."""

    def __init__(self, model_id: str | None = "counting", delay: float = 0.0, fail: int = 0) -> None:
        if model_id is not None:
            self.model_id = model_id
        self.calls: list[list[str]] = []
        self.delay, self.fail = delay, fail
        self._lock = threading.Lock()

    def encode(self, texts):
        with self._lock:
            self.calls.append(list(texts))
            if self.fail:
                self.fail -= 1
                raise RuntimeError("the model failed")
        time.sleep(self.delay)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8)[:8].astype(np.float32) + 1
                for t in texts]
        return np.stack(rows) if rows else np.zeros((0, 8), dtype=np.float32)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]


def test_vectors_are_the_models_and_each_text_is_embedded_once():
    cache, model = EmbeddingCache(), Counting()
    first = cache.encode(["a", "b", "a"], model)
    assert np.array_equal(first, Counting().encode(["a", "b", "a"]))
    assert model.calls == [["a", "b"]]  # the missing texts in the caller's order, in one call
    second = cache.encode(["b", "c"], model)
    assert model.calls[1:] == [["c"]] and np.array_equal(second[0], first[1])
    assert (cache.hits, cache.misses) == (1, 3)
    other = Counting("another-model")
    cache.encode(["a"], other)
    assert other.calls == [["a"]]  # vectors are kept per model


def test_an_embedder_without_a_stable_id_is_not_cached():
    cache, model = EmbeddingCache(), Counting(model_id=None)
    cache.encode(["a"], model)
    cache.encode(["a"], model)
    assert model.calls == [["a"], ["a"]]


def test_the_disk_cache_serves_a_new_instance_and_its_texts(tmp_path):
    path = tmp_path / "cache" / FILE_NAME
    model = Counting()
    vectors = EmbeddingCache(path).encode(["x", "y"], model)
    calls = []
    EmbeddingCache(path).text("kind", "<html>x</html>", lambda: calls.append(1) or "x")
    again = EmbeddingCache(path)  # another process, a later run
    assert np.array_equal(again.encode(["y", "x"], model), vectors[::-1]) and model.calls == [["x", "y"]]
    assert again.text("kind", "<html>x</html>", lambda: calls.append(1) or "other") == "x" and calls == [1]
    assert again.text("other kind", "<html>x</html>", lambda: "converted otherwise") == "converted otherwise"


def test_a_cache_file_that_cannot_be_opened_is_a_clear_error(tmp_path):
    (tmp_path / "a file").write_text("x")
    with pytest.raises(ValueError, match=r"the embedding cache .* cannot be opened .*another file, or memory"):
        EmbeddingCache(tmp_path / "a file" / FILE_NAME).encode(["a"], Counting())
    cache = EmbeddingCache(tmp_path / "a file" / FILE_NAME)
    with pytest.raises(ValueError, match="cannot be opened"):
        cache.text("kind", "<html></html>", lambda: "x")


def test_concurrent_requests_for_the_same_texts_embed_them_once():
    cache, model = EmbeddingCache(), Counting(delay=0.05)
    texts = [f"passage {i}" for i in range(20)]
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: results.append(cache.encode(texts, model))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(model.embedded) == sorted(texts)  # one thread embedded them, the others waited
    assert all(np.array_equal(r, results[0]) for r in results)


def test_a_failed_encode_leaves_nothing_waiting():
    cache, model = EmbeddingCache(), Counting(fail=1)
    with pytest.raises(RuntimeError, match="the model failed"):
        cache.encode(["a"], model)
    assert cache.encode(["a"], model).shape == (1, 8) and model.calls == [["a"], ["a"]]


def test_the_memory_bound_drops_the_least_recently_used():
    cache, model = EmbeddingCache(max_bytes=3 * 8 * 4), Counting()
    cache.encode(["a", "b", "c"], model)
    cache.encode(["a"], model)  # a is used again: b is the oldest
    cache.encode(["d"], model)
    cache.encode(["a", "b"], model)
    assert model.calls[-1] == ["b"]


def test_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("KGAGENTS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cache_module, "_caches", {})
    assert embedding_cache("off") is None and embedding_cache(None) is None
    assert embedding_cache("memory") is embedding_cache("memory") and embedding_cache("memory").path is None
    assert embedding_cache("disk").path == tmp_path / "home" / "cache" / FILE_NAME
    folder = tmp_path / "runs"
    folder.mkdir()
    assert embedding_cache(str(folder)).path == folder / FILE_NAME
    assert embedding_cache(str(tmp_path / "e.sqlite")).path == tmp_path / "e.sqlite"
    for bad in ("of", "", 3):
        with pytest.raises(ValueError, match="embedding_cache is one of off, memory, disk"):
            check_cache_setting(bad)
    with pytest.raises(ValueError, match="embedding_cache"):
        AgentGContext(model="scripted", embedding_cache="of")
    assert AgentGContext(model="scripted").embedding_cache == "memory"


def test_ranked_pages_are_the_same_with_a_cache_warmed_elsewhere():
    """The pages kept and their order from a cache filled by other calls are those computed without one."""
    model = Counting()
    pages = [("Band", "Maroon 5 is a band.\n\nPJ Morton plays keyboards."), ("Weather", "It rains in spring."),
             ("Copy", "Maroon 5 is a band.\n\nPJ Morton plays keyboards.")]
    question = "who plays keyboards in maroon 5?"
    plain = rank_pages(question, pages, model, max_chars=40)
    cache = EmbeddingCache()
    for name, text in pages:
        cache.encode([name, *passages(text)], model)
    model.calls.clear()
    assert rank_pages(question, pages, model, max_chars=40, cache=cache) == plain
    assert model.calls == [[question]]  # only the question was new


def test_page_texts_convert_each_html_once(monkeypatch):
    converted: list[bytes] = []
    real = agent_g_pages.convert_bytes

    def counting(data, **kwargs):
        converted.append(data)
        return real(data, **kwargs)

    monkeypatch.setattr(agent_g_pages, "convert_bytes", counting)
    html = "<html><body><p>Maroon 5 is a band.</p></body></html>"
    pages = [{"html": html}, {"html": html}, {"html": "<html></html>", "snippet": "own snippet"},
             {"html": "<html></html>", "snippet": "other snippet"}, {"text": "given text"}]
    cache = EmbeddingCache()
    texts = page_texts(pages, cache)
    assert texts[0] == texts[1] and "Maroon 5" in texts[0]
    assert texts[2:] == ["own snippet", "other snippet", "given text"]  # an empty conversion: each page's snippet
    assert len(converted) == 2
    assert page_texts(pages, cache) == texts and len(converted) == 2  # the cache holds the conversions
    assert page_texts(pages) == texts and len(converted) == 4  # without a cache: each HTML once per call


PAGES = [{"name": f"Page {i}", "url": f"https://example.org/{i}", "snippet": f"snippet {i}",
          "html": f"<html><body><h1>Page {i}</h1><p>{text}</p></body></html>"}
         for i, text in enumerate(["Maroon 5 is an American pop rock band.", "The weather in Paris is mild.",
                                   "Adam Levine sings in Maroon 5.", "Recipes for apple pie.",
                                   "Stock prices fell on Monday.", "Cats sleep a lot.",
                                   "Maroon 5 members: Adam Levine, James Valentine, PJ Morton."])]


async def _run(embedder: Counting, setting: str, thread: str) -> dict:
    steps = [decide(1, source="text documents", domain="music", question_type="set", dynamism="slow-changing"),
             step(r"\[stage: generator, iteration 1\]", content="Final answer: Adam Levine"),
             validate(1, "no"), comment(1, "incorrect retrieval module"),
             decide(2, source="text documents", next_batch=True),
             step(r"\[stage: generator, iteration 2\]", content="Final answer: PJ Morton"), validate(2, "yes")]
    context = AgentGContext(model=ScriptedChatModel(steps=steps), task="generation", embedding_model=embedder,
                            embedding_cache=setting, api_backoff_base_s=0.001)
    graph = compile_graph(InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": context.recursion_limit}
    task = {"question": "who plays keyboards in maroon 5?", "pages": PAGES}
    async for _ in graph.astream(task, config, context=context):
        pass
    return dict((await graph.aget_state(config)).values)


async def test_a_run_with_the_cache_is_the_run_without_it(tmp_path, monkeypatch):
    """Agent-G's state (the pages read, their order, every iteration and the answer) is the same with the cache
    off, with it cold and with it warm; the warm run embeds nothing and converts no page."""
    monkeypatch.setattr(cache_module, "_caches", {})
    cache_file = str(tmp_path / "pages.sqlite")
    embedder = Counting()
    without = await _run(embedder, "off", "off")
    embedded = len(embedder.embedded)
    cold = await _run(embedder, cache_file, "cold")
    assert len(embedder.embedded) == 2 * embedded
    monkeypatch.setattr(cache_module, "_caches", {})  # a new process: the file alone holds them
    monkeypatch.setattr(agent_g_pages, "convert_bytes", lambda *a, **k: pytest.fail("a page was converted again"))
    warm = await _run(embedder, cache_file, "warm")
    assert len(embedder.embedded) == 2 * embedded
    keys = ("pages", "page_order", "iterations", "final_answer", "exit_reason")
    assert {k: cold[k] for k in keys} == {k: without[k] for k in keys} == {k: warm[k] for k in keys}
    assert without["final_answer"] == "PJ Morton"
