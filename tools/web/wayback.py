"""Archived copies of web pages through the Wayback Machine availability API.

``GET {base}?url=...&timestamp=YYYYMMDD`` answers ``{"archived_snapshots": {"closest": {"available": true,
"url": ..., "timestamp": "YYYYMMDDhhmmss", "status": "200"}}}``. The base comes from
``KGAGENTS_WAYBACK_API_BASE`` (default: archive.org).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgagents.tools.base import ToolFailure
from kgagents.tools.http import FetchLimits, fetch_json

DEFAULT_API = "https://archive.org/wayback/available"


@dataclass
class Snapshot:
    """The archived copy closest to the requested date."""

    url: str
    timestamp: str

    @property
    def day(self) -> str:
        """The snapshot's date as ``YYYY-MM-DD``."""
        t = self.timestamp
        return f"{t[:4]}-{t[4:6]}-{t[6:8]}" if len(t) >= 8 else t


def wayback_timestamp(value: str) -> str:
    """A date (``YYYY-MM-DD``, ``YYYYMMDD``, ``YYYY-MM``, ``YYYY``) as the API's ``YYYYMMDD`` prefix."""
    digits = re.sub(r"[^0-9]", "", value or "")
    if len(digits) not in {4, 6, 8, 10, 12, 14}:
        raise ToolFailure(f"cannot read the date {value!r}; write it as YYYY-MM-DD or YYYYMMDD")
    return digits


async def closest_snapshot(url: str, when: str | None = None, *, api_base: str | None = None,
                           limits: FetchLimits | None = None) -> Snapshot | None:
    """The archived copy of ``url`` closest to ``when`` (the latest one without a date); ``None`` if none."""
    params = {"url": url}
    if when:
        params["timestamp"] = wayback_timestamp(when)
    data = await fetch_json(api_base or DEFAULT_API, limits, params=params)
    closest = ((data or {}).get("archived_snapshots") or {}).get("closest") if isinstance(data, dict) else None
    if not isinstance(closest, dict) or not closest.get("url") or closest.get("available") is False:
        return None
    return Snapshot(url=str(closest["url"]), timestamp=str(closest.get("timestamp") or ""))
