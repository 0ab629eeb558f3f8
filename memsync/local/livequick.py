"""A long-lived reader's quick part of one memory file (issue 20): the MCP server's view.

The server's prompt block, and what `supersede` and `forget` ask of one id, come from the
file's quick part (`memsync.local.viewranks`), kept open (mapped) between calls, with the
lines appended since folded into it at each call: a call after an append reads the new
lines and the lines its answer shows, not the file, and the server holds no view of every
id (its memory is that of the pages of the quick part it read and of the appended lines).

The quick part is opened again (its header and its digest of every folded byte checked,
`viewranks_open.open_quick`) only when the file is not what it read (another inode or
header generation, shorter, other bytes just before where it stopped:
`livecache.resumable`) or when more than the store's `save_after` bytes were appended
since it was written. Where it cannot answer (a file under `ViewStore.min_bytes`, a budget
under `MIN_BUDGET`, a `now` before it was written, no valid or a damaged quick part) the
fold answers, as `memsync prompt` does, and writes the store again when due: the next
call then has a quick part.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from memsync.core.records import Record
from memsync.local.asides import asides_of
from memsync.local.fresh import now_us
from memsync.local.livecache import FileIdentity, LiveCache, identity_of, resumable
from memsync.local.storage import errors_named, open_for_reading, read_chunks_fd
from memsync.local.viewranks import MIN_BUDGET, Damaged, Quick
from memsync.local.viewranks_open import discard, fold_since, open_quick
from memsync.local.viewstore import ViewStore

__all__ = ["LiveQuick", "Newest", "live_quick"]

Newest = tuple[int | None, int, int]
"""What a reader knows of one id: its newest `created_at` (None: no record), in the first
`end` bytes of the file of inode `ino`: (newest, ino, end)."""


class LiveQuick:
    """The quick part of memory file `path` in `store`, held between calls and folded
    forward as the file grows. Thread-safe; each call opens the file and closes it."""

    def __init__(self, path: Path, store: ViewStore) -> None:
        self.path = path
        self.store = store
        self._lock = threading.Lock()
        self._quick: Quick | None = None
        self._seen: FileIdentity | None = None
        self._stat: tuple[int, int, int] | None = None
        self.opened = 0
        """How many times the quick part was opened (its digest checked): once, then again
        only after a rewrite of the file or `save_after` bytes appended."""
        # The last blocks rendered, by (scope, max_chars, markdown): with the file's
        # identity and size they were rendered at, and the next expiry (rule 11).
        self._rendered: dict[tuple[str | None, int, bool], tuple[object, int | None, str]] = {}
        self._small: LiveCache | None = None
        self._written: tuple[int, int, int] | None = None  # the quick part's file, as held
        self.rewriting: subprocess.Popen[bytes] | None = None
        """The process writing the store again (`_rewrite`), if one was started."""
        self._rewritten = -math.inf  # when it was started (`time.monotonic`)

    def prompt(
        self, scope: str | None, max_chars: int, *, markdown: bool = False, now: int | None = None
    ) -> str:
        """The memory block for a task in `scope` at `now` (default: the local clock), the
        one `reading.prompt_of` renders from a fold of the whole file, rendered again only
        when the file changed or an entry expired since the last one (rule 11). Raises
        OSError naming the file, UnsupportedFormat (rule 2)."""
        at = now_us() if now is None else now
        with self._lock:
            text, small = self._quick_prompt(scope, max_chars, at, markdown)
            # No valid quick part (a cold file, a damaged one): written by another process,
            # then asked. (One that cannot answer, a clock behind its floor, is not.)
            cold = self._quick is None and not small and max_chars >= MIN_BUDGET
            if text is None and cold and self._rewrite(True):
                text, small = self._quick_prompt(scope, max_chars, at, markdown)
            if text is not None:
                return text
            if small and now is None:
                # No store for a small file (`ViewStore.min_bytes`): this process's cache
                # of its few ids, folded forward as it grows, its block rendered again
                # only when it changed (`LiveCache`), dropped once the file has a store.
                if self._small is None:
                    self._small = LiveCache(self.path)
                return self._small.prompt(scope, max_chars, markdown=markdown)
            self._small = None
            return self._folded(scope, max_chars, at, markdown)

    def _quick_prompt(
        self, scope: str | None, max_chars: int, at: int, markdown: bool
    ) -> tuple[str | None, bool]:
        """The block from the quick part (None: it cannot answer), and whether the file
        is too small to have one. Under the lock."""
        key = (scope, max_chars, markdown)
        fd = self._open()
        try:
            with errors_named(self.path):
                small = os.fstat(fd).st_size < self.store.min_bytes
                quick = self._refresh(fd) if max_chars >= MIN_BUDGET else None
                if quick is None:
                    return None, small
                hit = self._rendered.get(key)
                if hit is not None and hit[0] == self._stat and _before(at, hit[1]):
                    return hit[2], small
                try:
                    text = quick.prompt(scope, max_chars, at, markdown=markdown)
                    until = quick.next_expiry(at)
                except Damaged:
                    self._damaged()
                    return None, small
                if text is not None:
                    if len(self._rendered) >= 64:  # many scopes: bounded memory
                        self._rendered.clear()
                    self._rendered[key] = (self._stat, until, text)
                return text, small
        finally:
            self._close(fd)

    def current(self, rid: str) -> Record | None:
        """The current version of `rid` (rules 8 and 9, `Index.current`: before
        supersession and expiry), holding its line; None when every version is deleted
        or there is none. Raises OSError naming the file."""
        with self._lock:
            fd = self._open()
            try:
                with errors_named(self.path):
                    quick = self._refresh(fd)
                    if quick is not None:
                        try:
                            rec = quick.versions(rid).current(rid)
                        except Damaged:
                            self._damaged()
                        else:
                            if rec is None:
                                return None
                            raw = quick.line(rec)
                            return Record(
                                raw, rid, rec.ts, rec.deleted, rec.user, None, rec.expires
                            )
                    return _scanned(fd, str(self.path), rid)
            finally:
                self._close(fd)

    def newest(self, rid: str) -> Newest | None:
        """The newest `created_at` of any record of `rid` in what the quick part and the
        lines folded since hold, with the inode and where they end (`Memory.forget` reads
        only what was appended after); None without a quick part."""
        with self._lock:
            fd = self._open()
            try:
                with errors_named(self.path):
                    quick = self._refresh(fd)
                    if quick is None or self._seen is None:
                        return None
                    try:
                        stored = quick.newest_stored(rid)
                    except Damaged:
                        self._damaged()
                        return None
                    found = [r.ts for r in quick.by_id.get(rid, ())]
                    if stored is not None:
                        found.append(stored)
                    return max(found, default=None), self._seen.ino, self._seen.offset
            finally:
                self._close(fd)

    @contextmanager
    def held(self) -> Iterator[Quick | None]:
        """The quick part with every complete line folded, for several questions in a row
        (recall's candidates: `Quick.alive`, `Quick.line`), under this reader's lock with
        the file open; None when there is no valid one (the caller folds). A `Damaged`
        raised inside discards it (and propagates). Raises OSError naming the file."""
        with self._lock:
            fd = self._open()
            try:
                with errors_named(self.path):
                    quick = self._refresh(fd)
                    try:
                        yield quick
                    except Damaged:
                        self._damaged()
                        raise
            finally:
                self._close(fd)

    def check_all(self) -> None:
        """Open the quick part, if it is not, and check every block of its columns now
        (`Quick.check_all`: at 1M records 87 MB read, about 30 ms): a server's warming
        thread, so that its first calls do not (a recall's first candidates checked
        hundreds of blocks, 5 ms and more). `_CHECKED_AT_ONCE` blocks at a time under
        the lock: a call meanwhile waits for a few, not for all. A damaged one is
        discarded (`held`)."""
        try:
            while True:
                with self.held() as quick:
                    if quick is None or quick.check_all(_CHECKED_AT_ONCE):
                        return
        except Damaged:
            pass  # (discarded: the next call's fold writes it again)

    def _close(self, fd: int) -> None:
        """The file closed, and the pages of the quick part this call read given back
        (`Quick.release`): a server's memory is then not the columns its calls touched
        (a prompt's walk down the drop order touches scattered rows of them)."""
        os.close(fd)
        if self._quick is not None:
            self._quick.release()

    def _open(self) -> int:
        if asides_of(self.path):  # lines a killed compaction left aside (rule 16)
            from memsync.local.drain import recover_after_crash  # (nearly never)

            recover_after_crash(self.path)
        return open_for_reading(self.path)

    def _refresh(self, fd: int) -> Quick | None:
        """The quick part of the file open as `fd`, with every complete line folded: the
        one held, folded forward past what it read, when the file only grew since; else
        opened again; None when there is no valid one.

        Once the file is more than `save_after` bytes past the one held, a quick part
        written since (by a command, or by the rewrite started here) is taken; until there
        is one, the one held is folded forward (the same answers, at the cost of the lines
        appended since it was written) and the store is written again in another process
        (`_rewrite`): a fold through the store here would keep hundreds of MB at 1M
        records in this process for good."""
        st = os.fstat(fd)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        quick, seen, name = self._quick, self._seen, str(self.path)
        if quick is not None and seen is not None:
            quick.fd = fd
            far = st.st_size - quick.head.size > self.store.save_after
            if key == self._stat and not far:
                return quick
            if resumable(self.path, seen, st):
                if far:
                    fresher = self._reopened(fd, st)
                    if fresher is not None:
                        return fresher
                    self._rewrite(False)
                    if key == self._stat:
                        return quick
                end, line = fold_since(quick, fd, name, seen.offset, seen.line)
                self._seen = identity_of(self.path, st.st_ino, end, line)
                self._stat = key
                return quick
        self._quick = self._seen = self._stat = None
        if st.st_size < self.store.min_bytes:
            return None
        return self._reopened(fd, st)

    def _reopened(self, fd: int, st: os.stat_result) -> Quick | None:
        """The quick part in the state directory, opened (its checks made), with the
        lines after it folded, when it is valid and not the one held (nor one already
        found not valid); None else (the one held, if any, stays)."""
        state, name = self.store.state, str(self.path)
        ranks, note = state.view_ranks(self.path), state.view_seen(self.path)
        try:
            rst = os.stat(ranks)
            written: tuple[int, int, int] | None = (rst.st_ino, rst.st_size, rst.st_mtime_ns)
        except OSError:
            written = None
        if self._quick is not None and written == self._written:
            return None
        self._written = written
        quick = open_quick(ranks, note, self.path, fd, name, self.store.save_after, fold=False)
        if quick is None:
            return None
        self.opened += 1
        end, line = fold_since(quick, fd, name, quick.head.size, quick.head.line)
        self._quick, self._stat = quick, (st.st_ino, st.st_size, st.st_mtime_ns)
        self._seen = identity_of(self.path, st.st_ino, end, line)
        return quick

    def _rewrite(self, wait: bool) -> bool:
        """Write the file's store (and its quick part) again in another process
        (`python -m memsync.local.livequick`), at most one at a time and one a minute;
        with `wait`, wait for it (at most `_REWRITE_WAIT`). Whether one ran to its end
        now; False too when none could be started (the caller folds here instead)."""
        proc = self.rewriting
        if proc is None or proc.poll() is not None:
            if time.monotonic() - self._rewritten < _REWRITE_EVERY:
                return False
            self._rewritten = time.monotonic()
            store = self.store
            args = [str(self.path), str(store.state.root), str(store.min_bytes)]
            try:
                proc = self.rewriting = subprocess.Popen(
                    [sys.executable, "-m", "memsync.local.livequick", *args, str(store.save_after)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=_PACKAGE_HOME,  # memsync importable, installed or not
                )
            except OSError:  # no interpreter to run (an embedded one), no process left
                return False
        if not wait:
            return False
        try:
            return proc.wait(_REWRITE_WAIT) == 0
        except subprocess.TimeoutExpired:
            return False

    def _damaged(self) -> None:
        """A block of the quick part is not what was written: removed (the fold that
        answers instead writes it again), and not held."""
        discard(self.store.state.view_ranks(self.path))
        self._quick = self._seen = self._stat = None

    def _folded(self, scope: str | None, max_chars: int, now: int, markdown: bool) -> str:
        """The block from a fold (through the store, which it writes again when due; a
        quick part held stays valid: it is of the file's first bytes)."""
        from memsync.local.located import located_view
        from memsync.local.reading import prompt_of, prompt_of_described

        with located_view([self.path], now, self.store) as view:
            if not view.resumed:
                return prompt_of(view.records, scope, max_chars, view.lines(), markdown=markdown)
            return prompt_of_described(
                view.records, scope, max_chars, view.line, view.length, markdown=markdown
            )


def _before(now: int, until: int | None) -> bool:
    return until is None or now < until


def _scanned(fd: int, name: str, rid: str) -> Record | None:
    """`current` by a scan of the lines naming `rid` (no quick part: a small file)."""
    from memsync.core.lines import classify
    from memsync.core.view import Index

    index = Index()
    needle = msgspec.json.encode(rid)[1:-1]
    for chunk in read_chunks_fd(fd):
        if needle not in chunk.data:
            continue
        for raw in chunk.lines:
            if needle in raw:
                rec = classify(raw, source=name)
                if type(rec) is Record and rec.id == rid:
                    index.add(rec)
    return index.current(rid)


_VIEWS: dict[tuple[Path, ViewStore], LiveQuick] = {}
_VIEWS_LOCK = threading.Lock()


def live_quick(path: Path, store: ViewStore) -> LiveQuick:
    """This process's `LiveQuick` of memory file `path` in `store` (one per resolved path
    and store): a server, and the thread that warms it at start, share it."""
    key = (path.resolve(), store)
    with _VIEWS_LOCK:
        found = _VIEWS.get(key)
        if found is None:
            found = _VIEWS[key] = LiveQuick(key[0], store)
        return found


_CHECKED_AT_ONCE = 32
"""Blocks of a quick part checked under the lock at a time by `check_all` (2 MiB, about
1 ms here)."""
_REWRITE_EVERY = 60.0
"""Seconds between two rewrites of a store by a server (`LiveQuick._rewrite`): a state
directory that cannot be written costs one process a minute, not one per call."""
_REWRITE_WAIT = 900.0
"""Seconds a call waits for the store written by another process (a cold 1M-record file:
about 30 s here) before it folds the file itself."""
_PACKAGE_HOME = Path(__file__).resolve().parents[2]


def _main(argv: list[str]) -> int:
    """`python -m memsync.local.livequick PATH STATE_DIR MIN_BYTES SAVE_AFTER`: write the
    store of memory file PATH in STATE_DIR again when it is due (or missing), as a fold
    through it does (`located_index`); a server's `_rewrite`."""
    from memsync.local.located import located_index
    from memsync.local.statedir import StateDir

    path, root, min_bytes, save_after = argv
    store = ViewStore(StateDir(Path(root)), min_bytes=int(min_bytes), save_after=int(save_after))
    with located_index(Path(path), store):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
