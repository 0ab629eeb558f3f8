"""The view of record objects as the entries a bridge renders: the real rules (classify,
`Index`, `build_view`), for round trips through a bridge's block (issue 22)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from memsync.core.lines import classify
from memsync.core.prompt import PromptEntry
from memsync.core.records import Record
from memsync.core.view import Index, build_view

__all__ = ["NOW", "entries_of", "superseded_in"]

NOW = 4_000_000_000_000_000
"""An instant (µs) after every record these tests write."""


def _records(objs: Iterable[dict[str, Any]]) -> list[Record]:
    out = []
    for obj in objs:
        rec = classify(json.dumps(obj, ensure_ascii=False).encode("utf-8"))
        assert isinstance(rec, Record), obj
        out.append(rec)
    return out


def entries_of(objs: Iterable[dict[str, Any]]) -> list[PromptEntry]:
    """The live entries of the records `objs` (SEMANTICS rules 8 to 12) at `NOW`."""
    index = Index()
    for rec in _records(objs):
        index.add(rec)
    out = []
    for rec in build_view(index, NOW).live:
        f = rec.fields()
        out.append(
            PromptEntry(
                rec.id,
                f["kind"],
                f["text"],
                f.get("scope", "global"),
                rec.user,
                float(f.get("confidence", 1.0)),
                rec.ts,
            )
        )
    return out


def superseded_in(objs: Iterable[dict[str, Any]]) -> set[str]:
    """The ids some record of `objs` supersedes (rule 10)."""
    return {r.supersedes for r in _records(objs) if r.supersedes is not None}
