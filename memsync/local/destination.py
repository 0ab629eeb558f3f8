"""What a merge knows of its destination, and how it appends there: the two strategies the
one merge driver (`memsync.local.merge.merge_batches`) takes.

Each answers the asks of the core's merge sequence (`merge_steps`: which of these digests
does the file hold; which of its records bear on these ids) for one batch at a time, and
appends what the plan says, whole lines copied byte for byte (SEMANTICS rules 5 and 13):

- `Streamed` reads the file: the digests of its lines (kept between batches, each refresh
  reading only what the file gained), then its records that bear on what is new. A batch
  is planned outside the lock and appended under it (`append_planned`), after a check that
  the file was not replaced meanwhile; if it was (a compaction), the batch is planned again.
- `Indexed` asks the persistent index of the file (`FileIndex`), which reads the records
  with `pread`. The caller holds the file's lock for the whole merge; records held for
  being dated too far ahead are kept in the index for the next merge.

A partition by id (`Batch.by_id`, `memsync.local.batching`) has no id among the lines the
batches before it appended: of those lines, only the ones that supersede an id count (rule
10), and those are kept, so its plan need not read what the merge appended (`Streamed`
skips those ranges, `Indexed` leaves its index as it was until the end).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memsync.core.lines import SourceLines
from memsync.core.merge import Known, MergePlan, MergeSteps, Relevant, merge_steps
from memsync.core.scan import line_digest, lines_naming, relevant_index, superseding_lines
from memsync.core.view import Index
from memsync.errors import FileReplaced
from memsync.local.batching import Batch, superseding_appended
from memsync.local.fileindex import FileIndex
from memsync.local.fresh import header_line, now_us
from memsync.local.lock import file_lock
from memsync.local.reading import no_gc
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
    "Appending",
    "Destination",
    "Indexed",
    "KnownDigests",
    "PendingMerge",
    "Replanned",
    "Streamed",
    "append_planned",
    "drive_steps",
]

KnownDigests = Callable[[list[int]], Collection[int]]
"""Which of these line digests the destination holds (the answer to a `Known` ask)."""


class Destination(Protocol):
    """What the merge driver needs of a destination: a plan (and, but for a dry run, its
    lines appended) per batch, and the digests it holds (for `batching.by_id`)."""

    @property
    def path(self) -> Path: ...

    @property
    def dry_run(self) -> bool: ...

    def known(self) -> KnownDigests:
        """Which line digests the destination holds, as it is now."""
        ...

    def merge(self, batch: Batch) -> MergePlan:
        """Plan `batch` against the destination and, but for a dry run, append the plan;
        the plan's reports carry the sources' line numbers."""
        ...

    def finish(self) -> None:
        """After the last batch."""
        ...


def drive_steps(
    steps: MergeSteps, known: list[KnownDigests], read: Callable[[Relevant], Index]
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


class Replanned(Exception):
    """The destination was replaced since the plan was made."""


def append_planned(pending: PendingMerge, lock_timeout: float) -> None:
    """Append a planned merge to its destination, under the destination's lock.

    Lines that reached the destination after the plan was made are read first: a planned
    record already among them is not appended again. Raises `Replanned` if the file was
    replaced meanwhile (compaction: another inode, or shorter).
    """
    dest = pending.dest
    with file_lock(dest, lock_timeout):
        _refresh(pending)
        data = pending.plan.data()
        if data:
            private_dirs(dest.parent)
            end = append_bytes(dest, data, header=header_line(now_us()))
            pending.appended = (os.stat(dest).st_ino, end - len(data), end)  # under the lock


def _refresh(pending: PendingMerge) -> None:
    dest = pending.dest
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        st = None
    if st is None:
        if pending.dest_end == 0:
            return
        raise FileNotFoundError(f"{dest}: removed while a merge was planned")
    if pending.dest_end and (st.st_ino != pending.dest_ino or st.st_size < pending.dest_end):
        raise Replanned(dest)
    if st.st_size == pending.dest_end or not pending.plan.append:
        return
    arrived: set[int] = set()
    for chunk in read_chunks(dest, pending.dest_end):
        arrived.update(line_digest(raw) for raw in chunk.lines)
    plan = pending.plan
    kept = [r for r in plan.append if line_digest(r.raw) not in arrived]
    plan.duplicates += len(plan.append) - len(kept)
    plan.append = kept
    plan.repeated = [r for r in plan.repeated if line_digest(r.raw) not in arrived]


class Streamed:
    """A destination known by streaming the file (see the module's docstring).

    `once`: only one plan is made (a dry run, a handoff, `plan_file_merge`), so the
    digests are freed as soon as the lines are collected. `during` names the operation in
    the `FileReplaced` raised when the file is replaced three times over.
    """

    def __init__(
        self,
        path: Path,
        *,
        now: int | None,
        max_future: int,
        lock_timeout: float,
        dry_run: bool = False,
        once: bool = False,
        during: str = "merge",
    ) -> None:
        self.path = path
        self.dry_run = dry_run
        self._now = now
        self._max_future = max_future
        self._lock_timeout = lock_timeout
        self._once = once
        self._during = during
        self._digests = _Digests(path)
        self._own = _OwnAppends()

    def known(self) -> KnownDigests:
        self._digests.refresh()
        return self._digests.digests.intersection

    def plan(self, lines: Iterable[SourceLines], *, by_id: bool = False) -> PendingMerge:
        """Plan the merge of `lines` (chunks) into the file as it is now; `by_id`: a
        partition, whose plan skips what the partitions before it appended."""
        digests = self._digests
        digests.refresh()
        at = now_us() if self._now is None else self._now
        steps = merge_steps(lines, at, self._max_future)
        known: list[KnownDigests] = [digests.digests.intersection]
        if self._once:  # freed once the lines are collected (`drive_steps` empties `known`)
            self._digests = _Digests(self.path)
        with no_gc():
            reader = _file_reader(self.path, self._own if by_id else None)
            plan = drive_steps(steps, known, reader)
        return PendingMerge(self.path, plan, digests.end, digests.ino)

    def merge(self, batch: Batch) -> MergePlan:
        if self.dry_run:
            return self.plan(batch.chunks).plan
        for _attempt in range(3):
            pending = self.plan(batch.chunks, by_id=batch.by_id)
            batch.renumber(pending.plan)
            try:
                append_planned(pending, self._lock_timeout)
            except Replanned:
                continue  # compacted between plan and apply: plan again against the new file
            if batch.by_id:
                self._own.note(pending)
            return pending.plan
        raise FileReplaced(str(self.path), self._during)

    def finish(self) -> None:
        pass


class Appending(Streamed):
    """`Streamed`, for a caller that holds the file's lock for the whole merge (a cold
    indexed merge, `memsync.local.merge.merge_indexed`): each batch is planned against
    the file as it streams and appended at once, as `Indexed` appends it (one `at` for
    every batch and the header), never planned again. The records held for being dated
    too far ahead are collected in `held` (source, line number, raw) for the index."""

    def __init__(self, path: Path, *, at: int, max_future: int) -> None:
        super().__init__(path, now=at, max_future=max_future, lock_timeout=0)
        self._at = at
        self.held: list[tuple[str, int, bytes]] = []

    def merge(self, batch: Batch) -> MergePlan:
        pending = self.plan(batch.chunks, by_id=batch.by_id)
        batch.renumber(pending.plan)
        self.held += [(h.source, h.line, h.record.raw) for h in pending.plan.held]
        _refresh(pending)  # a lock-free writer's lines since the plan are not appended again
        data = pending.plan.data()
        if data:
            private_dirs(self.path.parent)
            end = append_bytes(self.path, data, header=header_line(self._at))
            pending.appended = (os.stat(self.path).st_ino, end - len(data), end)
            if batch.by_id:
                self._own.note(pending)
        return pending.plan


class _Digests:
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


def _file_reader(path: Path, own: _OwnAppends | None = None) -> Callable[[Relevant], Index]:
    """Answers `merge_steps`' asks by streaming `path`: the second pass of a file merge
    indexes the records that bear on what is new; a third, rare one (a superseding
    candidate found beaten: `supersession_targets`) adds the supersession targets to that
    index, from the lines that may supersede (`superseding_lines`), read again then
    rather than looked for in every merge's second pass (a fifth of a replica merge's
    time, issue 20). With `own`, the ranges this merge's earlier partitions appended are
    not read: their superseding lines are `own`'s.
    """
    index = Index()
    skip = own.ranges_in(path) if own is not None else []
    extra = own.superseding if own is not None and skip else []

    def read(need: Relevant) -> Index:
        if not need.incoming.candidates or not path.exists():
            return index
        if need.targets:
            chunks = (superseding_lines(c.data) for c in _chunks_outside(path, skip))
            relevant_index(
                itertools.chain(itertools.chain.from_iterable(chunks), extra),
                set(),
                need.targets,
                into=index,
                source=str(path),
            )
            return index
        ids = need.incoming.ids
        lines = (lines_naming(c.lines, c.data, ids) for c in _chunks_outside(path, skip))
        # One call over every chunk: its set of the ids' bytes is made once.
        relevant_index(itertools.chain.from_iterable(lines), ids, into=index, source=str(path))
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
    """Where a merge in partitions by id appended so far, in one inode of the destination,
    and the lines it appended that supersede an id.

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
        self.superseding += superseding_appended(pending.plan)


