"""Convergence receipts (issue 21), pure: what a replica publishes in each hub it syncs
with so that every other machine can tell whether they hold the same memory.

A receipt says, for one memory, at one instant (`time`):

- the replica's view digest and entry count (`memsync.core.digest`: the same number as
  `memsync show --digest`), and `valid_until`, the earliest `expires_at` among the live
  entries (rule 11): until then the view cannot change without a new record;
- the digest of the prompt block for the default scope (as the MCP server gives it to
  agents), so a person can see that every agent is shown the same block;
- how far it had read each peer's hub file (offset and generation token), and how far its
  own hub file reached: whether it is behind what the hub holds follows from those;
- how many of its live entries the hub does not hold (`unpushed`: withheld as credentials,
  or written after the push): it is ahead;
- the digests of `BUCKETS` buckets of ids (each the digest of the live entries whose id
  falls in it; they sum to the view digest), so `memsync diff` looks only at the ids of
  the buckets that differ;
- its memsync version.

Receipts are data from other machines: `parse_receipt` reads them defensively, and a
receipt is only ever shown or compared, never merged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memsync.core.digest import record_hash
from memsync.core.names import valid_name
from memsync.core.timestamps import format_ts, parse_ts

__all__ = [
    "BUCKETS",
    "FORMAT",
    "RECEIPT_SUFFIX",
    "Receipt",
    "ViewSummary",
    "bucket_of",
    "parse_receipt",
    "prompt_digest",
    "summarize",
]

RECEIPT_SUFFIX = ".receipt.json"
"""A receipt's name in a hub's memory folder: `<replica>.receipt.json`. Neither `.jsonl`
nor `.watermarks.json`: a pass (of this or any earlier memsync) never reads it as a
replica's records or watermarks."""

FORMAT = "memsync-receipt/1"

BUCKETS = 256
"""Buckets of ids in a receipt: 2 KiB of digests. A million entries put about 4000 ids in
a bucket, so one differing record costs `memsync diff` one bucket's ids, not the view."""

_MOD = 1 << 64
_MAX_RECEIPT_BYTES = 1 << 20
Position = tuple[int, str | None]
"""How far a hub file was read: (offset, generation token)."""


def bucket_of(record_id: str) -> int:
    """The bucket of an id (the same on every machine and every version)."""
    return hashlib.blake2b(record_id.encode(), digest_size=2).digest()[0] % BUCKETS


def prompt_digest(block: str) -> str:
    """16 hex digits naming a prompt block."""
    return hashlib.blake2b(block.encode(), digest_size=8).hexdigest()


@dataclass
class ViewSummary:
    """A view as a receipt carries it: digest, count, bucket digests, expiry bound."""

    digest: int = 0
    entries: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    valid_until: int | None = None

    def add(self, record_id: str, raw: bytes, expires: int | None) -> None:
        """Count one live entry (its id, its line, its `expires_at` in microseconds)."""
        self.add_hashed(record_id, record_hash(raw), expires)

    def add_hashed(self, record_id: str, h: int, expires: int | None) -> None:
        """Count one live entry whose line's `record_hash` is `h` (the persistent view
        keeps it: issue 21, a receipt that reads no line)."""
        b = bucket_of(record_id)
        self.digest = (self.digest + h) % _MOD
        self.buckets[b] = (self.buckets[b] + h) % _MOD
        self.entries += 1
        if expires is not None and (self.valid_until is None or expires < self.valid_until):
            self.valid_until = expires


def summarize(entries: Iterable[tuple[str, bytes, int | None]]) -> ViewSummary:
    """The summary of a view whose live entries are `(id, line, expires)` (any order)."""
    s = ViewSummary()
    for record_id, raw, expires in entries:
        s.add(record_id, raw, expires)
    return s


@dataclass
class Receipt:
    """One replica's receipt for one memory in one hub (see the module docstring)."""

    replica: str
    time: int
    version: str
    view: ViewSummary
    prompt: str
    read: dict[str, Position]
    own: Position | None
    unpushed: int = 0

    def to_json(self) -> dict[str, Any]:
        v = self.view
        return {
            "format": FORMAT,
            "replica": self.replica,
            "time": format_ts(self.time),
            "version": self.version,
            "view": {
                "digest": f"{v.digest:016x}",
                "entries": v.entries,
                "valid_until": None if v.valid_until is None else format_ts(v.valid_until),
                "buckets": base64.b64encode(
                    b"".join(d.to_bytes(8, "big") for d in v.buckets)
                ).decode(),
            },
            "prompt": self.prompt,
            "read": {
                name: {"offset": off, "generation": gen}
                for name, (off, gen) in sorted(self.read.items())
            },
            "own": None if self.own is None else {"size": self.own[0], "generation": self.own[1]},
            "unpushed": self.unpushed,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()


def _position(doc: object) -> Position | None:
    if not isinstance(doc, dict):
        return None
    offset, gen = doc.get("offset", doc.get("size")), doc.get("generation")
    if type(offset) is int and offset >= 0 and (gen is None or isinstance(gen, str)):
        return offset, gen
    return None


def _hex64(text: object) -> int | None:
    if not isinstance(text, str) or len(text) != 16:
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


def _instant(text: object) -> int | None:
    """`parse_ts`, refusing instants no date can hold once in UTC (RFC 3339 writes
    `9999-12-31T23:59:59-23:59`): a receipt's times are printed (`format_ts`)."""
    us = parse_ts(text)
    if us is None:
        return None
    try:
        format_ts(us)
    except OverflowError:
        return None
    return us


_VERSION = re.compile(r"[0-9A-Za-z.+_-]{1,64}")
"""A version as `memsync status` may print it: a peer's is shown beside ours, and what
another machine wrote never drives the terminal nor starts a line (rule 17)."""


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def parse_receipt(replica: str, data: bytes) -> Receipt | None:
    """The receipt in `data`, published as `replica`'s, or None when it is not one
    (untrusted input: a damaged, foreign or newer receipt is no receipt)."""
    if len(data) > _MAX_RECEIPT_BYTES:
        return None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("replica") != replica:
        return None
    view, time = doc.get("view"), _instant(doc.get("time"))
    if not isinstance(view, dict) or time is None:
        return None
    digest, entries = _hex64(view.get("digest")), _count(view.get("entries"))
    until = view.get("valid_until")
    valid_until = None if until is None else _instant(until)
    try:
        packed = base64.b64decode(view.get("buckets", ""), validate=True)
    except (ValueError, TypeError):
        return None
    if digest is None or entries is None or len(packed) != 8 * BUCKETS:
        return None
    if until is not None and valid_until is None:
        return None
    buckets = [int.from_bytes(packed[i : i + 8], "big") for i in range(0, len(packed), 8)]
    read_doc = doc.get("read")
    read = {}
    if isinstance(read_doc, dict):
        for name, pos in read_doc.items():
            p = _position(pos)
            if isinstance(name, str) and valid_name(name) and p is not None:
                read[name] = p
    prompt, version = doc.get("prompt"), doc.get("version")
    return Receipt(
        replica=replica,
        time=time,
        version=version if isinstance(version, str) and _VERSION.fullmatch(version) else "?",
        view=ViewSummary(digest, entries, buckets, valid_until),
        prompt=prompt if isinstance(prompt, str) else "",
        read=read,
        own=_position(doc.get("own")),
        unpushed=_count(doc.get("unpushed")) or 0,
    )
