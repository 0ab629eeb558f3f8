"""Compaction of a large file in partitions by id, so that memory is that of one partition,
not of the file (issue 14). The plan is the one `memsync.core.compaction.plan_compaction`
makes of the whole file, and the output the same bytes.

Every rule of compaction but one looks at the records of one id at a time (rule 15, cases
1 to 5 and 7 of `memsync.core.compaction`'s docstring), so the lines are first split by id
into anonymous temporary files (`Spill`), each planned alone. The exception is the choice
of superseding records (case 6): it compares records of many ids that supersede one
target. A candidate's rank depends on its own id's records only, so the ids that supersede
something (about 1% of a real file's, found in pass 1) are read again and planned alone
(`plan_part`) to rank every candidate; the picks are made across all of them
(`pick_superseders`), and each partition is then planned once, with the picks.
Each partition writes its kept lines, sorted, with a sort key in front; a heap merge of
those runs gives the file's kept lines in (`created_at`, `id`, line) order, as one sort
would.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from memsync.core.compaction import (
    Candidate,
    CompactionPlan,
    Rejected,
    Survey,
    pick_superseders,
    plan_part,
)
from memsync.core.lines import Blank, Header, Invalid, classify
from memsync.core.records import Record
from memsync.core.scan import lines_naming, quick_id, superseding_lines
from memsync.local.progress import Progress
from memsync.local.reading import no_gc
from memsync.local.spill import Spill
from memsync.local.storage import read_chunks_fd

__all__ = [
    "PARTITION_BYTES",
    "Partitioned",
    "PartitionedPlan",
    "Spill",
    "partition_file",
    "plan_partitions",
]

PARTITION_BYTES = 32 * 1024 * 1024
"""A file larger than this is compacted in partitions of about this many bytes each
(a partition's records, parsed, take about twice to three times its size)."""

_TS_SHIFT = 1 << 62  # makes every instant (year 1 onwards) a positive 20-digit number


def _numbered(lines: list[bytes]) -> list[tuple[int, bytes]]:
    out = []
    for line in lines:
        n, _, raw = line.partition(b" ")
        out.append((int(n), raw))
    return out


def _sort_key(rec: Record) -> bytes:
    """Bytes that sort as (`ts`, `id`, line) does: a fixed-width instant, the id in UTF-8
    (byte order is code point order) ended by NUL (never in a valid id: rule 4)."""
    return b"%020d" % (rec.ts + _TS_SHIFT) + rec.id.encode("utf-8", "surrogatepass") + b"\0"


@dataclass
class _PlannedPartition:
    """What one partition's plan gave: its counts, bad lines and sorted run."""

    records: int = 0
    kept: int = 0
    kept_bytes: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    pinned: set[str] = field(default_factory=set)
    bad: list[Rejected] = field(default_factory=list)
    run: Spill | None = None


@dataclass
class PartitionedPlan:
    """The plan of a partitioned compaction: what `CompactionPlan` says of a whole file
    (counts, pins, the kept lines in order), with the kept lines in temporary files."""

    records: int
    kept: int
    kept_bytes: int
    dropped: dict[str, int]
    pinned: set[str]
    bad: list[Rejected]
    runs: list[Spill]

    def data(self) -> Iterator[bytes]:
        """The kept lines, each with its "\\n", in batches (as `CompactionPlan.data`)."""
        merged = heapq.merge(*(run.lines() for run in self.runs))
        batch: list[bytes] = []
        for line in merged:
            batch.append(line[line.index(b"\0", 20) + 1 :])
            if len(batch) == 8192:
                batch.append(b"")
                yield b"\n".join(batch)
                batch = []
        if batch:
            batch.append(b"")
            yield b"\n".join(batch)

    def close(self) -> None:
        for run in self.runs:
            run.close()


@dataclass
class Partitioned:
    """Pass 1 of a partitioned compaction: the lines split by id, with what was learned of
    the lines that name no id (headers, blank and bad lines) and of the file."""

    partitions: list[Spill]
    counts: dict[str, int]
    bad: list[Rejected]
    lines: int
    end: int
    digest: bytes
    first_is_header: bool
    fd: int
    """The file, still open (read again by `_candidates`)."""
    superseder_ids: set[str]
    """The ids of the records that supersede another id (rule 10)."""

    def close(self) -> None:
        for partition in self.partitions:
            partition.close()


def partition_file(
    fd: int,
    name: str,
    folder: Path,
    count: int,
    progress: Progress | None = None,
    what: str = "compact: reading",
) -> Partitioned:
    """Read the file once, splitting its lines by id into `count` temporary files in
    `folder` (each line with its line number); headers, blank and bad lines that name no
    id are counted or kept aside here. Raises UnsupportedFormat (rule 2)."""
    partitions = [Spill(folder) for _ in range(count)]
    counts: dict[str, int] = {}
    bad: list[Rejected] = []
    hasher = xxhash.xxh3_128()
    lines = end = 0
    first_is_header = False
    superseders: set[str] = set()
    total = os.fstat(fd).st_size
    try:
        for chunk in read_chunks_fd(fd, keep_long=True):  # exact bytes, bad lines whole
            hasher.update(chunk.data)
            for raw in superseding_lines(chunk.data):
                sup = classify(raw)
                if type(sup) is Record and sup.supersedes is not None and not sup.deleted:
                    superseders.add(sup.id)
            for n, raw in enumerate(chunk.lines, chunk.first_line):
                rid = quick_id(raw)
                if rid is None:
                    parsed = classify(raw, source=name, line_no=n)
                    if n == 1:
                        first_is_header = type(parsed) is Header
                    if type(parsed) is Record:
                        rid = parsed.id
                    elif type(parsed) is Invalid:
                        bad.append(Rejected(n, raw, parsed.reason))
                        continue
                    else:
                        reason = "header" if type(parsed) is Header else "blank"
                        assert type(parsed) in (Header, Blank)
                        counts[reason] = counts.get(reason, 0) + 1
                        continue
                partitions[hash(rid) % count].add(b"%d " % n + raw)
            lines = chunk.first_line + len(chunk.lines) - 1
            end = chunk.end
            if progress is not None:
                progress(what, lines, end, total)
    except BaseException:
        for partition in partitions:
            partition.close()
        raise
    return Partitioned(
        partitions, counts, bad, lines, end, hasher.digest(), first_is_header, fd, superseders
    )


def _plan_one(
    part: Spill,
    name: str,
    folder: Path,
    now: int,
    horizon: int,
    acknowledged: Callable[[Survey], frozenset[bytes] | None],
    picks: list[Candidate] | None,
) -> tuple[_PlannedPartition, list[Candidate]]:
    """Plan one partition: fold its records, plan (with the `picks` made across all
    partitions, or, the first time, none), count and collect its dropped and bad lines, write its run."""
    survey = Survey()
    for lines in part.chunks():
        for n, raw in _numbered(lines):
            parsed = classify(raw, source=name, line_no=n)
            if type(parsed) is Record:
                survey.add(parsed)
    planned = plan_part(survey, now=now, horizon=horizon, acknowledged=acknowledged(survey))
    plan: CompactionPlan = planned.finish(picks or ())
    out = _PlannedPartition(records=survey.index.records, kept=len(plan.keep))
    for lines in part.chunks():
        out.bad += plan.account_numbered(_numbered(lines), source=name)
    out.dropped = plan.dropped
    out.pinned = plan.pinned
    run = Spill(folder)
    for rec in plan.keep:
        run.add(_sort_key(rec) + rec.raw)
        out.kept_bytes += len(rec.raw) + 1
    run.flush()
    out.run = run
    return out, planned.candidates


def _candidates(
    partitioned: Partitioned,
    name: str,
    now: int,
    horizon: int,
    acknowledged: Callable[[Survey], frozenset[bytes] | None],
) -> list[Candidate]:
    """Every superseding record of the file, ranked (rule 15, case 6): a rank depends on
    its own id's records only, so the records of the ids that supersede something (about
    1% of a real file's, found in pass 1) are read again from the file and planned alone.
    Then each partition is planned once, with the picks."""
    ids = partitioned.superseder_ids
    survey = Survey()
    if ids:
        for chunk in read_chunks_fd(partitioned.fd, stop=partitioned.end):
            for raw in lines_naming(chunk.lines, chunk.data, ids):
                parsed = classify(raw, source=name)
                if type(parsed) is Record and parsed.id in ids:
                    survey.add(parsed)
    return plan_part(survey, now=now, horizon=horizon, acknowledged=acknowledged(survey)).candidates


def plan_partitions(
    partitioned: Partitioned,
    name: str,
    folder: Path,
    *,
    now: int,
    horizon: int,
    acknowledged: Callable[[Survey], frozenset[bytes] | None],
    progress: Progress | None = None,
) -> PartitionedPlan:
    """Pick the superseding records across partitions, plan every partition with those
    picks, and put the results together."""
    results: list[_PlannedPartition] = []
    try:
        with no_gc():
            picks = pick_superseders(_candidates(partitioned, name, now, horizon, acknowledged))
            for i, part in enumerate(partitioned.partitions):
                done, _ = _plan_one(part, name, folder, now, horizon, acknowledged, picks)
                results.append(done)
                if progress is not None:
                    progress("compact: planning", i + 1, i + 1, len(partitioned.partitions))
    except BaseException:
        for done in results:
            if done.run is not None:
                done.run.close()
        raise
    dropped = dict(partitioned.counts)
    bad = list(partitioned.bad)
    pinned: set[str] = set()
    for done in results:
        for reason, n in done.dropped.items():
            dropped[reason] = dropped.get(reason, 0) + n
        bad += done.bad
        pinned |= done.pinned
    bad.sort(key=lambda r: r.line)
    return PartitionedPlan(
        records=sum(r.records for r in results),
        kept=sum(r.kept for r in results),
        kept_bytes=sum(r.kept_bytes for r in results),
        dropped=dropped,
        pinned=pinned,
        bad=bad,
        runs=[r.run for r in results if r.run is not None],
    )
