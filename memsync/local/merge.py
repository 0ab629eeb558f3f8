"""Merging memory files: read the destination's state, plan (pure, `memsync.core.merge`),
and apply under the destination's lock (`memsync.local.handoff` merges a filtered slice).

The destination's existing bytes never change: a merge only appends whole lines, copied
byte for byte from the sources (SEMANTICS rules 5 and 13).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsync.core.merge import (
    DEFAULT_MAX_FUTURE,
    Known,
    MergePlan,
    MergeSteps,
    Relevant,
    Withheld,
    merge_steps,
)
from memsync.core.records import Record
from memsync.core.scan import line_digest, lines_naming, relevant_index, superseding_lines
from memsync.core.timestamps import format_ts
from memsync.core.view import Index
from memsync.errors import FileReplaced
from memsync.local import merge_parts
from memsync.local.drain import recover_all
from memsync.local.fileindex import Cursor, FileIndex, cursor_at, cursor_valid
from memsync.local.fresh import header_line, now_us
from memsync.local.lock import DEFAULT_TIMEOUT, file_lock
from memsync.local.progress import Progress
from memsync.local.reading import no_gc
from memsync.local.statedir import StateDir
from memsync.local.storage import (
    Chunk,
    append_bytes,
    errors_named,
    open_for_reading,
    private_dirs,
    read_chunks,
    read_chunks_fd,
)

__all__ = [
    "MergeResult",
    "PendingMerge",
    "apply_merge",
    "merge_chunks",
    "merge_files",
    "merge_indexed",
    "plan_file_merge",
    "plan_records_merge",
    "read_digests",
    "withheld_json",
]


def read_digests(path: Path) -> tuple[set[int], int, int]:
    """The digests of every complete line of `path`, the offset read to, and the inode (a
    missing file: nothing, 0, 0). The first pass of a file merge: no line is parsed."""
    digests: set[int] = set()
    try:
        ino = os.stat(path).st_ino
    except FileNotFoundError:
        return digests, 0, 0
    end = 0
    with no_gc():
        for chunk in read_chunks(path):
            digests.update(map(line_digest, chunk.lines))
            end = chunk.end
    return digests, end, ino


def _drive(
    steps: MergeSteps,
    known: list[Callable[[list[int]], Collection[int]]],
    read: Callable[[Relevant], Index],
) -> MergePlan:
    """Run the core's merge sequence: `known[0]` answers which digests the destination
    holds; the box is emptied once the lines are collected, so that a file's digests (which
    can be large) are freed before its records are read; `read` reads those."""
    ask = next(steps)
    try:
        while True:
            if isinstance(ask, Known):
                ask = steps.send(known[0](ask.digests))
            else:
                known.clear()
                ask = steps.send(read(ask))
    except StopIteration as done:
        plan: MergePlan = done.value
        return plan


def _file_reader(path: Path, own: _OwnAppends | None = None) -> Callable[[Relevant], Index]:
    """Answers `merge_steps`' asks by streaming `path`: the second pass of a file merge
    indexes the records that bear on what is new; a third, rare one adds the supersession
    targets to that index, from the lines that may supersede (`superseding_lines`), kept
    from the second pass when they are few (else read again). With `own`, the ranges this
    merge's earlier partitions appended are not read: their superseding lines are `own`'s.
    """
    index = Index()
    kept: list[list[bytes] | None] = [None]
    skip = own.ranges_in(path) if own is not None else []
    extra = own.superseding if own is not None and skip else []

    def read(need: Relevant) -> Index:
        if not need.incoming.candidates or not path.exists():
            return index
        if need.targets:
            sup_lines = kept[0]
            if sup_lines is None:
                chunks = (superseding_lines(c.data) for c in _chunks_outside(path, skip))
                sup_lines = list(itertools.chain.from_iterable(chunks))
            relevant_index(
                itertools.chain(sup_lines, extra),
                set(),
                need.targets,
                into=index,
                source=str(path),
            )
            return index
        sups: list[bytes] | None = []

        ids = need.incoming.ids

        def lines() -> Iterator[list[bytes]]:
            nonlocal sups
            for chunk in _chunks_outside(path, skip):
                yield lines_naming(chunk.lines, chunk.data, ids)
                if sups is not None:
                    sups += superseding_lines(chunk.data)
                    if len(sups) > _KEEP_SUPERSEDING:
                        sups = None  # a file of superseders: read them again if asked

        # One call over every chunk: its set of the ids' bytes is made once.
        relevant_index(itertools.chain.from_iterable(lines()), ids, into=index, source=str(path))
        kept[0] = sups
        return index

    return read


def _chunks_outside(path: Path, skip: list[tuple[int, int]]) -> Iterator[Chunk]:
    """The chunks of `path` outside the byte ranges `skip` (sorted, each whole lines)."""
    if not skip:
        yield from read_chunks(path)
        return
    fd = open_for_reading(path)
    try:
        with errors_named(path):
            pos = 0
            for start, end in skip:
                if start > pos:
                    yield from read_chunks_fd(fd, pos, stop=start)
                pos = end
            yield from read_chunks_fd(fd, pos)
    finally:
        os.close(fd)


@dataclass
class _OwnAppends:
    """Where a merge in partitions by id (`merge_parts`) appended so far, in one inode of
    the destination, and the lines it appended that supersede an id.

    A partition's ids have no line in those ranges, so its plan need not read them; the
    lines there that supersede something are all the plan needs of them (rule 10), and
    are few. Valid while the destination is the same inode, at least as long: a compaction
    that replaced it moved every line, and the ranges are dropped.
    """

    ino: int = 0
    ranges: list[tuple[int, int]] = field(default_factory=list)
    superseding: list[bytes] = field(default_factory=list)

    def ranges_in(self, path: Path) -> list[tuple[int, int]]:
        """The ranges to skip in `path` as it is now: none if it was replaced."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        if not self.ranges or st is None:
            return []
        if st.st_ino != self.ino or st.st_size < self.ranges[-1][1]:
            self.ranges, self.superseding = [], []
            return []
        return self.ranges

    def note(self, pending: PendingMerge) -> None:
        """Remember what an applied plan appended (`PendingMerge.appended`)."""
        if pending.appended is None:
            return
        ino, start, end = pending.appended
        if ino != self.ino:
            self.ino, self.ranges, self.superseding = ino, [], []
        self.ranges.append((start, end))
        self.superseding += merge_parts.superseding_appended(pending.plan)


