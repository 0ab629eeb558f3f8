"""The cached view of a memory file (`LiveCache`), and the identity of a file read so far.

`LiveCache`, in memory: the per-id summary of the file's records (`core.view.Index`), keyed
by the file's identity and size and folded forward as the file grows (appends and merges
only ever append, SEMANTICS rules 13 and 14), so a `recall` or a prompt on an unchanged file
reads nothing, and on a grown file reads only the new lines. It is read again from the start
when the file is not what was read: another inode or header generation (a compaction
rewrote it, rule 15), shorter, or other bytes just before the offset read to.

`FileIdentity` is that check, shared with the full-text index (`memsync.local.textindex`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, cast

from memsync.core.lines import Header, classify, without_bom
from memsync.core.records import Located, Record
from memsync.core.view import Index, build_view
from memsync.local.drain import recover_after_crash
from memsync.local.fileindex import TAIL_BYTES, tail_hash
from memsync.local.fresh import now_us
from memsync.local.reading import ScanResult, no_gc, prompt_of
from memsync.local.storage import open_for_reading, read_chunks, read_tail

if TYPE_CHECKING:
    from memsync.local.viewstore import ViewStore

__all__ = ["FileIdentity", "LiveCache", "identity_of", "live_cache", "resumable"]


@dataclass(frozen=True, slots=True)
class FileIdentity:
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


class LiveCache:
    """The per-id summary of one memory file's records, folded forward as it grows.

    `index()` returns the summary of every complete line now in the file: nothing is read
    when the file's size and identity are unchanged, only the new lines when it grew, and
    everything again when it was rewritten. Thread-safe.

    With `store` (the state directory's persistent views, issue 20), a read from the
    start begins from the file's persistent view instead when it is valid (built first
    when the file is large enough to have one): only the live and deciding versions'
    lines and the bytes appended since are read, not every line of the file.
    """

    def __init__(self, path: Path, store: ViewStore | None = None) -> None:
        self.path = path
        self.store = store
        self._lock = threading.Lock()
        self._index = Index()
        self._seen: FileIdentity | None = None
        self._stat: tuple[int, int, int] | None = None
        self.bytes_read = 0
        self._live: tuple[int, int, list[Record]] | None = None  # (size, valid until, live)
        # The last blocks rendered, by (scope, max_chars), with the live list they were
        # rendered from: a block of an unchanged file costs nothing the second time.
        self._rendered: dict[tuple[str | None, int | None, bool], tuple[list[Record], str]] = {}

    def index(self) -> Index:
        """The summary of the file's records (rules 8 to 10), up to date."""
        with self._lock:
            return self._refresh()

    def live(self, now: int | None = None) -> list[Record]:
        """The view's live records at `now` (rule 12), rebuilt only when the file changed
        or an entry expired since the last call (rule 11)."""
        at = now_us() if now is None else now
        with self._lock:
            index = self._refresh()
            size = self._seen.offset if self._seen else 0
            cached = self._live
            if cached is not None and cached[0] == size and at < cached[1] and now is None:
                return cached[2]
            with no_gc():
                live = build_view(index, at).live
            until = min((r.expires for r in live if r.expires is not None), default=math.inf)
            self._live = (size, int(min(until, 2**62)), live)
            return live

    def prompt(self, scope: str | None, max_chars: int | None, *, markdown: bool = False) -> str:
        """The memory block for a task in `scope` (`memsync.core.prompt.render_prompt`)
        now, rendered again only when the live records changed (issue 14)."""
        live = self.live()
        key = (scope, max_chars, markdown)
        with self._lock:
            hit = self._rendered.get(key)
        if hit is not None and hit[0] is live:
            return hit[1]
        text = prompt_of(live, scope, max_chars, markdown=markdown)
        with self._lock:
            if len(self._rendered) >= 64:  # many scopes: keep the memory bounded
                self._rendered.clear()
            self._rendered[key] = (live, text)
        return text

    def _refresh(self) -> Index:
        # A long-lived reader (a server's recall and prompt) recovers what a compaction
        # killed since left aside, at its next read (rule 16): one directory listing.
        recover_after_crash(self.path)
        st = os.stat(self.path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self._stat:
            return self._index  # unchanged: nothing to read
        seen = self._seen
        if not resumable(self.path, seen, st):
            self._index, seen = Index(), None
            seeded = self._seeded(st)
            if seeded is not None:
                self._index, seen = seeded
        offset, line = (seen.offset, seen.line) if seen else (0, 1)
        with no_gc():
            for chunk in read_chunks(self.path, offset, line):
                self._index.fold_lines(
                    chunk.lines, source=str(self.path), first_line=chunk.first_line
                )
                self.bytes_read += chunk.end - chunk.start
                offset, line = chunk.end, chunk.first_line + len(chunk.lines)
        self._seen = identity_of(self.path, st.st_ino, offset, line)
        self._stat = key
        return self._index

    def _seeded(self, st: os.stat_result) -> tuple[Index, FileIdentity] | None:
        """The summary of the file from its persistent view, each version holding its
        line again, and where the view stopped; None without a store, for a small file,
        or when the file changed under us (then it is read from the start)."""
        store = self.store
        if store is None or st.st_size < store.min_bytes:
            return None
        from memsync.local.located import LocatedView, located_index  # (start-up)

        name = str(self.path)
        fd = open_for_reading(self.path)
        with LocatedView([], ScanResult(), [self.path], [fd]) as view:
            if os.fstat(fd).st_ino != st.st_ino:
                return None  # replaced since the stat: read it from the start
            resumed = store.resume(self.path, fd, name)
            if resumed is None:
                with located_index(self.path, store):
                    pass  # no valid store: built now, for the next process
                resumed = store.resume(self.path, fd, name)
            if resumed is None:
                return None
            index = resumed.scan.index
            # `Described` versions hold where their line is: read each line (runs of
            # adjacent ones with one pread), as the cache's consumers need the bytes.
            for table in (index.tombs, index.user, index.inferred):
                located = sorted(cast(Iterable[Located], table.values()), key=_AT)
                for rec, raw in zip(located, view.lines_of(located), strict=True):
                    table[rec.id] = Record(
                        raw, rec.id, rec.ts, rec.deleted, rec.user, rec.supersedes, rec.expires
                    )
            index.line = Index().line  # whole records: the tie-break reads `raw`
            identity = identity_of(self.path, st.st_ino, resumed.offset, resumed.line)
        return index, identity


_AT = attrgetter("at")
_CACHES: dict[Path, LiveCache] = {}
_CACHES_LOCK = threading.Lock()


def live_cache(path: Path, store: ViewStore | None = None) -> LiveCache:
    """This process's `LiveCache` of memory file `path` (one per resolved path); with
    `store`, it starts from the file's persistent view (the first caller's store is kept
    until one is given)."""
    key = path.resolve()
    with _CACHES_LOCK:
        found = _CACHES.get(key)
        if found is None:
            found = _CACHES[key] = LiveCache(key, store)
        elif found.store is None and store is not None:
            found.store = store
        return found
