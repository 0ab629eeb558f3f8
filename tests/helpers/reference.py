"""A reference view: SEMANTICS rules 8 to 12 read literally, over every record, with no
summary (no `Index`), written from the SEMANTICS text and not from the optimized code.
Properties compare memsync's view, or the view of a file a merge produced, against it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memsync.core.lines import classify
from memsync.core.records import Record, canonical
from memsync.core.timestamps import parse_ts

__all__ = ["ViewKey", "reference_view"]

ViewKey = list[tuple[str, int, bytes]]
"""A view as (id, instant, canonical JSON) of each live record, in view order."""


@dataclass(frozen=True)
class _Ref:
    id: str
    ts: int
    deleted: bool
    user: bool
    supersedes: str | None
    expires: int | None
    canon: bytes


def _instant(value: object) -> int:
    us = parse_ts(value)
    assert us is not None
    return us


def _ref_records(lines: list[bytes]) -> list[_Ref]:
    out = []
    for raw in lines:
        parsed = classify(raw)  # validity is classify's job (tested in tests/core)
        if not isinstance(parsed, Record):
            continue
        obj: dict[str, Any] = json.loads(raw)
        expires = obj.get("expires_at")
        out.append(
            _Ref(
                id=obj["id"],
                ts=_instant(obj["created_at"]),
                deleted=obj.get("deleted") is True,
                user=obj.get("source") == "user",
                supersedes=obj.get("supersedes"),
                expires=None if expires is None else _instant(expires),
                canon=canonical(parsed),
            )
        )
    return out


def reference_view(lines: list[bytes], now: int) -> ViewKey:
    """SEMANTICS rules 8 to 12, transcribed."""
    records = _ref_records(lines)
    live = []
    for rid in {r.id for r in records}:
        mine = [r for r in records if r.id == rid]
        tombs = [r.ts for r in mine if r.deleted]
        # Rule 8: a tombstone deletes every version created at or before it.
        versions = [r for r in mine if not r.deleted and (not tombs or r.ts > max(tombs))]
        if not versions:
            continue
        # Rule 9: user first, then the latest, then the greater canonical JSON.
        current = max(versions, key=lambda r: (r.user, r.ts, r.canon))
        # Rule 10: any entry ever seen that supersedes rid; an inferred one cannot
        # supersede an id whose current version is from the user.
        superseders = [r for r in records if not r.deleted and r.supersedes == rid]
        if any(s.user or not current.user for s in superseders):
            continue
        # Rule 11: an expired current version is skipped.
        if current.expires is not None and current.expires <= now:
            continue
        live.append(current)
    live.sort(key=lambda r: (r.ts, r.id))  # rule 12
    return [(r.id, r.ts, r.canon) for r in live]
