"""Compacting a memory file (SEMANTICS rules 15 and 16): the shell around
`memsync.core.compaction`.

`compact_file` starts only when the file is quiet: unchanged for `quiet_seconds`, held open
for writing by no other process (`memsync.local.writers`; where no detector can tell, it
is not quiet either), and its lock taken; otherwise it raises
`NotQuiet`, and the caller tries again later. A file that agents never stop writing would
be postponed for ever: `force` (the daemon, after `max_postpone_seconds` of postponements)
does not wait for the quiet period, only for a moment with no process holding the file
open for writing; the drain below is what keeps the lines appended meanwhile. Then, still
under the lock:

1. stale leftovers of a killed compaction are dealt with (`clean_up`);
2. pass 1 reads the file through one fd, folding every record (`Survey`), and the plan is
   made; pass 2 reads the same bytes again to count what is dropped and to move the bad
   lines, byte for byte, to `<file>.rejected` (fsynced before anything else changes);
3. a new header (a new `generation` token) and the kept lines go to a temp file in the same
   folder, which is fsynced, hard-linked aside as `.<name>.old-<pid>-<offset>` (the old
   inode, so that a kill cannot lose what reaches it late), renamed over the file, and the
   folder fsynced;
4. the old inode is drained: complete lines that reached it after the read are appended to
   the new file, until no other process holds it open for writing (or the grace period
   ends where no detector can tell); an unterminated last line left there goes to the side
   file. Then the aside link is removed, unless a writer still holds the old inode or none
   can be told, in which case it stays for the next compaction to drain.

After the lock, given a `store`, the new file's persistent view is written from the records
the compaction kept (issue 20, `memsync.local.compaction_view`): the first command after a
compaction folds none of it again.

A kill at any point leaves the old file or the new one in place, never a mix; the next
compaction removes the temp file and drains an aside link from its recorded offset.
The file is never truncated or edited in place. A byte order mark at its start (rule 1:
no part of any line) is not copied: a rewritten file starts with memsync's header (a file
already compact is left as it is, mark and all).

This module is the sequence: when a compaction may start, under which lock, and what it
reports (`CompactionResult`). Steps 2 to 4, the passes over the file's bytes, whole or in
partitions, are `memsync.local.compaction_work`'s.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.core.compaction import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_QUIET_SECONDS,
    DROP_REASONS,
)
from memsync.core.timestamps import SECOND
from memsync.errors import NotQuiet
from memsync.local.acknowledgements import ALL, Acknowledgements
from memsync.local.compaction_view import store_compacted
from memsync.local.compaction_work import Work, work_for
from memsync.local.drain import clean_up, rejected_path
from memsync.local.fresh import header_line, now_us
from memsync.local.lock import held, lock_path
from memsync.local.logs import get_logger
from memsync.local.progress import Progress
from memsync.local.quiet import check_quiet, wait_for_writers

if TYPE_CHECKING:
    from memsync.local.viewstore import ViewStore

__all__ = [
    "ALL",
    "DAY",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_QUIET_SECONDS",
    "Acknowledgements",
    "CompactionResult",
    "compact_file",
    "rejected_path",
]

logger = get_logger(__name__)

DAY = 24 * 3600 * SECOND
# DEFAULT_GRACE_SECONDS: the drain stops as soon as no process holds the old inode open
# (after `_SETTLE` seconds); where no detector can tell, it drains for the whole period.

_LOCK_TIMEOUT = 1.0
# How long a forced compaction waits for a moment with no writer: an append holds the file
# for a moment only, and the daemon's main loop waits meanwhile.
_WRITERS_PATIENCE = 1.0


@dataclass
class CompactionResult:
    """What a compaction did, or would do (`dry_run`); the `compact --json` document.

    Attributes:
        path: the file.
        size_before, size_after: its size in bytes (after: as written, or as it would be).
        lines_before: complete lines read; lines_after: lines of the new file (header
            and drained lines included).
        kept: records kept.
        dropped: lines dropped, by reason (`memsync.core.compaction.DROP_REASONS`).
        rejected: bad lines moved to `<file>.rejected`.
        drained: complete lines copied from the old inode after the read (rule 16).
        pinned: tombstones past the horizon kept because a superseding record needs them.
        generation: the new header's token (None when the file was not rewritten).
        rewritten: False when there was nothing to drop, or for a dry run.
    """

    path: str
    size_before: int = 0
    size_after: int = 0
    lines_before: int = 0
    lines_after: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    rejected: int = 0
    drained: int = 0
    pinned: int = 0
    generation: str | None = None
    rewritten: bool = False
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size_before": self.size_before,
            "size_after": self.size_after,
            "lines_before": self.lines_before,
            "lines_after": self.lines_after,
            "kept": self.kept,
            "dropped": {r: self.dropped[r] for r in DROP_REASONS if self.dropped.get(r)},
            "rejected": self.rejected,
            "drained": self.drained,
            "pinned": self.pinned,
            "generation": self.generation,
            "rewritten": self.rewritten,
            "dry_run": self.dry_run,
        }


def _writable(path: Path) -> bool:
    """Whether compaction may rewrite `path`: this process may write it (the permission an
    append honours), and it has a write bit at all (a 0444 file is read-only even to root,
    who may write anything: its owner said so)."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)


