"""Prompt templates of the KGoT paper's baselines: the model alone (zero-shot) and simple RAG over tool outputs.

Both end their reply with ``FINAL ANSWER: ...`` formatted by the same rules as KGoT's parser
(:data:`prompts.kgot.FORMATTERS`), so that a report compares like with like.
"""

from __future__ import annotations

from prompts.kgot import FORMATTERS, placeholders, render

__all__ = ["FINAL_ANSWER_MARK", "FORMATTERS", "RAG_ANSWER", "RAG_TOOL_CALLS", "ZERO_SHOT", "placeholders", "render"]

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

RAG_TOOL_CALLS = """<task>
You are an information retriever. The outputs of your tool calls are stored as text chunks and the most relevant
chunks are shown to you below. Call the tools that obtain the information still missing to solve the initial
problem. When the retrieved chunks already hold everything needed, call no tool and reply `DONE`.
</task>

<instructions>
1. Give each tool precise, self-contained arguments (full file paths, full questions).
2. Never repeat a tool call listed in the tool calls made with the same arguments.
3. When no specialised tool fits, ask the LLM tool.
4. Do not invent facts, file names or URLs.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<attachments>
{attachments}
</attachments>

<retrieved_chunks>
{retrieved}
</retrieved_chunks>

<tool_calls_made>
{tool_calls_made}
</tool_calls_made>
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
