"""An evaluation's LLM grader (GPT4Score's judge, SimpleQA's and CRAG's graders): one setting, which the start line
shows, the start checks, ``--estimate`` prices and the scorer calls.

Which model: ``--grader-model`` (``EvalOptions.grader_model``), else the benchmark's own judge where its paper names
one (:data:`kgagents.evals.scorers.DEFAULT_GRADERS`, GRBench's GPT-4o), else the run's model. ``none``: no judge.

Where it sends (:func:`judge_endpoint`): ``--grader-base-url`` or ``KGAGENTS_GRADER_BASE_URL`` when given; else a
judge that is the run's own model goes where the run's model goes; else a bare model name goes to the
OpenAI-compatible server ``KGAGENTS_BASE_URL`` (what a bare name means); else the judge's provider's own API
(``openai:gpt-4o``: ``OPENAI_BASE_URL`` or OpenAI's API) — never the run's local server under another model's name.
The keys follow :mod:`kgagents.core.keys`: a key goes only to the server it is bound to
(``KGAGENTS_GRADER_API_KEY`` to ``KGAGENTS_GRADER_BASE_URL``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgagents.core.config import ConfigurationError, get_settings
from kgagents.core.keys import GRADER, OPENAI, OPENAI_PROTOCOL, key_for, same_server
from kgagents.evals.scorers import DEFAULT_GRADERS
from kgagents.nodes.models import build_chat_model, is_provider

#: Scorers whose verdicts come from an LLM grader.
LLM_GRADED_SCORERS = ("simpleqa", "crag", "crag-alternatives", "agent-g-paper", "grbench")
#: Providers whose chat models take no base URL of ours (their own settings say where they send); so does every
#: other provider LangChain knows but ``openai`` (:func:`_provider`).
OWN_ENDPOINT_PROVIDERS = ("anthropic", "ollama", "scripted")


@dataclass(frozen=True)
class Judge:
    """An evaluation's grader: its model (a ``provider:model`` string or a chat-model instance; ``None``: no
    judge) and the base URL its requests go to (``None``: where its provider's model goes on its own)."""

    model: Any
    base_url: str | None = None

    @property
    def name(self) -> str:
        """The judge as people read it: ``openai:gpt-4o at https://api.openai.com/v1``, or ``none``."""
        if self.model is None:
            return "none"
        label = self.model if isinstance(self.model, str) else (getattr(self.model, "model_name", None)
                                                                   or type(self.model).__name__)
        return f"{label} at {self.base_url}" if self.base_url else str(label)


def is_none(model: Any) -> bool:
    """Whether a grader setting turns the judge off (``none``, any case)."""
    return isinstance(model, str) and model.strip().lower() == "none"


def judge_model(scorer: str, grader_model: Any, run_model: Any) -> tuple[Any, bool]:
    """The judge's model and whether it is the run's own: ``grader_model``, else the benchmark's judge, else
    ``run_model``, else the model the environment gives the run (``KGAGENTS_MODEL``); ``None`` for ``none``."""
    if grader_model is not None:
        return (None, False) if is_none(grader_model) else (grader_model, grader_model == run_model)
    if scorer in DEFAULT_GRADERS:
        return DEFAULT_GRADERS[scorer], DEFAULT_GRADERS[scorer] == run_model
    return (run_model if run_model is not None else get_settings().model_for("graph_executor")), True


def _provider(model: str) -> str | None:
    """The provider a model string names (``openai`` of ``openai:gpt-4o``, any provider LangChain's
    ``init_chat_model`` knows: :func:`kgagents.nodes.models.is_provider`), ``None`` for a bare name
    (``qwen2.5:7b`` on an OpenAI-compatible server)."""
    provider, sep, _ = model.partition(":")
    return provider if sep and (provider in ("openai", *OWN_ENDPOINT_PROVIDERS) or is_provider(provider)) else None


def judge_endpoint(model: Any, *, is_run_model: bool, run_base_url: str | None, grader_base_url: str | None,
                   env: Mapping[str, str]) -> str | None:
    """Where the judge ``model`` sends its requests (``None``: where its model goes on its own: an instance, a
    scripted model, a model of any provider but ``openai``, whose client takes no base URL of ours). See the
    module's rules."""
    if model is None or not isinstance(model, str):
        return None
    configured = grader_base_url or GRADER.base(env)
    provider = _provider(model)
    if provider is not None and provider != "openai":  # Anthropic, Ollama, Google, Azure...: their own settings
        return None
    if configured:
        return configured
    if is_run_model or provider is None:
        return run_base_url or (env.get("KGAGENTS_BASE_URL") or "").strip() or None
    return OPENAI.base(env)


def judge_of(scorer: str, grader_model: Any, run_model: Any, *, run_base_url: str | None = None,
             grader_base_url: str | None = None, env: Mapping[str, str] | None = None) -> Judge | None:
    """The judge of an evaluation scored by ``scorer`` (``None`` when the scorer has no LLM grader)."""
    if scorer not in LLM_GRADED_SCORERS:
        return None
    env = os.environ if env is None else env
    model, own = judge_model(scorer, grader_model, run_model)
    return Judge(model, judge_endpoint(model, is_run_model=own, run_base_url=run_base_url,
                                       grader_base_url=grader_base_url, env=env))


def judge_problem(judge: Judge, env: Mapping[str, str]) -> str | None:
    """Why the judge cannot judge (``None``: nothing found before a call): ``KGAGENTS_GRADER_API_KEY`` set while the
    judge's server (``--grader-base-url``) is not the one that key is bound to, or OpenAI's API as its endpoint with
    no key bound to it (every judgement would fail: not judged)."""
    if judge.model is None:
        return None
    grader_key = GRADER.secret(env)
    if grader_key is not None and judge.base_url and key_for(judge.base_url, OPENAI_PROTOCOL, env) is None:
        bound = GRADER.base(env)
        return (f"the grader {judge.name} would get no key: KGAGENTS_GRADER_API_KEY goes only to "
                f"{bound or 'KGAGENTS_GRADER_BASE_URL, which is not set'}; set KGAGENTS_GRADER_BASE_URL="
                f"{judge.base_url} (instead of --grader-base-url) for that key to go there, or unset "
                "KGAGENTS_GRADER_API_KEY for a server that needs none")
    if judge.base_url and same_server(judge.base_url, OPENAI.default) and \
            key_for(judge.base_url, OPENAI_PROTOCOL, env) is None:
        return (f"the grader {judge.name} needs OPENAI_API_KEY (it goes only to {OPENAI.base(env)}); set it, or name "
                "another grader with --grader-model (--grader-base-url for its server), or --grader-model none")
    return None


def check_judge(judge: Judge | None) -> None:
    """Refuse, before an evaluation starts, a judge that cannot judge (:func:`judge_problem`), or whose model cannot
    be set up (a provider's missing key or extra, a bare name without a server)."""
    if judge is None or judge.model is None:
        return
    problem = judge_problem(judge, os.environ)
    if problem:
        raise ConfigurationError(problem)
    if isinstance(judge.model, str):
        build_chat_model(judge.model, base_url=judge.base_url, temperature=0.0)