def compact_file(
    path: Path,
    *,
    now: int | None = None,
    horizon_days: float = DEFAULT_HORIZON_DAYS,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    dry_run: bool = False,
    acknowledged: Acknowledgements = None,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    lock_timeout: float = _LOCK_TIMEOUT,
    force: bool = False,
    progress: Progress | None = None,
    store: ViewStore | None = None,
) -> CompactionResult:
    """Rewrite `path` with only the lines its view still needs (rules 15 and 16).

    A file larger than `PARTITION_BYTES` is planned in partitions by id, so that memory is
    that of a partition (`memsync.local.compaction_partitions`); the result is the same.

    Args:
        path: the memory file.
        now: the instant of the compaction in microseconds (default: the local clock);
            tombstones older than `now` minus the horizon may go.
        horizon_days: how old a tombstone must be before it may go.
        quiet_seconds: how long the file must have been unchanged.
        dry_run: plan and count, change nothing (no lock, no quiet check).
        acknowledged: which tombstones past the horizon every replica has read (rule 15;
            `memsync.local.acknowledgements`): None (the default) keeps them all, `ALL`
            lets them all go (a file no hub shares), a predicate is the hub's word
            (`memsync.hub.compaction.acknowledged_for`).
        grace_seconds: how long, at most, to drain the old inode after the rename.
        lock_timeout: how long to wait for the file's lock.
        force: do not wait for the quiet period (the daemon, once compaction has been
            postponed for too long while agents write continuously): what is appended
            while it runs is copied by the drain of rule 16. A process holding the file
            open for writing is still waited for, up to `grace_seconds` (a second at
            most): a handle kept open would write to the old inode after the drain.
        progress: told of the bytes read and written (issue 14), if given.
        store: the persistent views to leave the new file's in (issue 20), so that the
            next command need not read it whole; None: left to that command.

    Returns:
        What was done, with sizes and the dropped lines by reason.

    Raises:
        NotQuiet: the file changed within `quiet_seconds` (unless `force`), another
            process holds it open for writing, or another memsync process holds its lock.
        UnsupportedFormat: a header names a format memsync does not read (rule 2).
        OSError: the file cannot be read or the folder written.

    Example:
        >>> compact_file(Path("me.jsonl"), quiet_seconds=0, acknowledged=ALL).dropped
        {'older version': 12, 'header': 1}
    """
    at = now_us() if now is None else now
    horizon = round(horizon_days * DAY)
    # A memory path that is a symbolic link: compact what it points to, and keep the link
    # (renaming over the link would turn it into a file the agents no longer write).
    path = Path(os.path.realpath(path))
    if not dry_run and path.exists() and not _writable(path):
        raise PermissionError(errno.EACCES, "read-only; compaction would rewrite it", str(path))
    if dry_run:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            work = work_for(path, fd, at, progress)
            work.survey()
            try:
                work.plan_and_account(horizon, acknowledged, reject=False)
                return _result(work, dry_run=True)
            finally:
                work.close()
        finally:
            os.close(fd)
    with _compaction_lock(path, lock_timeout):
        clean_up(path, at)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if force:
                wait_for_writers(path, os.fstat(fd), min(grace_seconds, _WRITERS_PATIENCE))
            else:
                check_quiet(path, os.fstat(fd), quiet_seconds)
            work = work_for(path, fd, at, progress)
            try:
                work.survey()
                if not work.nothing_to_do(horizon, acknowledged):
                    work.plan_and_account(horizon, acknowledged, reject=True)
                    work.rewrite(grace_seconds)
                result = _result(work, dry_run=False)
            finally:
                work.close()
        finally:
            os.close(fd)
    if store is not None and work.written is not None:
        # The new file is another inode (rule 15), which the old store does not describe:
        # its own store, so that the next command resumes from it (issue 20).
        store_compacted(store, path, work.written)
    return result


@contextmanager
def _compaction_lock(path: Path, timeout: float) -> Iterator[None]:
    """The file's lock, or NotQuiet when another memsync process holds it."""
    busy = f"{path}: locked by another memsync process"
    with held(lock_path(path), timeout, lambda: NotQuiet(busy)):
        yield


def _result(work: Work, *, dry_run: bool) -> CompactionResult:
    """The `compact --json` document of a compaction's work (planned, maybe rewritten)."""
    out = CompactionResult(str(work.path), dry_run=dry_run)
    out.size_before, out.lines_before = work.size, work.lines
    out.rejected, out.drained = work.rejected, work.drained
    out.generation, out.rewritten = work.generation, work.rewritten
    stats = work.stats()
    if stats is not None:
        out.kept, kept_bytes, dropped, out.pinned = stats
        out.dropped = {r: dropped[r] for r in DROP_REASONS if dropped.get(r)}
    if out.rewritten:
        st = os.stat(work.path)
        out.size_after = st.st_size
        out.lines_after = 1 + out.kept + out.drained
    elif dry_run and stats is not None:
        out.size_after = len(header_line(work.now)) + kept_bytes
        out.lines_after = 1 + out.kept
        if work.size > work.end:
            out.size_after += work.size - work.end
    else:
        out.size_after, out.lines_after = work.size, work.lines
    return out
