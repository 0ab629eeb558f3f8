"""The tables of a persistent view (`memsync.local.viewstore`, issue 20) as the columns
its store holds: one `_Slot` per table of the fold (`core.view.Index`)."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import cast

import msgspec

from memsync.core.records import Described, Located, Record

__all__ = ["_Slot", "_slot"]

_AT = attrgetter("at")


class _Slot(msgspec.Struct, array_like=True, gc=False):
    """One of the index's per-id tables (tombstones, user or inferred versions), columns;
    `kind`, `scope`, `confidence` and `hash` (`record_hash` of each line, 8 bytes big-endian
    each: no int object per id while the store is read) for versions, empty for
    tombstones."""

    ids: list[str]
    ts: list[int]
    at: list[int]
    expires: list[int | None]
    kind: list[str]
    scope: list[str]
    confidence: list[float]
    hash: bytes


class _Meta(msgspec.Struct, gc=False):
    """What selections need of an entry line (a valid entry has them typed, rule 3)."""

    kind: str
    scope: str = "global"
    confidence: float = 1.0


_decode_meta = msgspec.json.Decoder(_Meta).decode


def _slot(
    table: dict[str, Record],
    lines: Callable[[list[Located]], Iterable[bytes]] | None,
    kept: bytes = b"",
) -> _Slot:
    """A table as columns; with `lines`, a table of versions, with their kind, scope and
    confidence (read from their lines for those not `Described` yet) and the `record_hash`
    of their lines where known: a `Described` version's from `kept` (`_kept_hashes`)
    unless it holds it, another's its own when the fold hashed it, else 0 (not known).

    Memory: the columns hold the records' own int objects; kinds and scopes are interned
    (a few distinct values), and a version's fields are read in file order, one line at a
    time, so that writing a store costs little beside the fold itself (a 300k-record
    prompt runs under a 180 MB address-space limit, tests/local/test_bounded_memory.py).
    """
    # A located pass folds only `Located` records (their `at` is where the line is). In
    # the file's order: their lines are then read in long runs. (The order of a table does
    # not matter: the view sorts by key, rule 12.)
    recs = cast(list[Located], sorted(table.values(), key=_AT))
    slot = _Slot(
        [r.id for r in recs],
        [r.ts for r in recs],
        [r.at for r in recs],
        [r.expires for r in recs],
        [],
        [],
        [],
        b"",
    )
    if lines is None:
        return slot
    if all(type(r) is Described for r in recs):
        return _described(slot, cast(list[Described], recs), table, kept)
    names: dict[str, str] = {}
    kinds, scopes, confidences = slot.kind, slot.scope, slot.confidence
    hashes = bytearray()
    raws = iter(lines([r for r in recs if type(r) is not Described]))
    stored = _kept_hashes(table, kept)
    for r in recs:
        if type(r) is Described:
            kind, scope, confidence = r.kind, r.scope, r.confidence
            h = next(stored)
        else:
            raw = next(raws)
            m = _decode_meta(raw)
            kind, scope, confidence = m.kind, m.scope, m.confidence
            # Hashed by the fold for a digest, else 0: "not known". The column is lazy: a
            # prompt does not pay for hashes it does not use (hashing every line tripled a
            # cold prompt), and the first digest fills it in (`located.fill_hashes`).
            h = r.hash
        kinds.append(names.setdefault(kind, kind))
        scopes.append(names.setdefault(scope, scope))
        confidences.append(confidence)
        hashes += h.to_bytes(8, "big")
    slot.hash = cast(bytes, hashes)  # encoded as bytes all the same: no copy (memory)
    return slot


def _kept_hashes(table: dict[str, Record], kept: bytes) -> Iterator[int]:
    """The hash of each `Described` version of `table`, in the order of their `at`: its
    own, else its entry of the column `kept` it was read with.

    `_scan_of` inserted the store's versions in the column's order (that of `at`), and a
    table only ever replaces a value (its key keeps its place) or adds a key at the end:
    the i-th value, still `Described`, is the column's i-th. A column too short gives 0
    (not known: a digest hashes the line)."""
    for i, r in enumerate(table.values()):
        if type(r) is Described:
            yield r.hash or int.from_bytes(kept[8 * i : 8 * i + 8], "big")


def _described(slot: _Slot, recs: list[Described], table: dict[str, Record], kept: bytes) -> _Slot:
    """`_slot`'s columns of a table whose versions are all `Described` (in the order of
    their `at`, `recs`): taken from them, column by column, no line read (a fold for the
    persistent view, or a store read again with nothing new in this table)."""
    slot.kind = [r.kind for r in recs]
    slot.scope = [r.scope for r in recs]
    slot.confidence = [r.confidence for r in recs]
    hashes = array("Q", _kept_hashes(table, kept) if kept else map(_HASH, recs))
    if sys.byteorder == "little":
        hashes.byteswap()  # (the column is big-endian)
    slot.hash = hashes.tobytes()
    return slot


_HASH = attrgetter("hash")
