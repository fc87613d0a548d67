"""Each KGoT template has exactly the placeholders its node fills, and XML sections that open also close."""

from __future__ import annotations

import re

import pytest

from kgagents.prompts import kgot as P
from kgagents.prompts import kgot_cypher, kgot_sparql  # noqa: F401  (register the Cypher and SPARQL languages)

EXPECTED = {
    "NEXT_STEP": {"problem", "existing_data", "tool_calls_made", "solve_operation", "solve_guide",
                  "retrieve_examples"},
    "MERGE_REASONS": {"problem", "reasons"},
    "DEFINE_TOOL_CALLS": {"problem", "attachments", "existing_data", "missing_information", "tool_calls_made"},
    "WRITE_KG": {"language_name", "language_guide", "examples", "problem", "existing_data", "missing_information",
                 "new_information"},
    "FIX_CODE": {"language_name", "language_guide", "code", "error"},
    "RETRIEVE": {"language_name", "language_guide", "examples", "problem", "existing_data"},
    "REGENERATE_QUERY": {"language_name", "language_guide", "examples", "problem", "existing_data", "wrong_query",
                         "error"},
    "DIRECT_RETRIEVAL": {"problem", "existing_data"},
    "FORCED_SOLUTION": {"problem", "existing_data"},
    "FORCED_RETRIEVE": {"language_name", "language_guide", "examples", "problem", "existing_data"},
    "NEED_FOR_MATH": {"problem", "partial_solution"},
    "MATH_WITH_PYTHON": {"problem", "partial_solution"},
    "PARSE_SOLUTION": {"format_rules", "problem", "partial_solution"},
    "CHOOSE_SOLUTION": {"problem", "partial_solution", "candidates"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_placeholders(name):
    assert P.placeholders(getattr(P, name)) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_xml_sections_are_balanced(name):
    template = getattr(P, name)
    opened = re.findall(r"<([a-z_]+)>", template)
    closed = re.findall(r"</([a-z_]+)>", template)
    assert sorted(opened) == sorted(closed)
    assert "<task>" in template and "<instructions>" in template


def test_render_rejects_missing_and_extra_values():
    with pytest.raises(KeyError, match="missing"):
        P.render(P.DIRECT_RETRIEVAL, problem="x")
    with pytest.raises(KeyError, match="unexpected"):
        P.render(P.DIRECT_RETRIEVAL, problem="x", existing_data="y", other="z")


def test_every_query_language_has_guides_and_examples():
    for lang in P.LANGUAGES.values():
        assert lang.write_guide and lang.write_examples and lang.read_guide and lang.read_examples
        # guides and examples are inserted verbatim: braces would break str.format of the outer template
        rendered = P.render(P.WRITE_KG, language_name=lang.name, language_guide=lang.write_guide,
                            examples=lang.write_examples, problem="p", existing_data="d", missing_information="m",
                            new_information="n")
        assert lang.write_examples in rendered


def test_next_step_asks_each_mode_for_its_solve_operation():
    """Query mode: the read query in the KG's language, with its read guide and examples (inserted verbatim, so
    their braces stay); Direct Retrieval: the answer."""
    for lang in P.LANGUAGES.values():
        rendered = P.render(P.NEXT_STEP, problem="p", existing_data="d", tool_calls_made="t",
                            **P.next_step_query_mode(lang))
        assert f"the {lang.name} code that reads from the graph" in rendered
        assert lang.read_guide in rendered and lang.read_examples in rendered
    direct = P.render(P.NEXT_STEP, problem="p", existing_data="d", tool_calls_made="t", **P.NEXT_STEP_DIRECT)
    assert "give in `solve_operation` the solution you derive" in direct and "code" not in direct.split("<examples>")[0]


def test_no_prompt_holds_text_for_a_scripted_model():
    """A prompt holds only what the model should read: the stage that names a call is its metadata
    (:class:`kgagents.prompts.template.Template`), never a line of the text."""
    import importlib
    import pkgutil

    import kgagents.prompts
    from kgagents.prompts.template import Template

    staged = 0
    for info in pkgutil.iter_modules(kgagents.prompts.__path__):
        module = importlib.import_module(f"kgagents.prompts.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, str) and not name.startswith("__"):
                assert "[stage" not in value and not value.startswith("[reasoning step"), f"{info.name}.{name}"
                staged += isinstance(value, Template)
    assert staged >= 27  # the grounded, Agent-G and CRAG judge templates name their calls


@pytest.mark.slow
async def test_a_calls_stage_travels_as_metadata_and_never_in_the_request(monkeypatch):
    """Through the real OpenAI client: the request holds the prompt only; its stage goes as a header only when a
    scripted test server asks for it (KGAGENTS_STAGE_HEADER), and a scripted model reads it from the metadata."""
    from kgagents.core.scripted import ScriptedChatModel
    from kgagents.nodes.kgot import KGoTContext
    from kgagents.nodes.llm import LLMCaller
    from kgagents.prompts.template import Template, render
    from tests.fakes.openai_server import FakeOpenAIServer

    template = Template("probe, step {n}", "Say hi, {who}.")
    with FakeOpenAIServer() as server:
        server.reply("hi").reply("hi")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        llm = LLMCaller(KGoTContext(model="openai:gpt-4o-mini", base_url=server.base_url), "graph_executor")
        monkeypatch.delenv("KGAGENTS_STAGE_HEADER")
        assert await llm.text(render(template, n=2, who="Ann")) == "hi"
        monkeypatch.setenv("KGAGENTS_STAGE_HEADER", "1")
        assert await llm.text(render(template, n=3, who="Bo")) == "hi"
    first, second = server.requests[-2:]
    assert first.messages[-1]["content"] == "Say hi, Ann." and "probe" not in first.raw.decode()
    assert not any(k.lower() == "x-kgagents-stage" for k in first.headers)
    assert second.headers.get("x-kgagents-stage") == "probe, step 3" and "probe" not in second.raw.decode()
    model = ScriptedChatModel(steps=[{"when": r"^\[stage: probe, step 4\]\nSay hi, Cy\.$", "content": "ok"}])
    assert await LLMCaller(KGoTContext(model=model), "graph_executor").text(render(template, n=4, who="Cy")) == "ok"
