"""The entries that differ between two views, bucket by bucket (issue 21, `memsync diff`),
pure.

A receipt carries the digest of each bucket of ids (`memsync.core.receipts`); only the
buckets whose digests differ are looked at, and in them only the records whose id falls in
one, or that supersede such an id (rule 10: a superseding entry of another bucket takes an
entry of this one out of the view). `bucket_view` folds such records into the view of those
buckets; `bucket_digests` checks a view rebuilt for another replica against its receipt.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from memsync.core.digest import record_hash
from memsync.core.lines import classify
from memsync.core.receipts import bucket_of
from memsync.core.records import Record, canonical_line
from memsync.core.scan import quick_id
from memsync.core.view import Index, build_view
from memsync.errors import MemsyncError

__all__ = ["Difference", "bucket_digests", "bucket_view", "differences", "relevant_records"]

_MOD = 1 << 64


def relevant_records(lines: Iterable[bytes], buckets: set[int]) -> Iterator[Record]:
    """The records among `lines` that bear on the view of `buckets`: those whose id is in
    one, and those that supersede such an id. Other lines (bad ones, headers) are skipped."""
    for raw in lines:
        raw = raw.rstrip(b"\r")
        rid = quick_id(raw)
        if rid is not None and bucket_of(rid) not in buckets and b'"supersedes"' not in raw:
            continue  # the common case, decided without parsing the line
        try:
            rec = classify(raw)
        except MemsyncError:
            continue
        if type(rec) is not Record:
            continue
        if bucket_of(rec.id) in buckets or (
            rec.supersedes is not None and bucket_of(rec.supersedes) in buckets
        ):
            yield rec


def bucket_view(records: Iterable[Record], buckets: set[int], now: int) -> dict[str, Record]:
    """The live entries at `now` whose id is in `buckets`, by id (rules 8 to 12), from
    records that include every one bearing on them (`relevant_records`)."""
    index = Index()
    for rec in records:
        index.add(rec)
    return {r.id: r for r in build_view(index, now).live if bucket_of(r.id) in buckets}


def bucket_digests(view: dict[str, Record]) -> dict[int, int]:
    """The digest of each bucket of a view (as a receipt's), for the buckets it touches."""
    out: dict[int, int] = {}
    for rid, rec in view.items():
        b = bucket_of(rid)
        out[b] = (out.get(b, 0) + record_hash(rec.raw)) % _MOD
    return out


@dataclass(frozen=True)
class Difference:
    """One id whose entry differs: its line here and there (None: not in that view)."""

    id: str
    here: bytes | None
    there: bytes | None


def differences(here: dict[str, Record], there: dict[str, Record]) -> list[Difference]:
    """The ids whose live entry is not the same record in both views (rule 7: the same
    canonical content is the same record, whatever bytes carry it), ordered by id."""
    out = []
    for rid in sorted(here.keys() | there.keys()):
        a, b = here.get(rid), there.get(rid)
        if a is not None and b is not None and canonical_line(a.raw) == canonical_line(b.raw):
            continue
        out.append(Difference(rid, None if a is None else a.raw, None if b is None else b.raw))
    return out
