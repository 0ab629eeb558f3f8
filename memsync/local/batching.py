"""How a merge cuts its incoming lines into batches, each one plan (issue 14): in arrival
order (`in_order`), or by id (`by_id`: partitions).

A merge of many lines goes in batches, each planned against the destination as the batches
before it left it, so that memory is that of one batch rather than of the sources.

In arrival order, batches of about `BATCH_LINES` lines share ids, so each has to read the
whole, growing destination again (a merge into an empty file: quadratic), and rule 14
re-appends winners that a later batch beats: fine for the lines of a sync pass, which are
few. Past `PARTITION_BYTES`, the lines are split by id: batches cut by id share none, so a
batch's ids have no line among those earlier batches appended, its plan need not read
them (`memsync.local.destination`), and every version of an id is judged in one plan.
The partitions go to anonymous temporary files (`Spill`), each line with its source and
line number, so that bad lines and withheld records are reported where they are.
"""

from __future__ import annotations

import itertools
import operator
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from memsync.core.lines import BadLine, SourceLines, classify
from memsync.core.merge import Held, MergePlan, Withheld
from memsync.core.records import Record
from memsync.core.scan import line_digest, quick_id
from memsync.local.spill import Spill

__all__ = [
    "BATCH_LINES",
    "MAX_PARTITIONS",
    "PARTITION_BYTES",
    "Batch",
    "Partitions",
    "by_counts",
    "by_id",
    "in_order",
    "superseding_appended",
]

BATCH_LINES = 50_000
"""A merge of many new lines (a first sync) is planned and appended in batches of about
this many incoming lines, so that its memory stays that of one batch (a parsed record per
new line) rather than of the whole source."""

PARTITION_BYTES = 16 * 1024 * 1024
"""Sources larger than this together are merged in partitions by id of about this many
bytes (a partition's lines, parsed, take a few times their size)."""

MAX_PARTITIONS = 256
"""At most this many partitions (each an open temporary file): past 4 GiB of sources,
partitions grow instead."""


@dataclass
class Batch:
    """The lines one plan takes: chunks (source name, first line number, lines), what
    `merge_steps` takes. A partition's chunks are numbered from 0, one per source, with
    the line number in its source of each line in `numbers` (`renumber` puts those back
    in the plan's reports)."""

    chunks: list[SourceLines]
    numbers: dict[str, list[int]] | None = None
    by_id: bool = False
    """A partition: no id of its lines has a line among those the batches before it
    appended (they were cut by id)."""

    def __len__(self) -> int:
        return sum(len(lines) for _, _, lines in self.chunks)

    def size(self) -> int:
        """The lines' bytes, with their "\\n"."""
        return sum(len(raw) + 1 for _, _, lines in self.chunks for raw in lines)

    def renumber(self, plan: MergePlan) -> None:
        """Give the reports of `plan` (bad lines, held and withheld records) the line
        numbers of their sources."""
        at = self.numbers
        if at is None:
            return
        plan.bad = [BadLine(b.file, at[b.file][b.line], b.reason) for b in plan.bad]
        plan.held = [Held(h.source, at[h.source][h.line], h.record) for h in plan.held]
        plan.withheld = [
            Withheld(w.source, at[w.source][w.line], w.id, w.kinds) for w in plan.withheld
        ]


