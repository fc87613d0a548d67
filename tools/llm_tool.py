"""The LLM Tool: asks another instance of the model a self-contained question (KGoT paper, §3.3).

Meant for simple, objective questions no other tool fits; its answer is flagged as model knowledge so the
controller can weigh it.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from kgagents.core.config import Settings
from kgagents.tools.manager import ToolEnv, ToolStatus, register_tool

SYSTEM = ("You answer self-contained questions from your own knowledge, precisely and briefly. If you do not "
          "know, or the question needs information you cannot have (files, recent events, web pages), say so "
          "instead of guessing.")


class LLMToolInput(BaseModel):
    query: str = Field(description="A complete, self-contained question with all the context it needs.")


class LLMTool(BaseTool):
    """Answer a question with the tools' own chat model."""

    name: str = "llm_query"
    description: str = (
        "Ask a language model a self-contained question and get its answer from general knowledge. Use it for "
        "simple, objective questions (definitions, well-known facts, unit conversions, short reasoning) when no "
        "other tool fits. It cannot browse the web, read files or run code. Example: "
        "llm_query(query=\"What is the chemical symbol of tungsten?\")"
    )
    args_schema: type[BaseModel] = LLMToolInput
    env: ToolEnv

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, query: str) -> str:  # pragma: no cover - the workflows call the async variant
        raise NotImplementedError("llm_query runs asynchronously")

    async def _arun(self, query: str) -> str:
        reply = await self.env.ask_llm([SystemMessage(SYSTEM), HumanMessage(query)])
        text = reply.text if isinstance(reply.text, str) else str(reply.content)
        return f"(answer from the language model's own knowledge) {text.strip()}"


def make_llm_tool(env: ToolEnv) -> LLMTool:
    return LLMTool(env=env)


def check_llm_tool(settings: Settings) -> ToolStatus:
    if settings.model or settings.model_for("tools"):
        return ToolStatus("llm_query", True, "available")
    return ToolStatus("llm_query", True, "available when a chat model is configured for the run")


register_tool(make_llm_tool, name="llm_query", check=check_llm_tool)
