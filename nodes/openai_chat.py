"""The chat model of OpenAI and OpenAI-compatible servers: ``ChatOpenAI``, which also says when a call can ask
for several choices (``n``) in one request.

Every call goes through ``ChatOpenAI`` and the OpenAI SDK as LangChain makes it (on the SDK's aiohttp backend,
:mod:`kgagents.nodes.http_client`). A direct path that posted LangChain's payload itself and skipped langchain-core's
callback run was measured against this one side by side (``kgagents.evals.bench_batch --model-path http http-sdk``, C =
64, three runs of six repetitions on the 2-core machine): the SDK path's throughput was 83–99 % of it, median
90.5 % — within 10 %, too little for fifteen private symbols of four libraries; it was removed (docs/evals.md,
"Benchmark").
"""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI

from kgagents.core.third_party import fell_back, private_part

#: ``ChatOpenAI``'s private method that decides whether a call takes the Responses API (which has no ``n``).
API_DECISION = "_use_responses_api"
USE_RESPONSES_API = private_part("langchain-openai", f"BaseChatOpenAI.{API_DECISION}", tested="1.7.4",
                                 fallback="one request per sample (no n)")


class OpenAIChatModel(ChatOpenAI):
    """``ChatOpenAI`` that says whether a call can ask for ``n`` choices (:meth:`takes_n`)."""

    def takes_n(self, kwargs: dict[str, Any]) -> bool:
        """Whether a call with ``kwargs`` can ask for several choices (``n``) in one request: a chat completion
        (the Responses API has no ``n``) that is not streamed.

        Which API a call takes is ``ChatOpenAI``'s private decision (``_use_responses_api``, listed in
        docs/dependencies.md); without it every call asks for one choice at a time, the public path (said once).
        """
        if self.streaming or self.use_responses_api is True:
            return False
        decides = getattr(self, API_DECISION, None)
        if not callable(decides):
            fell_back(USE_RESPONSES_API, f"{type(self).__name__} has no method {API_DECISION}")
            return False
        try:
            return not decides(kwargs)
        except Exception as exc:  # noqa: BLE001 - another langchain-openai: one choice per request
            fell_back(USE_RESPONSES_API, exc)
            return False


__all__ = ["OpenAIChatModel"]
