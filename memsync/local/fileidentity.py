"""The identity of a file read so far (`FileIdentity`): where a read stopped and what to
check before resuming there, so that a reader folding a file forward as it grows (appends
and merges only ever append, SEMANTICS rules 13 and 14) notices when the file is not what
it read: another inode or header generation (a compaction rewrote it, rule 15), shorter,
or other bytes just before the offset read to. Shared by the cached view
(`memsync.local.livecache`) and the full-text index (`memsync.local.textindex`), apart
from both so that a `recall` imports neither the view's fold nor its writers.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import xxhash

from memsync.core.lines import Header, classify, without_bom
from memsync.local.storage import read_tail

__all__ = ["TAIL_BYTES", "FileIdentity", "identity_of", "resumable", "tail_hash"]

TAIL_BYTES = 4096
"""How many bytes before an offset are hashed to check that a file was not rewritten."""


def tail_hash(data: bytes) -> bytes:
    """The check value of the bytes just before an offset."""
    return xxhash.xxh3_64_digest(data)


class FileIdentity(msgspec.Struct, frozen=True):
    """Where a read of a file stopped, and what to check before resuming there: the
    inode, the header's generation (new at each rewrite), and the hash of the bytes just
    before the offset."""

    ino: int
    generation: str
    offset: int
    line: int
    tail: bytes

    def encode(self) -> str:
        return f"{self.ino}:{self.generation}:{self.offset}:{self.line}:{self.tail.hex()}"

    @classmethod
    def decode(cls, text: str) -> FileIdentity:
        ino, gen, offset, line, tail = text.split(":")
        return cls(int(ino), gen, int(offset), int(line), bytes.fromhex(tail))


def _generation(path: Path) -> str:
    """The header's generation token, or "" (no header, or one without a token)."""
    with open(path, "rb") as f:
        first = f.readline(4096)
    if not first.endswith(b"\n"):
        return ""
    try:
        parsed = classify(without_bom(first.rstrip(b"\n")))  # rule 1
    except ValueError:  # UnsupportedFormat: reading the file will say so
        return ""
    return (parsed.generation or "") if isinstance(parsed, Header) else ""


def resumable(path: Path, seen: FileIdentity | None, st: os.stat_result) -> bool:
    """Whether a read that stopped at `seen` may resume: same inode and generation, not
    shorter, and the same bytes just before the offset (else the file was rewritten)."""
    if seen is None or st.st_ino != seen.ino or st.st_size < seen.offset:
        return False
    if seen.offset and _generation(path) != seen.generation:
        return False
    return tail_hash(read_tail(path, seen.offset, TAIL_BYTES)) == seen.tail


def identity_of(path: Path, ino: int, offset: int, line: int) -> FileIdentity:
    gen = _generation(path) if offset else ""
    return FileIdentity(ino, gen, offset, line, tail_hash(read_tail(path, offset, TAIL_BYTES)))
