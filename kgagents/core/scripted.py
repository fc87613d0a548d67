"""A scripted chat model: deterministic replies for offline demos, tests and a server that has no keys.

It is a real LangChain ``BaseChatModel`` (tool binding, structured output, usage metadata), so it drives
the real graphs. A script is a list of *steps*; each call takes the first step whose conditions match the
prompt and that has uses left:

``{"when": "regex", "unless": "regex", "times": 1, <one reply>}``

- ``when`` / ``unless``: a regular expression that must (must not) occur in the prompt (all message texts
  joined; ``re.S``). Missing means "any prompt". A call named by its caller (the ``kgagents_stage`` of its
  metadata: which decision of which workflow it is, e.g. ``agent thought, step 2, candidate 1``) is matched as
  ``[stage: <stage>]`` followed by the prompt -- the stage is the call's metadata, not text the model reads.
- ``times``: how many calls the step answers (default 1; ``0`` = unlimited).
- the reply, one of:
  - ``"structured": {...}`` — a call of the one tool the caller bound (how structured output arrives);
  - ``"tool_calls": [{"name": ..., "args": {...}}]`` — tool calls (for a tool-calling agent);
  - ``"content": "text"`` — a plain text reply;
  - ``"raise": "message"`` — the call fails with :class:`ScriptedAPIError` (``"status": 429`` etc. optional).

  ``"delay_s": 0.5`` makes the call take that long first (a slow model, for tests of concurrency).

A model string ``scripted:/path/to/script.json`` builds one from a file (``{"name": ..., "steps": [...]}``).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

from kgagents.core.errors import KGAgentsError

__all__ = ["CALL_STAGE", "STAGE_HEADER", "STAGE_HEADER_VARIABLE", "STAGE_KEY", "ScriptExhausted", "ScriptedAPIError",
           "ScriptedChatModel"]

#: The metadata key that names a call's stage (set by ``kgagents.nodes.llm.LLMCaller`` from the prompt's template).
STAGE_KEY = "kgagents_stage"
#: The stage of the model call in flight in this context (set by ``kgagents.nodes.llm.LLMCaller``).
CALL_STAGE: ContextVar[str | None] = ContextVar("kgagents_call_stage", default=None)
#: With ``KGAGENTS_STAGE_HEADER=1`` (the test suite sets it) OpenAI-compatible requests carry their call's stage
#: in this header, for scripted test servers (``tests/fakes/openai_server.py``), which match on it as this model
#: matches on the metadata. Off by default: a real provider never gets it.
STAGE_HEADER = "X-KGAgents-Stage"
STAGE_HEADER_VARIABLE = "KGAGENTS_STAGE_HEADER"


class ScriptExhausted(KGAgentsError, RuntimeError):
    """No step of the script matches the prompt (or every matching step is used up)."""


class ScriptedAPIError(KGAgentsError, RuntimeError):
    """A failure the script asked for; ``status_code`` lets the LLM layer treat it as an API error."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def _message_text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


