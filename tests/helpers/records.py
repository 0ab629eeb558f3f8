"""Hand-made record lines for the compaction and merge tests: one line per call, times
given in seconds after `T0`."""

from __future__ import annotations

import json
from typing import Any

from memsync.core.timestamps import SECOND, format_ts, parse_ts

__all__ = ["DAY", "T0", "at", "entry", "tomb"]

T0 = parse_ts("2026-01-01T00:00:00Z") or 0
DAY = 24 * 3600 * SECOND


def at(seconds: float) -> str:
    return format_ts(T0 + round(seconds * SECOND))


def entry(
    rid: str,
    t: float,
    *,
    text: str | None = None,
    user: bool = False,
    supersedes: str | None = None,
    expires: float | None = None,
    **extra: Any,
) -> bytes:
    obj: dict[str, Any] = {
        "id": rid,
        "kind": "fact",
        "text": text if text is not None else f"{rid} written at {t}",
        "source": "user" if user else "session:test",
        "created_at": at(t),
    }
    if supersedes is not None:
        obj["supersedes"] = supersedes
    if expires is not None:
        obj["expires_at"] = at(expires)
    obj.update(extra)
    return json.dumps(obj).encode()


def tomb(rid: str, t: float) -> bytes:
    return json.dumps({"id": rid, "deleted": True, "created_at": at(t)}).encode()
