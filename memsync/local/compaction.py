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

A kill at any point leaves the old file or the new one in place, never a mix; the next
compaction removes the temp file and drains an aside link from its recorded offset.
The file is never truncated or edited in place. A byte order mark at its start (rule 1:
no part of any line) is not copied: a rewritten file starts with memsync's header (a file
already compact is left as it is, mark and all).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from memsync.core.compaction import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_QUIET_SECONDS,
    DROP_REASONS,
    CompactionPlan,
    Rejected,
    Survey,
    plan_compaction,
)
from memsync.core.lines import Header, classify
from memsync.core.timestamps import SECOND
from memsync.errors import NotQuiet
from memsync.local import compaction_parts
from memsync.local.acknowledgements import ALL, Acknowledgements, acknowledged_lines
from memsync.local.drain import (
    clean_up,
    drain,
    finish_drain,
    rejected_path,
    set_aside,
    unlink,
    write_rejected,
)
from memsync.local.fresh import header_line, now_us
from memsync.local.lock import held, lock_path
from memsync.local.progress import Progress
from memsync.local.quiet import check_quiet, wait_for_writers
from memsync.local.reading import no_gc
from memsync.local.storage import fsync_dir, full_fsync, read_chunks_fd, write_all

__all__ = [
    "ALL",
    "DAY",
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_QUIET_SECONDS",
    "Acknowledgements",
    "CompactionResult",
    "acknowledged_lines",
    "compact_file",
    "rejected_path",
]

logger = logging.getLogger(__name__)

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
) -> CompactionResult:
    """Rewrite `path` with only the lines its view still needs (rules 15 and 16).

    A file larger than `PART_BYTES` is planned in partitions by id, so that memory is
    that of a partition (`memsync.local.compaction_parts`); the result is the same.

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
            work = _work(path, fd, at, progress)
            work.survey()
            try:
                work.plan_and_account(horizon, acknowledged, reject=False)
                return work.result(dry_run=True)
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
            work = _work(path, fd, at, progress)
            try:
                work.survey()
                if not work.nothing_to_do(horizon, acknowledged):
                    work.plan_and_account(horizon, acknowledged, reject=True)
                    work.rewrite(grace_seconds)
                return work.result(dry_run=False)
            finally:
                work.close()
        finally:
            os.close(fd)


@contextmanager
def _compaction_lock(path: Path, timeout: float) -> Iterator[None]:
    """The file's lock, or NotQuiet when another memsync process holds it."""
    busy = f"{path}: locked by another memsync process"
    with held(lock_path(path), timeout, lambda: NotQuiet(busy)):
        yield