class ScriptedChatModel(BaseChatModel):
    """Chat model that answers from a script of steps (see the module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    steps: list[dict[str, Any]] = Field(default_factory=list)
    script_path: str | None = None
    script_id: str | None = None
    """What identifies a model built from a file (the file's stem), in requests' fingerprints."""
    """A script file to load the steps from, on the first call (so building the model does no I/O)."""
    script_name: str = "scripted"
    model_name: str = "scripted"
    _uses: list[int] = PrivateAttr(default_factory=list)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    calls: list[str] = Field(default_factory=list, exclude=True)
    """Prompts received, in order (for tests)."""

    def model_post_init(self, __context: Any) -> None:
        self._validate()

    def __getstate__(self) -> dict[Any, Any]:
        """Picklable (for worker processes): the lock stays behind, the copy gets its own."""
        state = super().__getstate__()
        private = {k: v for k, v in (state.get("__pydantic_private__") or {}).items() if k != "_lock"}
        return {**state, "__pydantic_private__": private}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        self._lock = threading.Lock()

    def _validate(self) -> None:
        for i, step in enumerate(self.steps):
            replies = [k for k in ("structured", "tool_calls", "content", "raise") if k in step]
            if len(replies) != 1:
                raise ValueError(f"script step {i} needs exactly one of structured/tool_calls/content/raise: {step}")
            for key in ("when", "unless"):
                if key in step:
                    re.compile(step[key])
        self._uses = [0] * len(self.steps)

    @classmethod
    def from_file(cls, path: str | Path, *, lazy: bool = False) -> ScriptedChatModel:
        """A model for the script file ``{"name": ..., "steps": [...]}``; errors name the file.

        With ``lazy=True`` the file is read on the first call rather than now.
        """
        model = cls(script_path=str(path), script_name=Path(path).stem, script_id=Path(path).stem)
        if not lazy:
            model._load()
        return model

    def _load(self) -> None:
        path = Path(self.script_path or "")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the chat-model script {path}: {exc}") from exc
        if isinstance(data, list):
            data = {"steps": data}
        self.steps = list(data.get("steps", []))
        self.script_name = data.get("name", path.stem)
        self._validate()
        self.script_path = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        # the same before and after the script file is read (its "name" replaces the file's stem in messages):
        # a request's identity must not change with when the model happened to load its steps
        return {"model_name": self.model_name, "script": self.script_id or self.script_name}

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        """Bind tools as OpenAI-style schemas; the reply step decides which tool is called."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, method: str | None = None,
                               **kwargs: Any):
        """Structured output through a forced tool call, whatever ``method`` the caller prefers."""
        return super().with_structured_output(schema, include_raw=include_raw, **kwargs)

    def remaining(self) -> list[dict[str, Any]]:
        """Steps with uses left (``times`` > 0 and not exhausted)."""
        return [s for s, used in zip(self.steps, self._uses, strict=True)
                if s.get("times", 1) and used < s.get("times", 1)]

    def next_step(self, prompt: str) -> dict[str, Any]:
        """The step that answers ``prompt`` (its use counted, the prompt recorded in :attr:`calls`)."""
        with self._lock:
            if self.script_path:
                self._load()
            self.calls.append(prompt)
            for i, step in enumerate(self.steps):
                times = step.get("times", 1)
                if times and self._uses[i] >= times:
                    continue
                if "when" in step and not re.search(step["when"], prompt, re.DOTALL):
                    continue
                if "unless" in step and re.search(step["unless"], prompt, re.DOTALL):
                    continue
                self._uses[i] += 1
                return step
        head = prompt[:600].replace("\n", " ")
        raise ScriptExhausted(f"script {self.script_name!r} has no step left for this prompt: {head}...")

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        prompt = "\n".join(_message_text(m) for m in messages)
        stage = (run_manager.metadata or {}).get(STAGE_KEY) if run_manager is not None else None
        step = self.next_step(f"[stage: {stage}]\n{prompt}" if stage else prompt)
        if step.get("delay_s"):
            time.sleep(float(step["delay_s"]))  # LangChain runs this in a worker thread for async callers
        if "raise" in step:
            raise ScriptedAPIError(str(step["raise"]), step.get("status"))
        tool_calls: list[dict[str, Any]] = []
        content = ""
        if "structured" in step:
            tools = kwargs.get("tools") or []
            if not tools:
                raise ScriptExhausted(f"script step {step} gives structured output but no schema was bound")
            choice = kwargs.get("tool_choice")
            name = tools[0]["function"]["name"]
            if isinstance(choice, str) and choice not in {"any", "auto", "required", "none"}:
                name = choice
            elif isinstance(choice, dict):
                name = choice.get("function", {}).get("name", name)
            tool_calls = [{"name": name, "args": step["structured"], "id": f"call_{uuid.uuid4().hex[:12]}",
                           "type": "tool_call"}]
        elif "tool_calls" in step:
            tool_calls = [{"name": c["name"], "args": c.get("args", {}),
                           "id": c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                           "type": "tool_call"} for c in step["tool_calls"]]
        else:
            content = str(step["content"])
        out_text = content + json.dumps([c["args"] for c in tool_calls]) if tool_calls else content
        usage = {
            "input_tokens": len(prompt) // 4 + 1,
            "output_tokens": len(out_text) // 4 + 1,
            "total_tokens": len(prompt) // 4 + len(out_text) // 4 + 2,
        }
        message = AIMessage(content=content, tool_calls=tool_calls, usage_metadata=usage,
                            response_metadata={"model_name": self.model_name})
        return ChatResult(generations=[ChatGeneration(message=message)])
