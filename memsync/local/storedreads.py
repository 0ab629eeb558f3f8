"""Reads of one memory file answered from its persistent view (issue 20).

What a reader asks once of a file (`Memory.to_prompt` at a given instant), answered
through `memsync.local.located` with a `ViewStore`: the store is validated against the
file at every call, only the bytes appended since it was written are folded (rules 13 and
14), and anything else (a compaction's new file, rule 15; a truncation; a corrupt store)
is read again from the start. `located_view` first copies in what a killed compaction
left aside (rule 16).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from memsync.core.lines import classify
from memsync.core.records import Described, Located, Record
from memsync.core.scan import may_supersede
from memsync.core.view import distinct_twins
from memsync.local.fresh import now_us
from memsync.local.located import located_view
from memsync.local.reading import MemoryView, prompt_of, prompt_of_described
from memsync.local.viewranks_open import stored_prompt as quick_prompt
from memsync.local.viewstore import ViewStore

__all__ = ["stored_prompt", "stored_view"]


def stored_view(path: Path, store: ViewStore, now: int | None = None) -> MemoryView:
    """The `MemoryView` of `path` at `now` (default: the local clock), the one
    `memsync.local.reading.view_of` builds from a full fold: the live current versions
    (rule 12) and the twins met (rule 7, `distinct_twins`) parsed from their lines, read
    where the store says they lie, and the bad lines and missing header the store kept
    (rules 2 and 4)."""
    name = str(path)
    with located_view([path], now, store) as view:
        records = [
            # A located record holds what the line's parse gives but `supersedes` (not
            # stored): the line is parsed again only when it may hold one.
            Record(raw, r.id, r.ts, False, r.user, None, r.expires)
            if type(r) is Described and not may_supersede(raw)
            else cast(Record, classify(raw, source=name))
            for r, raw in zip(view.records, view.lines(), strict=True)
        ]
        twins = view.scan.index.twins
        pairs = cast(list[Located], [rec for pair in twins for rec in pair])
        parsed = [cast(Record, classify(raw, source=name)) for raw in view.lines_of(pairs)]
    return MemoryView(
        records,
        view.scan.bad,
        distinct_twins(zip(parsed[::2], parsed[1::2], strict=True), view.scan.index),
        view.scan.headerless,
    )


def stored_prompt(
    path: Path,
    store: ViewStore,
    scope: str | None,
    max_chars: int | None,
    *,
    markdown: bool = False,
    now: int | None = None,
) -> str:
    """The memory block of `path` for a task in `scope` at `now` (default: the local
    clock), the one `memsync.local.reading.prompt_of` renders from a full fold; with
    `max_chars` and a valid store, only the lines the block holds are read, from the top
    of its quick part's drop order when it can (`viewranks_open.stored_prompt`)."""
    if max_chars is not None:
        at = now_us() if now is None else now
        quick = quick_prompt(store, path, scope, max_chars, at, markdown=markdown)
        if quick is not None:
            return quick[0]
    with located_view([path], now, store) as view:
        if max_chars is None or not view.described:
            return prompt_of(view.records, scope, max_chars, view.lines(), markdown=markdown)
        return prompt_of_described(
            view.records, scope, max_chars, view.line, view.length, markdown=markdown
        )