class _Work:
    """One compaction in progress: the file's old inode, read through `fd`."""

    def __init__(self, path: Path, fd: int, now: int, progress: Progress | None = None) -> None:
        self.path = path
        self.fd = fd
        self.now = now
        self.progress = progress
        st = os.fstat(fd)
        self.mode = stat.S_IMODE(st.st_mode)
        self.dev, self.ino = st.st_dev, st.st_ino
        self.size = st.st_size
        self.end = 0
        self.lines = 0
        self.digest = b""
        self.first_is_header = False
        self.survey_ = Survey()
        self.plan: CompactionPlan | None = None
        self.out = CompactionResult(str(path))

    def survey(self) -> None:
        """Pass 1: fold every complete line into the survey."""
        hasher = xxhash.xxh3_128()
        name = str(self.path)
        with no_gc():
            for chunk in read_chunks_fd(self.fd, keep_long=True):  # bad lines go aside whole
                lines, first, end, data = chunk.lines, chunk.first_line, chunk.end, chunk.data
                hasher.update(data)
                if first == 1 and lines:
                    self.first_is_header = type(classify(lines[0], source=name)) is Header
                self.survey_.fold(lines, source=name, first_line=first)
                self.lines = first + len(lines) - 1
                self.end = end
                if self.progress is not None:
                    self.progress("compact: reading", self.lines, end, self.size)
        self.size = max(self.size, self.end)
        self.digest = hasher.digest()

    def nothing_to_do(self, horizon: int, acknowledged: Acknowledgements) -> bool:
        """Whether the file is already compact: a header, then only kept records. Then it
        is left alone, so that peers need not read it again from the start."""
        records = self.survey_.index.records
        if self.lines != records + 1 or not self.first_is_header:
            return False
        with no_gc():
            acked = acknowledged_lines(self.survey_, self.now, horizon, acknowledged)
            plan = plan_compaction(self.survey_, now=self.now, horizon=horizon, acknowledged=acked)
        self.plan = plan
        if len(plan.keep) != records:
            return False
        self.out.kept = records
        return True

    def plan_and_account(
        self,
        horizon: int,
        acknowledged: Acknowledgements,
        *,
        reject: bool,
    ) -> None:
        """Plan, then pass 2: count the dropped lines and move the bad ones aside."""
        hasher = xxhash.xxh3_128()
        name = str(self.path)
        bad: list[Rejected] = []
        with no_gc():
            plan = self.plan or plan_compaction(
                self.survey_,
                now=self.now,
                horizon=horizon,
                acknowledged=acknowledged_lines(self.survey_, self.now, horizon, acknowledged),
            )
            self.plan = plan
            for chunk in read_chunks_fd(self.fd, stop=self.end, keep_long=True):
                lines, first, data = chunk.lines, chunk.first_line, chunk.data
                hasher.update(data)
                bad += plan.account(lines, source=name, first_line=first)
        if hasher.digest() != self.digest:
            raise NotQuiet(f"{self.path}: rewritten in place during compaction; try again")
        if reject and bad:
            write_rejected(self.path, bad, self.now)
        self.out.rejected = len(bad)

    def rewrite(self, grace_seconds: float) -> None:
        """Write the temp file, set the old inode aside, rename, drain (rule 16)."""
        path, folder = self.path, self.path.parent
        generation = os.urandom(8).hex()
        tmp = folder / f".{path.name}.tmp-compact-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        renamed = False
        aside: Path | None = None
        try:
            try:
                os.fchmod(fd, self.mode)
                write_all(fd, header_line(self.now, generation))
                written = 0
                for block in self.kept_lines():
                    write_all(fd, block)
                    written += len(block)
                    if self.progress is not None:
                        self.progress("compact: writing", 0, written, self.size)
                full_fsync(fd)
            except OSError as exc:  # a write names no file: "[Errno 28] ..." alone said nothing
                raise OSError(
                    exc.errno,
                    f"{exc.strerror} (writing its compacted copy; the file is unchanged)",
                    str(path),
                ) from exc
            finally:
                os.close(fd)
            aside = set_aside(path, self.end)
            st = os.stat(path)
            if (st.st_dev, st.st_ino) != (self.dev, self.ino):
                raise NotQuiet(f"{path}: replaced by another program during compaction")
            os.replace(tmp, path)
            renamed = True
            fsync_dir(folder)
        finally:
            if not renamed:
                unlink(tmp)
                if aside is not None:
                    unlink(aside)
        self.out.generation = generation
        self.out.rewritten = True
        drained = drain(self.fd, self.end, path, time.monotonic() + grace_seconds)
        self.out.drained = drained.lines
        self.out.rejected += finish_drain(path, aside, drained, self.now)

    def kept_lines(self) -> Iterable[bytes]:
        """The kept lines, in blocks, for the new file."""
        assert self.plan is not None
        return self.plan.data()

    def stats(self) -> tuple[int, int, dict[str, int], int] | None:
        """Records kept, their bytes, lines dropped by reason, tombstones pinned; None
        before a plan."""
        plan = self.plan
        if plan is None:
            return None
        kept_bytes = sum(len(r.raw) + 1 for r in plan.keep)
        return len(plan.keep), kept_bytes, plan.dropped, len(plan.pinned)

    def close(self) -> None:
        """Free what the work holds outside memory (temporary files)."""

    def result(self, *, dry_run: bool) -> CompactionResult:
        out = self.out
        out.dry_run = dry_run
        out.size_before = self.size
        out.lines_before = self.lines
        stats = self.stats()
        if stats is not None:
            out.kept, kept_bytes, dropped, out.pinned = stats
            out.dropped = {r: dropped[r] for r in DROP_REASONS if dropped.get(r)}
        if out.rewritten:
            st = os.stat(self.path)
            out.size_after = st.st_size
            out.lines_after = 1 + out.kept + out.drained
        elif dry_run and stats is not None:
            out.size_after = len(header_line(self.now)) + kept_bytes
            out.lines_after = 1 + out.kept
            if self.size > self.end:
                out.size_after += self.size - self.end
        else:
            out.size_after, out.lines_after = self.size, self.lines
        return out


