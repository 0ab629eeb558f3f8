"""One compaction's passes over a memory file's bytes (SEMANTICS rules 15 and 16), as
`memsync.local.compaction.compact_file` runs them under the file's lock: pass 1 folds every
line (`survey`), the plan is made and pass 2 counts what goes and moves bad lines aside
(`plan_and_account`), then the kept lines replace the file and the old inode is drained
(`rewrite`). `Work` plans a file in memory; `PartitionedWork`, a large one, in partitions
by id (`memsync.local.compaction_partitions`), with the same result.

Apart from `compact_file` so that the sequence (when a compaction may start, what it
reports) reads on its own, and the byte-level steps, twice over, on their own.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import xxhash

from memsync.core.compaction import CompactionPlan, Rejected, Survey, plan_compaction
from memsync.core.lines import Header, classify
from memsync.core.records import Record
from memsync.errors import NotQuiet
from memsync.local import compaction_partitions
from memsync.local.acknowledgements import Acknowledgements, acknowledged_lines
from memsync.local.compaction_view import Written
from memsync.local.drain import drain, finish_drain, set_aside, unlink, write_rejected
from memsync.local.fresh import header_line
from memsync.local.progress import Progress
from memsync.local.reading import no_gc
from memsync.local.storage import fsync_dir, full_fsync, read_chunks_fd, write_all

__all__ = ["PartitionedWork", "Work", "work_for"]


class Work:
    """One compaction in progress on a file small enough to plan in memory: the file's old
    inode, read through `fd`. After the steps, `size`, `lines` and `end` say what was read,
    `stats()` what the plan keeps and drops, and `rejected`, `drained`, `generation` and
    `rewritten` what the rewrite did."""

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
        self.rejected = 0
        self.drained = 0
        self.generation: str | None = None
        self.rewritten = False
        self.written: Written | None = None
        """What `rewrite` wrote, for the new file's persistent view (issue 20)."""

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
        return len(plan.keep) == records

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
        self.rejected = len(bad)

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
                header = header_line(self.now, generation)
                write_all(fd, header)
                written = 0
                for block in self.kept_lines():
                    write_all(fd, block)
                    written += len(block)
                    if self.progress is not None:
                        self.progress("compact: writing", 0, written, self.size)
                full_fsync(fd)
                st = os.fstat(fd)
                new = Written(st.st_dev, st.st_ino, len(header), self.kept_records())
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
        self.generation = generation
        self.rewritten = True
        self.written = new
        drained = drain(self.fd, self.end, path, time.monotonic() + grace_seconds)
        self.drained = drained.lines
        self.rejected += finish_drain(path, aside, drained, self.now)

    def kept_lines(self) -> Iterable[bytes]:
        """The kept lines, in blocks, for the new file."""
        assert self.plan is not None
        return self.plan.data()

    def kept_records(self) -> Sequence[Record] | None:
        """The records `kept_lines` wrote, in order, when they are in memory."""
        assert self.plan is not None
        return self.plan.keep

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


def work_for(path: Path, fd: int, now: int, progress: Progress | None) -> Work:
    """The work of compacting the file open as `fd`: in partitions when it is larger than
    `compaction_partitions.PARTITION_BYTES`, so that memory stays that of one partition."""
    if os.fstat(fd).st_size > compaction_partitions.PARTITION_BYTES:
        return PartitionedWork(path, fd, now, progress)
    return Work(path, fd, now, progress)


class PartitionedWork(Work):
    """A compaction of a large file, planned in partitions by id (issue 14): the same
    steps and result as `Work`, in the memory of one partition."""

    def __init__(self, path: Path, fd: int, now: int, progress: Progress | None) -> None:
        super().__init__(path, fd, now, progress)
        self.partitioned: compaction_partitions.Partitioned | None = None
        self.partitioned_plan: compaction_partitions.PartitionedPlan | None = None

    def survey(self) -> None:
        """Pass 1: split the lines by id into temporary files."""
        count = max(1, -(-self.size // compaction_partitions.PARTITION_BYTES))
        with no_gc():
            partitioned = compaction_partitions.partition_file(
                self.fd, str(self.path), self.path.parent, count, self.progress
            )
        self.partitioned = partitioned
        self.lines, self.end, self.digest = partitioned.lines, partitioned.end, partitioned.digest
        self.first_is_header = partitioned.first_is_header
        self.size = max(self.size, self.end)

    def _planned(
        self, horizon: int, acknowledged: Acknowledgements
    ) -> compaction_partitions.PartitionedPlan:
        if self.partitioned_plan is None:
            assert self.partitioned is not None
            now = self.now

            def acked(survey: Survey) -> frozenset[bytes] | None:
                return acknowledged_lines(survey, now, horizon, acknowledged)

            self.partitioned_plan = compaction_partitions.plan_partitions(
                self.partitioned,
                str(self.path),
                self.path.parent,
                now=now,
                horizon=horizon,
                acknowledged=acked,
                progress=self.progress,
            )
            self.partitioned.close()
        return self.partitioned_plan

    def nothing_to_do(self, horizon: int, acknowledged: Acknowledgements) -> bool:
        plan = self._planned(horizon, acknowledged)
        if self.lines != plan.records + 1 or not self.first_is_header:
            return False
        return plan.kept == plan.records

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
        self.rejected = len(plan.bad)

    def kept_lines(self) -> Iterable[bytes]:
        assert self.partitioned_plan is not None
        return self.partitioned_plan.data()

    def kept_records(self) -> Sequence[Record] | None:
        return None  # in the partitions' temporary files, not in memory

    def stats(self) -> tuple[int, int, dict[str, int], int] | None:
        plan = self.partitioned_plan
        if plan is None:
            return None
        return plan.kept, plan.kept_bytes, plan.dropped, len(plan.pinned)

    def close(self) -> None:
        if self.partitioned is not None:
            self.partitioned.close()
        if self.partitioned_plan is not None:
            self.partitioned_plan.close()
