"""The incoming lines of a large merge, split by id (issue 14).

A merge of many lines goes in batches, each planned against the destination as the batches
before it left it. Batches cut in arrival order share ids, so each had to read the whole,
growing destination again (a merge into an empty file: quadratic) and rule 14 re-appended
winners that a later batch beat. Batches cut by id share none: a batch's ids have no line
among those earlier batches appended, so its plan reads only the rest of the destination
(`memsync.local.merge`'s `_OwnAppends`), and every version of an id is judged in one plan.

The lines go to anonymous temporary files (`compaction_parts.Spill`), each with its source
and line number, so that bad lines and withheld records are reported where they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memsync.core.lines import BadLine, classify
from memsync.core.merge import Held, MergePlan, Withheld
from memsync.core.records import Record
from memsync.core.scan import line_digest, quick_id
from memsync.local.compaction_parts import Spill

__all__ = [
    "MAX_PARTS",
    "PART_BYTES",
    "Partition",
    "Parts",
    "split_chunks",
    "superseding_appended",
]

PART_BYTES = 16 * 1024 * 1024
"""Sources larger than this together are merged in partitions of about this many bytes
(a partition's lines, parsed, take a few times their size)."""

MAX_PARTS = 256
"""At most this many partitions (each an open temporary file): past 4 GiB of sources,
partitions grow instead."""


@dataclass
class Partition:
    """One partition's lines: a chunk per source, numbered from 0 (what `merge_steps`
    takes), and the line number in its source of each (`renumber` puts them back in the
    plan's reports)."""

    chunks: list[tuple[str, int, list[bytes]]]
    numbers: dict[str, list[int]]

    def __len__(self) -> int:
        return sum(len(lines) for _, _, lines in self.chunks)

    def size(self) -> int:
        """The lines' bytes, with their "\\n"."""
        return sum(len(raw) + 1 for _, _, lines in self.chunks for raw in lines)

    def renumber(self, plan: MergePlan) -> None:
        """Give the reports of `plan` (bad lines, held and withheld records) the line
        numbers of their sources."""
        at = self.numbers
        plan.bad = [BadLine(b.file, at[b.file][b.line], b.reason) for b in plan.bad]
        plan.held = [Held(h.source, at[h.source][h.line], h.record) for h in plan.held]
        plan.withheld = [
            Withheld(w.source, at[w.source][w.line], w.id, w.kinds) for w in plan.withheld
        ]


class Parts:
    """Incoming lines split by id into temporary files; close it when done."""

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
        self.spills[hash(rid) % len(self.spills)].add(b"%d %d " % (number, line_no) + raw)

    def batches(self) -> Iterator[Partition]:
        """The partitions' lines, each temporary file closed once it is read. Partitions
        go together until they hold about `PART_BYTES` (a partition by id is any set of
        them): lines the destination lacks may be few, and each batch costs a read of
        the destination (`memsync.local.merge`)."""
        group = max(1, len(self.spills) * PART_BYTES // max(1, self.bytes))
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
            yield Partition(
                [(self.names[k], 0, v) for k, v in lines.items()],
                {self.names[k]: v for k, v in numbers.items()},
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


def split_chunks(
    chunks: Iterable[tuple[str, int, list[bytes]]],
    folder: Path,
    total_bytes: int,
    known: Callable[[list[int]], Collection[int]],
) -> Parts:
    """Split the lines (chunks: source name, first line number, lines; `total_bytes` of
    them) that the destination lacks by id into temporary files in `folder`, one per
    `PART_BYTES` (at most `MAX_PARTS`); `known(digests)`
    says which the destination holds (they are counted in `Parts.known`, not split: a
    merge of two replicas that share most lines splits only the few they do not).

    A line with no id (blank, header, bad) goes with the id "": the merge reports it from
    there. Raises what reading `chunks` raises, and UnsupportedFormat (rule 2)."""
    parts = Parts(folder, max(1, min(-(-total_bytes // PART_BYTES), MAX_PARTS)))
    try:
        for name, first, lines in chunks:
            digests = list(map(line_digest, lines))
            held = known(digests)
            for i, raw in enumerate(lines):
                if held and digests[i] in held:
                    parts.known += 1
                    continue
                rid = quick_id(raw)
                if rid is None:
                    parsed = classify(raw, source=name, line_no=first + i)
                    rid = parsed.id if type(parsed) is Record else ""
                parts.add(rid, name, first + i, raw)
    except BaseException:
        parts.close()
        raise
    return parts
