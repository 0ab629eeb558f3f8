"""Record values: one memory-file line, kept byte for byte, with the fields the rules use.

SEMANTICS rule 5: lines are copied, never re-serialized, so a `Record` holds its raw bytes
verbatim next to the few parsed fields that the view and the merge need. Nothing else of
the parsed JSON is kept (a million records must fit in a few hundred MB).
"""

from __future__ import annotations

from typing import Any

import msgspec

from memsync.core.timestamps import canonical_ts, parse_ts

__all__ = [
    "KINDS",
    "Described",
    "Located",
    "Record",
    "canonical",
    "canonical_line",
    "canonical_object",
]

KINDS = ("preference", "lesson", "fact", "source", "avoid")
"""The entry kinds of rule 3, in the fixed order `to_prompt` groups them."""


class Record(msgspec.Struct, frozen=True, gc=False):
    """One valid entry or tombstone line (rule 3).

    A `msgspec.Struct` rather than a frozen dataclass: one is built per line read, and a
    frozen dataclass's `__init__` costs about 10 times as much (a million lines: seconds).
    `gc=False`: it holds no containers, so the cyclic collector need not track it.

    Attributes:
        raw: the line's bytes without its final "\\n" (a "\\r" of a CRLF line stays).
        id: the record's id.
        ts: `created_at` as microseconds since the epoch; `(id, ts)` is the key (rule 6).
        deleted: True for a tombstone.
        user: True when `source` is "user" (rule 9).
        supersedes: the id this entry supersedes, or None (rule 10).
        expires: `expires_at` in microseconds, or None (rule 11).
    """

    raw: bytes
    id: str
    ts: int
    deleted: bool
    user: bool
    supersedes: str | None
    expires: int | None

    @property
    def key(self) -> tuple[str, int]:
        """The record's identity (rule 6): its id and the instant of its `created_at`."""
        return (self.id, self.ts)

    def fields(self) -> dict[str, Any]:
        """The record's JSON object, parsed again from its raw bytes."""
        obj: dict[str, Any] = msgspec.json.decode(self.raw)
        return obj


class Located(Record, frozen=True, gc=False):
    """A record whose line is not held: `raw` is empty and `at` says where the line is.

    The view of a large memory (issue 14) keeps one of these per id instead of the line's
    bytes, and reads the live lines again once the view is known. `at` is the reader's
    (`memsync.local.reading` packs the file, the offset and the length).

    `hash` is `memsync.core.digest.record_hash` of the line when the reader computed it
    while the line was in memory (the persistent view's winners, issue 21), else 0: not
    known, hash the line read again (a line whose hash is 0 is hashed again: never wrong).
    """

    at: int
    hash: int


class Described(Located, frozen=True, gc=False):
    """A `Located` entry that also holds what the prompt and `show`'s filters select by
    (its kind, scope and confidence, rule 3): the persistent view's records (issue 20),
    so that a selection reads only the lines it keeps."""

    kind: str
    scope: str
    confidence: float


def canonical_object(obj: dict[str, Any]) -> bytes:
    """Canonical JSON of a record object (rule 7): sorted keys, timestamps normalized to one
    fixed-width UTC form, `confidence` as a float. Equal content gives equal bytes."""
    norm = dict(obj)
    for field in ("created_at", "expires_at"):
        us = parse_ts(norm.get(field))
        if us is not None:
            norm[field] = canonical_ts(us)
    conf = norm.get("confidence")
    if type(conf) is int:
        norm["confidence"] = float(conf)
    return msgspec.json.encode(norm, order="sorted")


def canonical(record: Record) -> bytes:
    """Canonical JSON of a record (rule 7); computed on demand, only to settle equal keys."""
    return canonical_object(record.fields())


def canonical_line(raw: bytes) -> bytes:
    """Canonical JSON of a record's line (rule 7)."""
    obj: dict[str, Any] = msgspec.json.decode(raw)
    return canonical_object(obj)
