"""The cached view of a memory file (`LiveCache`), and the identity of a file read so far.

`LiveCache`, in memory: the per-id summary of the file's records (`core.view.Index`), keyed
by the file's identity and size and folded forward as the file grows (appends and merges
only ever append, SEMANTICS rules 13 and 14), so a `recall` or a prompt on an unchanged file
reads nothing, and on a grown file reads only the new lines. It is read again from the start
when the file is not what was read: another inode or header generation (a compaction
rewrote it, rule 15), shorter, or other bytes just before the offset read to.

`FileIdentity` is that check (`memsync.local.fileidentity`), shared with the full-text
index (`memsync.local.textindex`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from memsync.core.records import Described, Located, Record
from memsync.core.view import Index, build_view
from memsync.local.drain import recover_after_crash
from memsync.local.fileidentity import FileIdentity, identity_of, resumable
from memsync.local.fresh import now_us
from memsync.local.located import LocatedView, fold_forward, located_index
from memsync.local.reading import ScanResult, no_gc, prompt_of, prompt_of_described
from memsync.local.storage import open_for_reading

if TYPE_CHECKING:
    from memsync.local.viewstore import ViewStore

__all__ = ["FileIdentity", "LiveCache", "identity_of", "live_cache", "resumable"]


class LiveCache:
    """The per-id summary of one memory file's records, folded forward as it grows.

    The summary holds no line (issue 20): its records are `Located` ones (`Described`
    when they come from the persistent view), and the lines a caller needs are read
    again, under the cache's lock, from the file opened for the call (the summary is of
    that inode, or it is read again: a compaction that replaces the file, rule 15, is
    noticed). The memory of a server is then that of its ids, not of its lines; no file
    stays open between calls.

    `index()` is the summary of every complete line now in the file: nothing is read
    when the file's size and identity are unchanged, only the new lines when it grew, and
    everything again when it was rewritten. Thread-safe.

    With `store` (the state directory's persistent views, issue 20), a read from the
    start begins from the file's persistent view instead when it is valid (built first
    when the file is large enough to have one): only the bytes appended since are read,
    and a prompt block reads only the lines it shows.
    """

    def __init__(self, path: Path, store: ViewStore | None = None) -> None:
        self.path = path
        self.store = store
        self._lock = threading.RLock()
        self._view: LocatedView | None = None
        self._seen: FileIdentity | None = None
        self._stat: tuple[int, int, int] | None = None
        self.bytes_read = 0
        self._live: tuple[int, int, list[Located]] | None = None  # (size, valid until, live)
        # The last blocks rendered, by (scope, max_chars), with the live list they were
        # rendered from: a block of an unchanged file costs nothing the second time.
        self._rendered: dict[tuple[str | None, int | None, bool], tuple[list[Located], str]] = {}

    def index(self) -> Index:
        """The summary of the file's records (rules 8 to 10), up to date, as `Located`
        records (`reading` gives their lines)."""
        with self._call() as view:
            return view.scan.index

    @contextmanager
    def reading(self) -> Iterator[tuple[Index, Callable[[Record], bytes]]]:
        """The summary up to date and a function giving a record's line, both valid until
        the block ends (the cache's lock is held and the file open meanwhile)."""
        with self._call() as view:
            yield view.scan.index, view.line

    def live(self, now: int | None = None) -> list[Located]:
        """The view's live records at `now` (rule 12) as `Located` ones (`records` gives
        them whole), rebuilt only when the file changed or an entry expired since the last
        call (rule 11)."""
        with self._call() as view:
            return self._live_at(view, now)

    def records(self, now: int | None = None) -> list[Record]:
        """The view's live records at `now` (rule 12), holding their lines."""
        with self._call() as view:
            live = self._live_at(view, now)
            return [
                Record(raw, r.id, r.ts, r.deleted, r.user, r.supersedes, r.expires)
                for r, raw in zip(live, view.lines_of(live), strict=True)
            ]

    def prompt(self, scope: str | None, max_chars: int | None, *, markdown: bool = False) -> str:
        """The memory block for a task in `scope` (`memsync.core.prompt.render_prompt`)
        now, rendered again only when the live records changed (issue 14)."""
        key = (scope, max_chars, markdown)
        with self._call() as view:
            live = self._live_at(view, None)
            hit = self._rendered.get(key)
            if hit is not None and hit[0] is live:
                return hit[1]
            if max_chars is None or sum(type(r) is not Described for r in live) > _ONE_BY_ONE:
                # Most lines to read: in runs of adjacent ones, not one `pread` each.
                text = prompt_of(live, scope, max_chars, view.lines_of(live), markdown=markdown)
            else:
                text = prompt_of_described(
                    live, scope, max_chars, view.line, view.length, markdown=markdown
                )
            if len(self._rendered) >= 64:  # many scopes: keep the memory bounded
                self._rendered.clear()
            self._rendered[key] = (live, text)
            return text

    def _live_at(self, view: LocatedView, now: int | None) -> list[Located]:
        at = now_us() if now is None else now
        size = self._seen.offset if self._seen else 0
        cached = self._live
        if cached is not None and cached[0] == size and at < cached[1] and now is None:
            return cached[2]
        with no_gc():
            live = cast(list[Located], build_view(view.scan.index, at).live)
        until = min((r.expires for r in live if r.expires is not None), default=math.inf)
        self._live = (size, int(min(until, 2**62)), live)
        return live

    @contextmanager
    def _call(self) -> Iterator[LocatedView]:
        """The cache's lock held, the file open and the summary up to date (`_refresh`),
        for one call; the file closed after it."""
        with self._lock:
            # A long-lived reader (a server's recall and prompt) recovers what a compaction
            # killed since left aside, at its next read (rule 16): one directory listing.
            recover_after_crash(self.path)
            fd = open_for_reading(self.path)
            try:
                yield self._refresh(fd)
            finally:
                os.close(fd)
                if self._view is not None:
                    self._view._fds = []

    def _refresh(self, fd: int) -> LocatedView:
        """The summary of the file open as `fd`: the one held when it is of the same file,
        folded forward past what it read; else read again from the start."""
        st = os.fstat(fd)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        view, seen = self._view, self._seen
        if view is not None:
            view._fds = [fd]
            if key == self._stat:
                return view  # unchanged: nothing to read
        if view is None or not resumable(self.path, seen, st):
            self._view = self._live = self._stat = None
            view, seen = self._opened(fd, st)
            self._view = view
        offset, line = (seen.offset, seen.line) if seen else (0, 1)
        end, line = fold_forward(view, offset, line)
        self.bytes_read += end - offset
        self._seen = identity_of(self.path, st.st_ino, end, line)
        self._stat = key
        return view

    def _opened(self, fd: int, st: os.stat_result) -> tuple[LocatedView, FileIdentity | None]:
        """A summary of the file open as `fd`: from its persistent view when there is a
        valid one (built first when the file is large enough), with where that stopped;
        else an empty one (the file is then folded from the start)."""
        view = LocatedView([], ScanResult(), [self.path], [fd])
        view.scan.index.line = view.line  # a tie between two versions reads both lines
        store = self.store
        if store is None or st.st_size < store.min_bytes:
            return view, None
        name = str(self.path)
        resumed = store.resume(self.path, fd, name)
        if resumed is None:
            with located_index(self.path, store):
                pass  # no valid store: built now, for this reader and the next process
            resumed = store.resume(self.path, fd, name)
        if resumed is None:
            return view, None  # (replaced since it was opened: read from the start)
        view.scan = resumed.scan
        view.scan.index.line = view.line
        return view, identity_of(self.path, st.st_ino, resumed.offset, resumed.line)


_ONE_BY_ONE = 1000
"""A block reads a live record's line one `pread` at a time when it is not `Described`
(folded since the persistent view was written): past this many, it reads them all in
runs instead (`prompt_of`), as a cache with no persistent view does."""
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
