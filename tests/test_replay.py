"""Recorded model exchanges (kgagents.core.replay): fingerprints, the persistent cache, replay's refusals."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from kgagents.core.replay import Recording, ReplayDivergence, fingerprint, is_sampled, using
from kgagents.core.scripted import ScriptedChatModel


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