_KEEP_SUPERSEDING = 50_000
"""At most this many lines that may supersede are kept between the two asks of a merge."""


def _plan(
    dest: Path, lines: Iterable[tuple[str, int, list[bytes]]], now: int | None, max_future: int
) -> PendingMerge:
    digests, end, ino = read_digests(dest)
    at = now_us() if now is None else now
    steps = merge_steps(lines, at, max_future)
    known: list[Callable[[list[int]], Collection[int]]] = [digests.intersection]
    del digests  # the driver drops them once the lines are collected
    with no_gc():
        plan = _drive(steps, known, _file_reader(dest))
    return PendingMerge(dest, plan, end, ino)


def _source_chunks(
    paths: Sequence[Path], progress: Progress | None = None, total: int = 0
) -> Iterator[tuple[str, int, list[bytes]]]:
    done = lines = 0
    for path in paths:
        for chunk in read_chunks(path):
            yield str(path), chunk.first_line, chunk.lines
            if progress is not None:
                done += chunk.end - chunk.start
                lines += len(chunk.lines)
                progress("merge", lines, done, total)


@dataclass
class PendingMerge:
    """A merge planned against a destination as it was at byte `dest_end` of inode
    `dest_ino`; `apply_merge` checks that before it appends."""

    dest: Path
    plan: MergePlan
    dest_end: int
    dest_ino: int
    appended: tuple[int, int, int] | None = None
    """Set by `apply_merge`: (inode, start, end) of the bytes it appended."""


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
    return _plan(dest, _source_chunks(sources), now, max_future)


def plan_records_merge(
    dest: Path,
    records: Iterable[tuple[str, int, list[bytes]]],
    *,
    now: int | None = None,
    max_future: int = DEFAULT_MAX_FUTURE,
) -> PendingMerge:
    """Plan merging given lines (chunks: source name, first line number, lines)."""
    return _plan(dest, records, now, max_future)


