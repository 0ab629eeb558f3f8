"""The view digest (issue 20): one number that is equal on every replica whose view is the
same, whatever order its records arrived in and whatever bytes carried them.

The digest is the sum, modulo 2**64, of a 64-bit hash of each live current version's
canonical JSON (rule 7: two lines with the same canonical content are the same record, so
a record held in other bytes on another machine hashes the same). A sum is
order-independent (rule 12 orders the view, but the digest must not depend on it) and can
be kept up to date one record at a time: add a record's hash when it enters the view,
subtract it when it leaves. The view is the one of rules 8 to 12 at `now`, so two replicas
compare digests taken at the same `now` or far from any `expires_at` (rule 11).

A collision needs two different views whose hash sums agree: at 64 bits, about one chance
in 2**64 for views that differ by chance. It is a comparison for people ("do my machines
agree?"), not a defence against an adversary who writes records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from memsync.core.records import canonical_line

__all__ = ["ViewDigest", "digest_of", "record_hash", "view_digest"]

_MOD = 1 << 64


def record_hash(raw: bytes) -> int:
    """The 64-bit hash of one record line's canonical content (rule 7)."""
    return int.from_bytes(hashlib.blake2b(canonical_line(raw), digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class ViewDigest:
    """A view's digest and its number of live entries."""

    value: int
    entries: int

    def __str__(self) -> str:
        """16 hex digits, then the count: `3f2a...9c01 1234 entries`."""
        return f"{self.value:016x} {self.entries} entries"


def view_digest(lines: Iterable[bytes]) -> ViewDigest:
    """The digest of the view whose live current versions are `lines` (any order)."""
    return digest_of(map(record_hash, lines))


def digest_of(hashes: Iterable[int]) -> ViewDigest:
    """The digest of the view whose live current versions have the `record_hash` values
    `hashes` (any order): what the persistent view sums without reading a line (issue 21)."""
    total = count = 0
    for h in hashes:
        total += h
        count += 1
    return ViewDigest(total % _MOD, count)
