"""Each KGoT template has exactly the placeholders its node fills, and XML sections that open also close."""

from __future__ import annotations

import re

import pytest

from prompts import kgot as P
from prompts import kgot_cypher, kgot_sparql  # noqa: F401  (register the Cypher and SPARQL languages)

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