class Indexed:
    """A destination known by its persistent index (see the module's docstring). The caller
    holds the file's lock from before the index's `refresh` to after `finish`.

    `at` is the merge's `now`, one for every batch. Records held for being dated too far
    ahead (`held_chunks`, offered again with the new lines) are put back in the index by
    `finish`, with those this merge holds.
    """

    def __init__(self, index: FileIndex, *, at: int, max_future: int, dry_run: bool) -> None:
        self.path = index.path
        self.dry_run = dry_run
        self._index = index
        self._at = at
        self._max_future = max_future
        self._stale = False
        """Partitions were appended without bringing the index up to date."""
        self._held: list[tuple[str, int, bytes]] = []
        self._superseding: list[bytes] = []

    def held_chunks(self) -> list[SourceLines]:
        """The records an earlier merge held, as chunks to merge again."""
        return [(s, n, [raw]) for s, n, raw in self._index.held()]

    def known(self) -> KnownDigests:
        return self._index.intersection

    def _relevant(self, need: Relevant) -> Index:
        found = self._index.relevant(need.incoming.ids, need.targets)
        if need.targets and self._superseding:
            relevant_index(
                self._superseding, set(), need.targets, into=found, source=str(self.path)
            )
        return found

    def merge(self, batch: Batch) -> MergePlan:
        index = self._index
        with no_gc():
            steps = merge_steps(batch.chunks, self._at, self._max_future)
            plan = drive_steps(steps, [index.intersection], self._relevant)
        batch.renumber(plan)
        self._held += [(h.source, h.line, h.record.raw) for h in plan.held]
        if self.dry_run:
            return plan
        data = plan.data()
        if data:
            private_dirs(self.path.parent)
            append_bytes(self.path, data, header=header_line(self._at))
            if not batch.by_id:
                index.refresh()
        if batch.by_id:
            self._superseding += superseding_appended(plan)
            self._stale = True
        return plan

    def finish(self) -> None:
        if self.dry_run:
            return
        if self._stale:
            self._index.refresh()  # once, for every partition's lines
        self._index.set_held(self._held)
