"""Merging memory files: one driver (`merge_batches`) that plans each batch of incoming
lines (pure, `memsync.core.merge`) and appends it under the destination's lock, with two
strategies for each of its two questions (`memsync.local.handoff` merges a filtered slice
with it too):

- what it knows of the destination (`memsync.local.destination`): the file streamed
  (`Streamed`: `merge_files`, `plan_file_merge`) or its persistent index (`Indexed`:
  `merge_indexed`, and `merge_chunks` for a sync pass);
- how it batches the incoming lines (`memsync.local.batching`): in arrival order, or, past
  `PARTITION_BYTES`, in partitions by id, so that memory is that of one batch (issue 14).

The destination's existing bytes never change: a merge only appends whole lines, copied
byte for byte from the sources (SEMANTICS rules 5 and 13).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.core.lines import SourceLines
from memsync.core.merge import DEFAULT_MAX_FUTURE, MergePlan, Withheld
from memsync.core.records import Record
from memsync.core.timestamps import format_ts
from memsync.local import batching
from memsync.local.batching import Batch
from memsync.local.destination import (
    Appending,
    Destination,
    Indexed,
    PendingMerge,
    Streamed,
    append_planned,
)
from memsync.local.drain import recover_all
from memsync.local.fileindex import Cursor, FileIndex, cursor_at, cursor_valid
from memsync.local.fresh import now_us
from memsync.local.indexbuild import start_build
from memsync.local.lock import DEFAULT_TIMEOUT, file_lock
from memsync.local.progress import Progress
from memsync.local.statedir import StateDir
from memsync.local.storage import file_size, private_dirs, read_chunks

__all__ = [
    "MergeResult",
    "PendingMerge",
    "apply_merge",
    "merge_batches",
    "merge_chunks",
    "merge_files",
    "merge_indexed",
    "plan_file_merge",
    "withheld_json",
]


@dataclass
class MergeResult:
    """What a merge did (the `merge` summary and its `--json` document)."""

    dest: str
    appended: int = 0
    """Lines appended, `repeated` ones included."""
    bytes_appended: int = 0
    repeated: int = 0
    """Lines appended again after a beaten record that travels (SEMANTICS rule 14)."""
    duplicates: int = 0
    beaten: int = 0
    held: list[dict[str, Any]] = field(default_factory=list)
    withheld: list[dict[str, Any]] = field(default_factory=list)
    """Records not merged because they look like they hold a credential (issue 13, 6)."""
    bad: list[dict[str, Any]] = field(default_factory=list)
    twins: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False
    records: list[Record] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "dest": self.dest,
            "appended": self.appended,
            "bytes_appended": self.bytes_appended,
            "repeated": self.repeated,
            "duplicates": self.duplicates,
            "beaten": self.beaten,
            "held": self.held,
            "withheld": self.withheld,
            "bad": self.bad,
            "twins": self.twins,
            "dry_run": self.dry_run,
        }


def _result(dest: Path, plan: MergePlan, *, dry_run: bool) -> MergeResult:
    return MergeResult(
        dest=str(dest),
        appended=len(plan.append),
        bytes_appended=sum(len(r.raw) + 1 for r in plan.append),
        repeated=len(plan.repeated),
        duplicates=plan.duplicates,
        beaten=plan.beaten,
        held=[
            {
                "file": h.source,
                "line": h.line,
                "id": h.record.id,
                "created_at": format_ts(h.record.ts),
            }
            for h in plan.held
        ],
        withheld=[withheld_json(w) for w in plan.withheld],
        bad=[{"file": b.file, "line": b.line, "reason": b.reason} for b in plan.bad],
        twins=[{"id": a.id, "created_at": format_ts(a.ts)} for a, _ in plan.twins],
        dry_run=dry_run,
        records=list(plan.append),
    )


def _add_up(total: MergeResult, part: MergeResult, *, keep_records: bool) -> None:
    total.appended += part.appended
    total.bytes_appended += part.bytes_appended
    total.repeated += part.repeated
    total.duplicates += part.duplicates
    total.beaten += part.beaten
    total.held += part.held
    total.withheld += part.withheld
    total.bad += part.bad
    total.twins += part.twins
    if keep_records:
        total.records += part.records


def withheld_json(w: Withheld) -> dict[str, Any]:
    """A withheld record as reports and the status file give it: where, which id, and
    what it looks like (never the value)."""
    return {"file": w.source, "line": w.line, "id": w.id[:80], "looks_like": list(w.kinds)}


def merge_batches(
    dest: Destination,
    batches: Iterable[Batch],
    total: MergeResult,
    *,
    keep_records: bool | None = None,
    progress: Progress | None = None,
    total_bytes: int = 0,
) -> MergeResult:
    """The merge driver: each batch planned against `dest` and appended (not in a dry run),
    its counts and reports added to `total`. `keep_records` (by default: for a dry run)
    lists the records appended in `total.records`; `progress` reports the partitions done
    (of `total_bytes`). The batches before a batch are freed before it is read."""
    keep = dest.dry_run if keep_records is None else keep_records
    done = lines = 0
    for batch in batches:
        plan = dest.merge(batch)
        _add_up(total, _result(dest.path, plan, dry_run=dest.dry_run), keep_records=keep)
        if progress is not None:
            lines += len(batch)
            done += batch.size()
            progress(_PARTITIONS, lines, done, total_bytes)
        del batch, plan  # freed before the next batch is read, not while
    dest.finish()
    return total


_PARTITIONS = "merge: partitions"
"""The progress of a merge in partitions by id, once the lines are split."""


def _merge(
    dest: Destination,
    chunks: Iterable[SourceLines],
    total_bytes: int,
    progress: Progress | None,
    *,
    by_id: bool,
) -> MergeResult:
    """`merge_batches` of `chunks`: in partitions by id (`total_bytes` of them, `progress`
    reported per partition), or in batches of `BATCH_LINES` in arrival order (a dry run:
    one batch, so that it lists exactly what a single merge would append)."""
    total = MergeResult(dest=str(dest.path), dry_run=dest.dry_run)
    if not by_id:
        limit = None if dest.dry_run else batching.BATCH_LINES
        return merge_batches(dest, batching.in_order(chunks, limit), total)
    private_dirs(dest.path.parent)  # the partitions' temporary files go beside `dest`
    with batching.by_id(chunks, dest.path.parent, total_bytes, dest.known()) as parts:
        total.duplicates = parts.known
        return merge_batches(
            dest, parts.batches(), total, progress=progress, total_bytes=total_bytes
        )


def merge_files(
    dest: Path,
    sources: Sequence[Path],
    *,
    now: int | None = None,
    max_future: int = DEFAULT_MAX_FUTURE,
    dry_run: bool = False,
    lock_timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
) -> MergeResult:
    """Append to `dest` (created if missing) the records of `sources` it lacks (rule 14).

    The destination is streamed (`Streamed`). Sources over `PARTITION_BYTES` together go
    in partitions by id, each planned against the file as the partitions before it left it
    (but not reading what they appended) and appended under the lock, so that memory is
    that of one partition (plus a digest per line of `dest`), not of the sources (issue
    14). Smaller ones go in batches of `BATCH_LINES` lines. Either way a merge reaches the
    view one plan of everything would. `records` (what would be appended) is listed for a
    dry run, which is one plan, as in `merge_chunks`. Each file first recovers what a
    killed compaction left aside (rule 16).
    """
    recover_all([dest, *sources])
    total_bytes = sum(file_size(p) for p in sources)
    by_id = not dry_run and total_bytes > batching.PARTITION_BYTES
    streamed = Streamed(
        dest,
        now=now,
        max_future=max_future,
        lock_timeout=lock_timeout,
        dry_run=dry_run,
        once=dry_run,
    )
    chunks = _source_chunks(sources, progress, total_bytes)
    return _merge(streamed, chunks, total_bytes, progress, by_id=by_id)


def plan_file_merge(
    dest: Path,
    sources: Sequence[Path],
    *,
    now: int | None = None,
    max_future: int = DEFAULT_MAX_FUTURE,
) -> PendingMerge:
    """Plan merging `sources` into `dest` without changing anything.

    Two streaming passes over `dest` (digests of its lines, then only the records that
    bear on what is new) and one over the sources: memory follows the destination's line
    count (a digest each), not its size.
    """
    streamed = Streamed(
        dest, now=now, max_future=max_future, lock_timeout=DEFAULT_TIMEOUT, once=True
    )
    return streamed.plan(_source_chunks(sources))


def apply_merge(pending: PendingMerge, *, lock_timeout: float = DEFAULT_TIMEOUT) -> MergeResult:
    """Append a planned merge to its destination, under the destination's lock.

    Lines that reached the destination after the plan was made are read first: a planned
    record already among them is not appended again. If the file was replaced meanwhile
    (compaction: another inode, or shorter), `Replanned` is raised: plan again.
    """
    append_planned(pending, lock_timeout)
    return _result(pending.dest, pending.plan, dry_run=False)


def _source_chunks(
    paths: Sequence[Path], progress: Progress | None = None, total: int = 0
) -> Iterator[SourceLines]:
    done = lines = 0
    for path in paths:
        for chunk in read_chunks(path):
            yield str(path), chunk.first_line, chunk.lines
            if progress is not None:
                done += chunk.end - chunk.start
                lines += len(chunk.lines)
                progress("merge", lines, done, total)


def _cursor_chunks(
    index: FileIndex,
    sources: Sequence[Path],
    ends: dict[str, Cursor],
    progress: Progress | None = None,
) -> Iterator[SourceLines]:
    """The source lines not read yet: from each source's saved cursor when the source still
    holds what was read there, else from the start (a rewritten or replaced source)."""
    for path in sources:
        key = os.path.realpath(path)
        cursor = index.cursor(key)
        if cursor is None or not cursor_valid(path, cursor):
            cursor = Cursor(0, 0, 1, b"")
        offset, line = cursor.offset, cursor.line
        total = max(0, file_size(path) - offset)
        for chunk in read_chunks(path, offset, line):
            index.bytes_read += chunk.end - chunk.start
            yield str(path), chunk.first_line, chunk.lines
            offset, line = chunk.end, chunk.first_line + len(chunk.lines)
            if progress is not None:
                progress("merge", line - cursor.line, offset - cursor.offset, total)
        ends[key] = cursor_at(path, offset, line)


def merge_indexed(
    dest: Path,
    sources: Sequence[Path],
    state_dir: StateDir,
    *,
    now: int | None = None,
    max_future: int = DEFAULT_MAX_FUTURE,
    dry_run: bool = False,
    lock_timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
) -> MergeResult:
    """`merge_files` with a persistent index of `dest` in `state_dir` (`Indexed`): the
    destination is read only where it grew since the last merge, each source only past
    where it was read last time, and the records a merge must be judged against are read
    with `pread`. A merge of one new record into a million-record file costs milliseconds.

    Sources with over `PARTITION_BYTES` not read yet go in partitions by id, each judged
    against the index as it was before the merge, the index brought up to date once at the
    end, in bulk; smaller ones as `merge_chunks` merges them.

    A cold index (never built, stale, or to take in more than it holds and `COLD_BYTES`:
    a merge into an empty file) is not brought up to date first: the merge streams the
    destination as `merge_files` does (`Appending`), so that it costs what `--no-index`
    costs, and a second process builds the index of the file as the merge left it, with
    the sources' cursors and the held records (`indexbuild.start_build`), after this call
    returns; whoever opens the index next waits for it. The result is a warm merge's.
    """
    recover_all([dest, *sources])  # lines a killed compaction left aside (rule 16)
    at = now_us() if now is None else now
    with FileIndex(dest, state_dir.merge_index(dest)) as index:
        with file_lock(dest, lock_timeout):
            behind = index.behind()  # a stale index is reset here, its cursors with it
            ends: dict[str, Cursor] = {}
            chunks = _cursor_chunks(index, sources, ends, progress)
            unread = _unread_bytes(index, sources)
            by_id = not dry_run and unread > batching.PARTITION_BYTES
            # Cold: what the index must take in (the file's unindexed bytes, and at most
            # the sources' unread ones appended) outweighs what it holds.
            if not dry_run and behind + unread > max(COLD_BYTES, index.offset):
                return _merge_cold(index, chunks, ends, at, max_future, unread, progress, by_id)
            result = _merge_locked(
                index, chunks, at, max_future, dry_run, unread, progress, by_id=by_id
            )
        if not dry_run:
            for key, cursor in ends.items():
                index.set_cursor(key, cursor)
    return result


COLD_BYTES = 16 * 1024 * 1024
"""An index to take in more than this (and than it holds) is cold (`merge_indexed`); a
smaller one is brought up to date before the merge, in less time than starting a second
process would take."""


def _merge_cold(
    index: FileIndex,
    chunks: Iterable[SourceLines],
    ends: dict[str, Cursor],
    at: int,
    max_future: int,
    total_bytes: int,
    progress: Progress | None,
    by_id: bool,
) -> MergeResult:
    """`merge_indexed`'s merge into the file of a cold `index`, under the file's lock:
    streamed as `merge_files` streams it (the held records offered again); then the
    builder is started (`ends`: the sources' cursors, filled as `chunks` are read)."""
    dest = Appending(index.path, at=at, max_future=max_future)
    held: list[SourceLines] = [(s, n, [raw]) for s, n, raw in index.held()]
    result = _merge(dest, itertools.chain(held, chunks), total_bytes, progress, by_id=by_id)
    if index.path.exists():
        start_build(index, file_size(index.path), ends, dest.held)
    else:  # nothing to index (nothing was appended to a missing file): no second process
        index.set_held(dest.held)
        for key, cursor in ends.items():
            index.set_cursor(key, cursor)
    return result


def _unread_bytes(index: FileIndex, sources: Sequence[Path]) -> int:
    """How many bytes of `sources` a merge into `index`'s file has not read yet."""
    unread = 0
    for path in sources:
        cursor = index.cursor(os.path.realpath(path))
        valid = cursor is not None and cursor_valid(path, cursor)
        unread += max(0, file_size(path) - (cursor.offset if cursor is not None and valid else 0))
    return unread


def merge_chunks(
    index: FileIndex,
    chunks: Iterable[SourceLines],
    *,
    now: int | None = None,
    max_future: int = DEFAULT_MAX_FUTURE,
    dry_run: bool = False,
    lock_timeout: float = DEFAULT_TIMEOUT,
) -> MergeResult:
    """Merge lines (chunks: source name, first line number, lines) into the file of
    `index`, under the file's lock, judging them against the index (rule 14).

    Large merges go in batches of about `BATCH_LINES` incoming lines: each is judged
    against the file as the batches before it left it, so a record that a later batch beats
    may already be in (the view is the same; merging again appends nothing). A dry run is
    one batch, so that it lists exactly what a single merge would append.

    Records held for being dated too far ahead are kept in the index and offered again at
    every merge until their time comes.
    """
    return _merge_indexed(
        index, chunks, now, max_future, dry_run, lock_timeout, 0, None, by_id=False
    )


def _merge_indexed(
    index: FileIndex,
    chunks: Iterable[SourceLines],
    now: int | None,
    max_future: int,
    dry_run: bool,
    lock_timeout: float,
    total_bytes: int,
    progress: Progress | None,
    *,
    by_id: bool,
) -> MergeResult:
    """`_merge` into the file of `index`, under its lock, the held records offered again."""
    at = now_us() if now is None else now
    with file_lock(index.path, lock_timeout):
        return _merge_locked(
            index, chunks, at, max_future, dry_run, total_bytes, progress, by_id=by_id
        )


def _merge_locked(
    index: FileIndex,
    chunks: Iterable[SourceLines],
    at: int,
    max_future: int,
    dry_run: bool,
    total_bytes: int,
    progress: Progress | None,
    *,
    by_id: bool,
) -> MergeResult:
    """`_merge_indexed` once the caller holds the file's lock."""
    index.refresh()
    dest = Indexed(index, at=at, max_future=max_future, dry_run=dry_run)
    lines = itertools.chain(dest.held_chunks(), chunks)
    return _merge(dest, lines, total_bytes, progress, by_id=by_id)
