"""Prompt templates of the KGoT paper's baselines (§5, Figure 5): the model alone (zero-shot), simple RAG and
GraphRAG over KGoT's tool outputs, and KGoT's loop with no knowledge graph.

Zero-shot, simple RAG and GraphRAG end their reply with ``FINAL ANSWER: ...`` formatted by the same rules as
KGoT's parser (:data:`kgagents.prompts.kgot.FORMATTERS`), so that a report compares like with like. The "no KG" baseline
goes through KGoT's own tool executor, math step and solution parser; its own prompts are the vote and the
solution, which read the tool outputs where KGoT reads its knowledge graph.
"""

from __future__ import annotations

from kgagents.prompts.kgot import FORMATTERS
from kgagents.prompts.template import placeholders, render

__all__ = ["FINAL_ANSWER_MARK", "FORMATTERS", "GRAPHRAG_ANSWER", "GRAPHRAG_EXTRACT", "NOKG_FORCED_SOLUTION",
           "NOKG_NEXT_STEP", "NOKG_SOLUTION", "RAG_ANSWER", "ZERO_SHOT", "placeholders", "render"]

FINAL_ANSWER_MARK = "FINAL ANSWER:"

ZERO_SHOT = """<task>
You are a general AI assistant. Answer the initial problem from your own knowledge and reasoning alone.
</task>

<instructions>
1. Think the problem through step by step, briefly.
2. End your reply with one line of the form `FINAL ANSWER: <answer>`.
3. If you cannot answer, still give your best guess on the FINAL ANSWER line.
{format_rules}
</instructions>

<initial_problem>
{problem}
</initial_problem>

<attachments>
{attachments}
</attachments>
"""

RAG_ANSWER = """<task>
You are a general AI assistant. Solve the initial problem using the retrieved chunks of tool outputs below and
your own reasoning.
</task>

<instructions>
1. Use the retrieved chunks as your evidence; do not invent facts they contradict.
2. End your reply with one line of the form `FINAL ANSWER: <answer>`.
3. If the chunks do not settle the problem, still give your best answer on the FINAL ANSWER line.
{format_rules}
</instructions>

<initial_problem>
{problem}
</initial_problem>

<retrieved_chunks>
{retrieved}
</retrieved_chunks>
"""

GRAPHRAG_EXTRACT = """<task>
You are an information extractor building a knowledge graph. Extract the entities and the relations between
them that the tool output below states.
</task>

<instructions>
1. An entity is a person, organisation, place, work, object, event, quantity or concept the text names. Give
   each its name as the text writes it, a short type (Person, City, Album, Number, ...) and a one-sentence
   description holding the facts the text gives about it (dates, numbers, attributes).
2. A relation links two extracted entities: `source`, a short verb phrase `relation` in upper snake case
   (WON, LOCATED_IN, RELEASED_IN, ...) and `target`, with a one-sentence description.
3. Extract only what the text states; do not add knowledge of your own. No entities: empty lists.
</instructions>

<tool_call>
{source}
</tool_call>

<tool_output>
{text}
</tool_output>
"""

GRAPHRAG_ANSWER = """<task>
You are a general AI assistant. Solve the initial problem using the part of the knowledge graph retrieved for it
(entities and relations extracted from tool outputs) and the tool outputs they were extracted from.
</task>

<instructions>
1. Use the retrieved graph and source chunks as your evidence; do not invent facts they contradict.
2. End your reply with one line of the form `FINAL ANSWER: <answer>`.
3. If they do not settle the problem, still give your best answer on the FINAL ANSWER line.
{format_rules}
</instructions>

<initial_problem>
{problem}
</initial_problem>

<retrieved_graph>
{graph}
</retrieved_graph>

<source_chunks>
{chunks}
</source_chunks>
"""

NOKG_NEXT_STEP = """<task>
You are a problem solver using the outputs of the tools called so far to solve a given problem. They may not
hold everything needed yet.
</task>

<instructions>
Understand the initial problem, its nuances, ALL the tool outputs below and the tools already called.
Can you solve the initial problem using the tool outputs?
- If the tool outputs are sufficient to solve the problem, set query_type to RETRIEVE and give the answer you
  would derive in `reason`.
- If they are insufficient, set query_type to INSERT and explain in `reason` why you cannot solve the problem
  and exactly which information is missing.
- If you only have part of the information (for example some calculations or lookups are still needed),
  choose INSERT.
- The problem's attachments (if any) are known only through the outputs of tools that read them.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<tool_outputs>
{tool_outputs}
</tool_outputs>

<tool_calls_made>
{tool_calls_made}
</tool_calls_made>
"""

NOKG_SOLUTION = """<task>
You are a problem solver. Solve the initial problem using only the tool outputs given below.
</task>

<instructions>
1. Understand the initial problem, its nuances and ALL the tool outputs.
2. Derive the solution from the tool outputs only; do not invent facts.
3. Give the solution with the values it rests on.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<tool_outputs>
{tool_outputs}
</tool_outputs>
"""

NOKG_FORCED_SOLUTION = """<task>
You are a problem solver. The budget for collecting more information is spent: give the best solution the tool
outputs below support, even if it is incomplete.
</task>

<instructions>
1. Understand the initial problem and ALL the tool outputs.
2. Derive the most likely solution from them; do not invent facts that contradict them.
3. If they give no basis for any answer at all, say so plainly.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<tool_outputs>
{tool_outputs}
</tool_outputs>
"""
