"""An async client of CRAG's mock KG API: ``await CragAPI(url).call("music_get_members", "Maroon 5")``.

One ``POST`` per call to ``{server}/{domain}/{function}``, bounded timeouts, and a :class:`CragAPIError` that
says what went wrong (server down, HTTP error, malformed body, unknown function, wrong arguments).
"""

from __future__ import annotations

import os
import re
from typing import Any, Self

import httpx

from kgagents.tools.crag.functions import CragAPIError, function

ENV_VAR = "CRAG_SERVER"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0


def api_url(explicit: str | None = None) -> str | None:
    """The API's address: ``explicit``, else ``$CRAG_SERVER``, else None (not configured)."""
    url = (explicit or os.environ.get(ENV_VAR) or "").strip()
    return url.rstrip("/") or None


# ------------------------------------------------------------------------------------------------------------
# The client
# ------------------------------------------------------------------------------------------------------------
class CragAPI:
    """An async client of CRAG's API at ``url``. Use it as ``async with CragAPI(url) as api`` to share one
    connection pool between calls, or call it directly (each call then opens its own)."""

    def __init__(self, url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        if not url or not re.match(r"^https?://", url):
            raise CragAPIError(f"the CRAG API address must be an http(s) URL, not {url!r}", "arguments")
        self.url = url.rstrip("/")
        self.timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Self:
        self._client = httpx.AsyncClient(timeout=self.timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The ``result`` of ``name(*args, **kwargs)``; a :class:`CragAPIError` for anything else."""
        fn = function(name)
        payload = fn.bind(args, kwargs)
        url = self.url + fn.path
        try:
            if self._client is not None:
                response = await self._post(self._client, url, payload)
            else:
                async with httpx.AsyncClient(timeout=self.timeout) as client:
                    response = await self._post(client, url, payload)
        except httpx.TimeoutException as exc:
            raise CragAPIError(f"the CRAG API at {self.url} did not answer {name} in time "
                               f"({type(exc).__name__})", "timeout") from exc
        except httpx.HTTPError as exc:
            raise CragAPIError(f"the CRAG API at {self.url} cannot be reached ({type(exc).__name__}: "
                               f"{exc}); is the server running? (python -m kgagents.tools.crag_api serve "
                               "starts a local mock)",
                               "unreachable") from exc
        if response.status_code >= 400:
            raise CragAPIError(f"{name}: the CRAG API answered HTTP {response.status_code}: "
                               f"{response.text[:300]}", "http")
        try:
            body = response.json()
        except ValueError as exc:
            raise CragAPIError(f"{name}: the CRAG API's answer is not JSON: {response.text[:200]!r}",
                               "malformed") from exc
        if not isinstance(body, dict) or "result" not in body:
            raise CragAPIError(f"{name}: the CRAG API's answer has no \"result\": {str(body)[:200]}",
                               "malformed")
        return body["result"]

    @staticmethod
    async def _post(client: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> httpx.Response:
        headers = {"accept": "application/json"}
        if not payload:
            return await client.post(url, headers=headers)  # the wrapper sends no body without arguments
        return await client.post(url, json=payload, headers=headers)