def apply_merge(pending: PendingMerge, *, lock_timeout: float = DEFAULT_TIMEOUT) -> MergeResult:
    """Append a planned merge to its destination, under the destination's lock.

    Lines that reached the destination after the plan was made are read first: a planned
    record already among them is not appended again. If the file was replaced meanwhile
    (compaction: another inode, or shorter), the merge is planned again.
    """
    dest = pending.dest
    with file_lock(dest, lock_timeout):
        pending = _refresh(pending)
        plan = pending.plan
        data = plan.data()
        if data:
            private_dirs(dest.parent)
            end = append_bytes(dest, data, header=header_line(now_us()))
            pending.appended = (os.stat(dest).st_ino, end - len(data), end)  # under the lock
    return _result(pending, dry_run=False)


def _refresh(pending: PendingMerge) -> PendingMerge:
    dest = pending.dest
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        st = None
    if st is None:
        if pending.dest_end == 0:
            return pending
        raise FileNotFoundError(f"{dest}: removed while a merge was planned")
    if pending.dest_end and (st.st_ino != pending.dest_ino or st.st_size < pending.dest_end):
        raise _Replanned(dest)
    if st.st_size == pending.dest_end or not pending.plan.append:
        return pending
    arrived: set[int] = set()
    for chunk in read_chunks(dest, pending.dest_end):
        arrived.update(line_digest(raw) for raw in chunk.lines)
    plan = pending.plan
    kept = [r for r in plan.append if line_digest(r.raw) not in arrived]
    plan.duplicates += len(plan.append) - len(kept)
    plan.append = kept
    plan.repeated = [r for r in plan.repeated if line_digest(r.raw) not in arrived]
    return pending


