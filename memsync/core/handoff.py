"""Handoff's selection (DESIGN "handoff"): which records of one memory to hand to another.

Pure: the records of the source (its index and view) and the ids the destination holds
in, the lines to merge out; `memsync.local.handoff.handoff` reads the files and merges them
with the merge sequence (rule 14).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from memsync.core.records import Record
from memsync.core.view import Index

__all__ = ["HandoffFilter", "select_handoff", "within"]


@dataclass(frozen=True)
class HandoffFilter:
    """Which slice of a memory to hand off: scopes (any of; domain scopes match their
    subdomains), kinds (any of), a minimum confidence, and a `since` instant."""

    scopes: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    min_confidence: float | None = None
    since: int | None = None

    def matches(self, rec: Record) -> bool:
        obj = rec.fields()
        if self.kinds and obj["kind"] not in self.kinds:
            return False
        scope = obj.get("scope", "global")
        if self.scopes and not any(within(scope, s) for s in self.scopes):
            return False
        if self.min_confidence is not None and obj.get("confidence", 1.0) < self.min_confidence:
            return False
        return self.since is None or rec.ts >= self.since


def within(entry_scope: str, wanted: str) -> bool:
    """Whether an entry's scope falls in a handed-off scope: the same scope, or a subdomain
    of a handed-off domain (`api.github.com` is within `github.com`). Unlike `show` and
    `prompt`'s scope, `global` entries are not added."""
    if entry_scope == wanted:
        return True
    return ":" not in wanted and "." in wanted and entry_scope.endswith("." + wanted)


def select_handoff(
    source: Index,
    live: Iterable[Record],
    dest_ids: AbstractSet[str],
    superseding: Iterable[Record],
    selection: HandoffFilter,
) -> list[bytes]:
    """The lines that make the destination's view of the selected ids agree with the
    source's: the live current versions (`live`, the source's view) that match
    `selection`, the source's tombstones for ids the destination holds, and the source's
    records superseding ids the destination holds (`superseding`) with what decides their
    own ids' view in the source. Each line once, in that order."""
    chosen: dict[bytes, Record] = {}
    for rec in live:
        if selection.matches(rec):
            chosen[rec.raw] = rec
    for rid in dest_ids:
        tomb = source.tombs.get(rid)
        if tomb is not None:
            chosen[tomb.raw] = tomb
    for rec in superseding:
        chosen[rec.raw] = rec
        # The superseder's own id then lands in DEST too: hand over what decides its view
        # in SRC (its latest tombstone and best versions), so that DEST shows it as SRC
        # does: not a stale version, and not alive again if SRC deleted it since.
        for best in (source.tombs, source.user, source.inferred):
            decisive = best.get(rec.id)
            if decisive is not None:
                chosen[decisive.raw] = decisive
    return list(chosen)