def _work(path: Path, fd: int, now: int, progress: Progress | None) -> _Work:
    if os.fstat(fd).st_size > compaction_parts.PART_BYTES:
        return _PartedWork(path, fd, now, progress)
    return _Work(path, fd, now, progress)


class _PartedWork(_Work):
    """A compaction of a large file, planned in partitions by id (issue 14): the same
    steps and result as `_Work`, in the memory of one partition."""

    def __init__(self, path: Path, fd: int, now: int, progress: Progress | None) -> None:
        super().__init__(path, fd, now, progress)
        self.parted: compaction_parts.Parted | None = None
        self.parted_plan: compaction_parts.PartedPlan | None = None

    def survey(self) -> None:
        """Pass 1: split the lines by id into temporary files."""
        count = max(1, -(-self.size // compaction_parts.PART_BYTES))
        with no_gc():
            parted = compaction_parts.split_file(
                self.fd, str(self.path), self.path.parent, count, self.progress
            )
        self.parted = parted
        self.lines, self.end, self.digest = parted.lines, parted.end, parted.digest
        self.first_is_header = parted.first_is_header
        self.size = max(self.size, self.end)

    def _planned(self, horizon: int, acknowledged: Acknowledgements) -> compaction_parts.PartedPlan:
        if self.parted_plan is None:
            assert self.parted is not None
            now = self.now

            def acked(survey: Survey) -> frozenset[bytes] | None:
                return acknowledged_lines(survey, now, horizon, acknowledged)

            self.parted_plan = compaction_parts.plan_parted(
                self.parted,
                str(self.path),
                self.path.parent,
                now=now,
                horizon=horizon,
                acknowledged=acked,
                progress=self.progress,
            )
            self.parted.close()
        return self.parted_plan

    def nothing_to_do(self, horizon: int, acknowledged: Acknowledgements) -> bool:
        plan = self._planned(horizon, acknowledged)
        if self.lines != plan.records + 1 or not self.first_is_header:
            return False
        if plan.kept != plan.records:
            return False
        self.out.kept = plan.records
        return True

    def plan_and_account(
        self,
        horizon: int,
        acknowledged: Acknowledgements,
        *,
        reject: bool,
    ) -> None:
        plan = self._planned(horizon, acknowledged)
        hasher = xxhash.xxh3_128()
        for chunk in read_chunks_fd(self.fd, stop=self.end, keep_long=True):
            hasher.update(chunk.data)
        if hasher.digest() != self.digest:
            raise NotQuiet(f"{self.path}: rewritten in place during compaction; try again")
        if reject and plan.bad:
            write_rejected(self.path, plan.bad, self.now)
        self.out.rejected = len(plan.bad)

    def kept_lines(self) -> Iterable[bytes]:
        assert self.parted_plan is not None
        return self.parted_plan.data()

    def stats(self) -> tuple[int, int, dict[str, int], int] | None:
        plan = self.parted_plan
        if plan is None:
            return None
        return plan.kept, plan.kept_bytes, plan.dropped, len(plan.pinned)

    def close(self) -> None:
        if self.parted is not None:
            self.parted.close()
        if self.parted_plan is not None:
            self.parted_plan.close()
