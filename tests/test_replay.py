"""Recorded model exchanges (kgagents.core.replay): fingerprints, the persistent cache, replay's refusals."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from kgagents.core.failures import FailureKind
from kgagents.core.replay import (
    RecordedFailure,
    Recording,
    ReplayDivergence,
    fingerprint,
    is_sampled,
    raise_failure,
    using,
)
from kgagents.core.retry import failure_kind, is_transient
from kgagents.core.scripted import ScriptedChatModel
from kgagents.nodes.context import BaseContext
from kgagents.nodes.llm import LLMCaller, LLMError


def _ask(model, text="What is 2 + 2?"):
    return asyncio.run(model.ainvoke([HumanMessage(text, id="a-new-id-every-run")])).content


def test_message_ids_do_not_change_a_fingerprint_but_content_and_parameters_do():
    a = '[{"lc": 1, "kwargs": {"content": "hi", "id": "run-1"}}]'
    b = '[{"lc": 1, "kwargs": {"content": "hi", "id": "run-2"}}]'
    c = '[{"lc": 1, "kwargs": {"content": "ho", "id": "run-1"}}]'
    assert fingerprint(a, "m---[('temperature', 0)]") == fingerprint(b, "m---[('temperature', 0)]")
    assert fingerprint(a, "m") != fingerprint(c, "m")
    assert fingerprint(a, "m---[('temperature', 0)]") != fingerprint(a, "m---[('temperature', 0.7)]")


@pytest.mark.parametrize("llm_string,sampled", [
    ("x---[('model', 'gpt-4o'), ('temperature', 0.0)]", False),
    ("x---[('model', 'gpt-4o'), ('temperature', 0)]", False),
    ('{"temperature": 0.0, "model": "m"}', False),
    ("x---[('model', 'gpt-4o'), ('temperature', 0.7)]", True),
    ("x---[('model', 'gpt-4o'), ('temperature', None)]", True),
    ("x---[('model', 'gpt-4o')]", True),  # the provider's default temperature samples
])
def test_what_counts_as_a_sampled_call(llm_string, sampled):
    assert is_sampled(llm_string) is sampled


def test_the_cache_serves_a_request_seen_before_only_when_it_may(tmp_path):
    path = tmp_path / "cache.sqlite"

    def model():
        return ScriptedChatModel(steps=[{"content": "4", "times": 1}], model_name="m")

    # a sampled call (the scripted model gives no temperature) is not served unless asked
    cache = Recording(path, "cache")
    with using(cache):
        assert _ask(model()) == "4"
        assert _ask(model()) == "4"  # a new model, its one step: the model was called again
    assert cache.hits == 0 and len(cache) == 1
    with using(Recording(path, "cache", cache_sampled=True)) as sampled:
        exhausted = ScriptedChatModel(steps=[], model_name="m")
        assert _ask(exhausted) == "4" and sampled.hits == 1  # from the cache: the model has no step
        with pytest.raises(Exception, match="no step left"):
            _ask(exhausted, "another question")


def test_replay_answers_in_the_recorded_order_and_refuses_the_rest(tmp_path):
    path = tmp_path / "rec.sqlite"
    with using(Recording(path, "record")) as recording:
        model = ScriptedChatModel(steps=[{"content": "first"}, {"content": "second"}], model_name="m")
        assert [_ask(model), _ask(model)] == ["first", "second"]
    assert len(recording) == 2
    replay = Recording(path, "replay")
    with using(replay):
        silent = ScriptedChatModel(steps=[], model_name="m")
        assert [_ask(silent), _ask(silent)] == ["first", "second"]
        with pytest.raises(ReplayDivergence, match=r"recorded 2 time\(s\); this is call 3"):
            _ask(silent)
        with pytest.raises(ReplayDivergence, match="outside a graph node"):
            _ask(silent, "a question nobody asked")
    assert len(replay.divergences) == 2 and replay.unused() == 0


def test_a_missing_recording_and_a_bad_mode_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="record a run with --record first"):
        Recording(tmp_path / "none.sqlite", "replay")
    with pytest.raises(ValueError, match="record, replay or cache"):
        Recording(tmp_path / "x.sqlite", "play")  # type: ignore[arg-type]


def test_failed_calls_are_recorded_in_place_and_replayed_as_the_same_errors(tmp_path):
    """A call that met a 503 and then succeeded, and one that failed for good, replay along the same path: the
    same attempts, the same error text, the same answer."""
    def caller(model):
        return LLMCaller(BaseContext(model=model, max_api_retries=2, api_backoff_base_s=0.001), "reasoner")

    async def both(model):
        first = await caller(model).text("Question one?")
        with pytest.raises(LLMError) as failed:
            await caller(model).text("Question two?")
        return first, str(failed.value)

    path = tmp_path / "rec.sqlite"
    steps = [{"match": "one", "raise": "busy", "status": 503, "times": 1}, {"match": "one", "content": "42"},
             {"match": "two", "raise": "server fault", "status": 500, "times": 0}]
    with using(Recording(path, "record")) as recording:
        recorded = asyncio.run(both(ScriptedChatModel(steps=steps, model_name="m")))
    assert recorded[0] == "42" and "after 3 attempt(s): ScriptedAPIError: server fault" in recorded[1]
    failures = [e.failure for e in recording.exchanges() if e.failure]
    assert len(recording) == 5 and len(failures) == 4  # 503, then 42; 500 three times
    assert {(f["status"], f["transient"], f["type"], f["failure_kind"]) for f in failures} == {
        (503, True, "ScriptedAPIError", "server error"), (500, True, "ScriptedAPIError", "server error")}

    replay = Recording(path, "replay")
    with using(replay):
        replayed = asyncio.run(both(ScriptedChatModel(steps=[], model_name="m")))
    assert replayed == recorded and replay.unused() == 0 and not replay.divergences

    with using(Recording(path, "cache", cache_sampled=True)) as cache:  # a cache serves replies, never failures
        assert _ask(ScriptedChatModel(steps=[], model_name="m"), "Question one?") == "42" and cache.hits == 1
    # a recorded failure that was not worth retrying stays so
    with pytest.raises(RecordedFailure) as raised:
        raise_failure({"type": "BadRequestError", "message": "no", "status": 400, "transient": False,
                       "kind": None})
    assert type(raised.value).__name__ == "BadRequestError" and raised.value.status_code == 400
    assert not is_transient(raised.value)
    # a failure replays as the kind it was recorded with; one recorded before kinds were kept, by its flag
    with pytest.raises(RecordedFailure) as raised:
        raise_failure({"type": "APIError", "message": "slow", "status": None, "transient": True, "kind": None,
                       "failure_kind": "timeout"})
    assert failure_kind(raised.value) is FailureKind.TIMEOUT and is_transient(raised.value)
    with pytest.raises(RecordedFailure) as raised:
        raise_failure({"type": "APIError", "message": "odd", "status": None, "transient": True, "kind": None})
    assert failure_kind(raised.value) is FailureKind.SERVER and is_transient(raised.value)