class Partitions:
    """Incoming lines split by id into temporary files (`by_id`); close it when done."""

    def __init__(self, folder: Path, count: int) -> None:
        self.known = 0
        """Lines the destination held already, not split."""
        self.bytes = 0
        """The bytes of the lines split (with their "\\n")."""
        self.names: list[str] = []
        self._numbers: dict[str, int] = {}
        self.spills: list[Spill] = []
        try:
            for _ in range(count):
                self.spills.append(Spill(folder))
        except BaseException:
            self.close()
            raise

    def add(self, rid: str, source: str, line_no: int, raw: bytes) -> None:
        self.bytes += len(raw) + 1
        number = self._numbers.get(source)
        if number is None:
            number = self._numbers[source] = len(self.names)
            self.names.append(source)
        # A hash that is the same in every process (str's `hash` is salted per process):
        # the partitions decide which of several superseders travels (rule 14), so the
        # bytes two machines write from the same files would differ.
        part = zlib.crc32(rid.encode()) % len(self.spills)
        self.spills[part].add(b"%d %d " % (number, line_no) + raw)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def batches(self) -> Iterator[Batch]:
        """The partitions' lines, each temporary file closed once it is read. Partitions
        go together until they hold about `PARTITION_BYTES` (a partition by id is any set
        of them): lines the destination lacks may be few, and each batch costs a read of
        the destination (`memsync.local.destination`)."""
        group = max(1, len(self.spills) * PARTITION_BYTES // max(1, self.bytes))
        for start in range(0, len(self.spills), group):
            lines: dict[int, list[bytes]] = {}
            numbers: dict[int, list[int]] = {}
            for spill in self.spills[start : start + group]:
                for block in spill.chunks():
                    for line in block:
                        source, line_no, raw = line.split(b" ", 2)
                        key = int(source)
                        if key not in lines:
                            lines[key], numbers[key] = [], []
                        lines[key].append(raw)
                        numbers[key].append(int(line_no))
                spill.close()
            yield Batch(
                [(self.names[k], 0, v) for k, v in lines.items()],
                {self.names[k]: v for k, v in numbers.items()},
                by_id=True,
            )

    def close(self) -> None:
        for spill in self.spills:
            spill.close()


def superseding_appended(plan: MergePlan) -> list[bytes]:
    """The lines `plan` appends that supersede an id: all a later partition needs of
    what an earlier one appended (rule 10)."""
    return [
        rec.raw
        for rec in itertools.chain(plan.append, plan.repeated)
        if rec.supersedes is not None and not rec.deleted
    ]


def by_id(
    chunks: Iterable[SourceLines],
    folder: Path,
    total_bytes: int,
    known: Callable[[list[int]], Collection[int]],
) -> Partitions:
    """Split the lines (chunks: source name, first line number, lines; `total_bytes` of
    them) that the destination lacks by id into temporary files in `folder`, one per
    `PARTITION_BYTES` (at most `MAX_PARTITIONS`); `known(digests)` says which the
    destination holds (they are counted in `Partitions.known`, not split: a merge of two
    replicas that share most lines splits only the few they do not).

    A line with no id (blank, header, bad) goes with the id "": the merge reports it from
    there. Raises what reading `chunks` raises, and UnsupportedFormat (rule 2)."""
    parts = Partitions(folder, max(1, min(-(-total_bytes // PARTITION_BYTES), MAX_PARTITIONS)))
    try:
        for name, first, lines in chunks:
            digests = list(map(line_digest, lines))
            held = known(digests)
            new: Iterable[int] = range(len(lines))
            if held:  # the lines it lacks picked in C: replicas share most lines
                lacks = map(operator.not_, map(held.__contains__, digests))
                new = list(itertools.compress(new, lacks))
                parts.known += len(lines) - len(new)
            for i in new:
                raw = lines[i]
                rid = quick_id(raw)
                if rid is None:
                    parsed = classify(raw, source=name, line_no=first + i)
                    rid = parsed.id if type(parsed) is Record else ""
                parts.add(rid, name, first + i, raw)
    except BaseException:
        parts.close()
        raise
    return parts


def in_order(chunks: Iterable[SourceLines], limit: int | None) -> Iterator[Batch]:
    """Group the lines of chunks into batches of at most `limit` lines (all of them in one
    batch when `limit` is None), splitting a chunk where a batch fills up."""
    if limit is None:
        yield Batch(list(chunks))
        return
    batch: list[SourceLines] = []
    room = limit
    for name, first, lines in chunks:
        start = 0
        while start < len(lines):
            part = lines[start : start + room]
            batch.append((name, first + start, part))
            start += len(part)
            room -= len(part)
            if room == 0:
                yield Batch(batch)
                batch, room = [], limit
    if batch:
        yield Batch(batch)


def by_counts(name: str, lines: Iterator[bytes], counts: list[int]) -> Iterator[Batch]:
    """Lines already in partitions by id (a handoff's chosen lines), cut into batches of
    `counts[0]`, `counts[1]`, ... lines, as chunks of source `name` (line numbers
    unknown: 0)."""
    for count in counts:
        if count:
            yield Batch([(name, 0, list(itertools.islice(lines, count)))], by_id=True)