class _Replanned(Exception):
    """The destination was replaced since the plan was made."""


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

    Sources over `merge_parts.PART_BYTES` together go in partitions by id, each planned
    against the file as the partitions before it left it (but not reading what they
    appended: `_OwnAppends`) and appended under the lock, so that memory is that of one
    partition (plus a digest per line of `dest`), not of the sources (issue 14). Smaller
    ones go in batches of `BATCH_LINES` lines. Either way a merge reaches the view one
    plan of everything would. `records` (what would be appended) is listed for a dry
    run, which is one plan, as in `merge_chunks`. Each file first recovers what a killed
    compaction left aside (rule 16).
    """
    recover_all([dest, *sources])
    total_bytes = sum(_size(p) for p in sources)
    if not dry_run and total_bytes > merge_parts.PART_BYTES:
        return _merge_parted(dest, sources, total_bytes, now, max_future, lock_timeout, progress)
    chunks = _source_chunks(sources, progress, total_bytes)
    if dry_run:
        digests = _DestDigests(dest)
        pending = _plan_batch(digests, dest, list(chunks), now, max_future)
        return _result(pending, dry_run=True)
    total = MergeResult(dest=str(dest))
    digests = _DestDigests(dest)
    for batch in _batches(chunks, BATCH_LINES):
        part = _merge_batch(digests, dest, batch, now, max_future, lock_timeout)
        _add_up(total, part, keep_records=False)
        del batch, part  # freed before the next batch is read, not while
    return total


_PARTITIONS = "merge: partitions"
"""The progress of a merge in partitions by id, once the lines are split."""


def _merge_parted(
    dest: Path,
    sources: Sequence[Path],
    total_bytes: int,
    now: int | None,
    max_future: int,
    lock_timeout: float,
    progress: Progress | None,
) -> MergeResult:
    """`merge_files` of large sources: in partitions by id (`merge_parts`), each planned
    without reading what the partitions before it appended."""
    private_dirs(dest.parent)  # the partitions' temporary files go beside `dest`
    chunks = _source_chunks(sources, progress, total_bytes)
    digests = _DestDigests(dest)
    digests.refresh()
    known = digests.digests.intersection
    parts = merge_parts.split_chunks(chunks, dest.parent, total_bytes, known)
    try:
        total = MergeResult(dest=str(dest), duplicates=parts.known)
        own = _OwnAppends()
        done = lines = 0
        for partition in parts.batches():
            part = _merge_batch(
                digests, dest, partition.chunks, now, max_future, lock_timeout, own, partition
            )
            _add_up(total, part, keep_records=False)
            if progress is not None:
                lines += len(partition)
                done += partition.size()
                progress(_PARTITIONS, lines, done, total_bytes)
            del partition, part  # freed before the next partition is read, not while
        return total
    finally:
        parts.close()


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _merge_batch(
    digests: _DestDigests,
    dest: Path,
    batch: list[tuple[str, int, list[bytes]]],
    now: int | None,
    max_future: int,
    lock_timeout: float,
    own: _OwnAppends | None = None,
    partition: merge_parts.Partition | None = None,
) -> MergeResult:
    for _attempt in range(3):
        pending = _plan_batch(digests, dest, batch, now, max_future, own)
        if partition is not None:
            partition.renumber(pending.plan)
        try:
            result = apply_merge(pending, lock_timeout=lock_timeout)
        except _Replanned:
            continue  # compacted between plan and apply: plan again against the new file
        if own is not None:
            own.note(pending)
        return result
    raise FileReplaced(str(dest))


def withheld_json(w: Withheld) -> dict[str, Any]:
    """A withheld record as reports and the status file give it: where, which id, and
    what it looks like (never the value)."""
    return {"file": w.source, "line": w.line, "id": w.id[:80], "looks_like": list(w.kinds)}


class _DestDigests:
    """The digests of the destination's complete lines, kept between the batches of one
    merge: each refresh reads only what the file gained since (what the batch before
    appended, and any writer's lines), or all of it again if the file was replaced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.digests: set[int] = set()
        self.end = 0
        self.ino = 0

    def refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.digests, self.end, self.ino = set(), 0, 0
            return
        if self.end and (st.st_ino != self.ino or st.st_size < self.end):
            self.digests, self.end = set(), 0
        self.ino = st.st_ino
        with no_gc():
            for chunk in read_chunks(self.path, self.end):
                self.digests.update(map(line_digest, chunk.lines))
                self.end = chunk.end


def _plan_batch(
    digests: _DestDigests,
    dest: Path,
    lines: Iterable[tuple[str, int, list[bytes]]],
    now: int | None,
    max_future: int,
    own: _OwnAppends | None = None,
) -> PendingMerge:
    digests.refresh()
    at = now_us() if now is None else now
    steps = merge_steps(lines, at, max_future)
    known: list[Callable[[list[int]], Collection[int]]] = [digests.digests.intersection]
    with no_gc():
        plan = _drive(steps, known, _file_reader(dest, own))
    return PendingMerge(dest, plan, digests.end, digests.ino)


def _result(pending: PendingMerge, *, dry_run: bool) -> MergeResult:
    plan = pending.plan
    return MergeResult(
        dest=str(pending.dest),
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


def _cursor_chunks(
    index: FileIndex,
    sources: Sequence[Path],
    ends: dict[str, Cursor],
    progress: Progress | None = None,
) -> Iterator[tuple[str, int, list[bytes]]]:
    """The source lines not read yet: from each source's saved cursor when the source still
    holds what was read there, else from the start (a rewritten or replaced source)."""
    for path in sources:
        key = os.path.realpath(path)
        cursor = index.cursor(key)
        if cursor is None or not cursor_valid(path, cursor):
            cursor = Cursor(0, 0, 1, b"")
        offset, line = cursor.offset, cursor.line
        total = max(0, _size(path) - offset)
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
    """`merge_files` with a persistent index of `dest` in `state_dir`: the destination is
    read only where it grew since the last merge, each source only past where it was read
    last time, and the records a merge must be judged against are read with `pread`. A
    merge of one new record into a million-record file costs milliseconds.
    """
    recover_all([dest, *sources])  # lines a killed compaction left aside (rule 16)
    with FileIndex(dest, state_dir.merge_index(dest)) as index:
        ends: dict[str, Cursor] = {}
        chunks = _cursor_chunks(index, sources, ends, progress)
        unread = _unread_bytes(index, sources)
        if not dry_run and unread > merge_parts.PART_BYTES:
            result = _merge_indexed_parted(
                index, chunks, unread, now, max_future, lock_timeout, progress
            )
        else:
            result = merge_chunks(
                index,
                chunks,
                now=now,
                max_future=max_future,
                dry_run=dry_run,
                lock_timeout=lock_timeout,
            )
        if not dry_run:
            for key, cursor in ends.items():
                index.set_cursor(key, cursor)
    return result


def _unread_bytes(index: FileIndex, sources: Sequence[Path]) -> int:
    """How many bytes of `sources` a merge into `index`'s file has not read yet."""
    unread = 0
    for path in sources:
        cursor = index.cursor(os.path.realpath(path))
        valid = cursor is not None and cursor_valid(path, cursor)
        unread += max(0, _size(path) - (cursor.offset if cursor is not None and valid else 0))
    return unread


def _merge_indexed_parted(
    index: FileIndex,
    chunks: Iterable[tuple[str, int, list[bytes]]],
    total_bytes: int,
    at: int | None,
    max_future: int,
    lock_timeout: float,
    progress: Progress | None,
) -> MergeResult:
    """`merge_chunks` of many lines: split by id (`merge_parts`), each partition judged
    against the index as it was before the merge (a partition's ids have no line among
    those the partitions before it appended: only their superseding lines count, rule 10,
    and those are kept), the index brought up to date once at the end, in bulk."""
    dest = index.path
    now = now_us() if at is None else at
    total = MergeResult(dest=str(dest))
    with file_lock(dest, lock_timeout):
        index.refresh()
        held_before = [(s, n, [raw]) for s, n, raw in index.held()]
        private_dirs(dest.parent)  # the partitions' temporary files go beside `dest`
        lines_in = itertools.chain(held_before, chunks)
        parts = merge_parts.split_chunks(lines_in, dest.parent, total_bytes, index.intersection)
        total.duplicates = parts.known
        try:
            held: list[tuple[str, int, bytes]] = []
            superseding: list[bytes] = []
            done = lines = 0

            def relevant(need: Relevant) -> Index:
                found = index.relevant(need.incoming.ids, need.targets)
                if need.targets and superseding:
                    relevant_index(superseding, set(), need.targets, into=found, source=str(dest))
                return found

            for partition in parts.batches():
                with no_gc():
                    steps = merge_steps(partition.chunks, now, max_future)
                    plan = _drive(steps, [index.intersection], relevant)
                partition.renumber(plan)
                _add_up(
                    total,
                    _result(PendingMerge(dest, plan, 0, 0), dry_run=False),
                    keep_records=False,
                )
                held += [(h.source, h.line, h.record.raw) for h in plan.held]
                data = plan.data()
                if data:
                    append_bytes(dest, data, header=header_line(now))
                superseding += merge_parts.superseding_appended(plan)
                if progress is not None:
                    lines += len(partition)
                    done += partition.size()
                    progress(_PARTITIONS, lines, done, total_bytes)
                del partition, plan
            index.refresh()  # once, for every partition's lines
            index.set_held(held)
        finally:
            parts.close()
    return total


BATCH_LINES = 50_000
"""A merge of many new lines (a first sync) is planned and appended in batches of about
this many incoming lines, so that its memory stays that of one batch (a parsed record per
new line) rather than of the whole source."""


def merge_chunks(
    index: FileIndex,
    chunks: Iterable[tuple[str, int, list[bytes]]],
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
    dest = index.path
    at = now_us() if now is None else now
    total = MergeResult(dest=str(dest), dry_run=dry_run)
    with file_lock(dest, lock_timeout):
        index.refresh()
        held_before = [(s, n, [raw]) for s, n, raw in index.held()]
        source = itertools.chain(held_before, chunks)
        held: list[tuple[str, int, bytes]] = []
        for batch in _batches(source, None if dry_run else BATCH_LINES):
            with no_gc():
                plan = _drive(
                    merge_steps(batch, at, max_future),
                    [index.intersection],
                    lambda need: index.relevant(need.incoming.ids, need.targets),
                )
            part = _result(PendingMerge(dest, plan, index.offset, 0), dry_run=dry_run)
            _add_up(total, part, keep_records=dry_run)
            held += [(h.source, h.line, h.record.raw) for h in plan.held]
            if dry_run:
                continue
            data = plan.data()
            if data:
                private_dirs(dest.parent)
                append_bytes(dest, data, header=header_line(at))
                index.refresh()
        if not dry_run:
            index.set_held(held)
    return total


def _batches(
    chunks: Iterable[tuple[str, int, list[bytes]]], limit: int | None
) -> Iterator[list[tuple[str, int, list[bytes]]]]:
    """Group the lines of chunks into batches of at most `limit` lines (all of them in one
    batch when `limit` is None), splitting a chunk where a batch fills up."""
    if limit is None:
        yield list(chunks)
        return
    batch: list[tuple[str, int, list[bytes]]] = []
    room = limit
    for name, first, lines in chunks:
        start = 0
        while start < len(lines):
            part = lines[start : start + room]
            batch.append((name, first + start, part))
            start += len(part)
            room -= len(part)
            if room == 0:
                yield batch
                batch, room = [], limit
    if batch:
        yield batch


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
