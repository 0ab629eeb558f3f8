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

from collections.abc import Iterator, Sequence
from pathlib import Path

from memsync.core.lines import classify
from memsync.core.merge import quick_id
from memsync.core.records import Record
from memsync.local.compaction_parts import Spill
from memsync.local.progress import Progress
from memsync.local.storage import read_chunks

__all__ = ["PART_BYTES", "Parts", "split_sources"]

PART_BYTES = 16 * 1024 * 1024
"""Sources larger than this together are merged in partitions of about this many bytes
(a partition's lines, parsed, take a few times their size)."""


class Parts:
    """Incoming lines split by id into temporary files; close it when done."""

    def __init__(self, folder: Path, count: int, names: Sequence[str]) -> None:
        self.names = list(names)
        self.spills: list[Spill] = []
        try:
            for _ in range(count):
                self.spills.append(Spill(folder))
        except BaseException:
            self.close()
            raise

    def add(self, rid: str, source: int, line_no: int, raw: bytes) -> None:
        self.spills[hash(rid) % len(self.spills)].add(b"%d %d " % (source, line_no) + raw)

    def batches(self) -> Iterator[list[tuple[str, int, list[bytes]]]]:
        """Each partition's lines as chunks of one line (source name, line number, [line]),
        the partition's file closed once it is read."""
        for spill in self.spills:
            batch = []
            for lines in spill.chunks():
                for line in lines:
                    source, line_no, raw = line.split(b" ", 2)
                    batch.append((self.names[int(source)], int(line_no), [raw]))
            spill.close()
            yield batch

    def close(self) -> None:
        for spill in self.spills:
            spill.close()


def split_sources(
    paths: Sequence[Path], folder: Path, count: int, progress: Progress | None = None
) -> Parts:
    """Read `paths` once, splitting their lines by id into `count` temporary files in
    `folder`. A line with no id (blank, header, bad) goes with the id "": the merge
    reports it from there. Raises OSError naming a file, and UnsupportedFormat (rule 2).
    """
    parts = Parts(folder, count, [str(p) for p in paths])
    total = sum(p.stat().st_size for p in paths)
    done = lines = 0
    try:
        for source, path in enumerate(paths):
            name = str(path)
            for chunk in read_chunks(path):
                for n, raw in enumerate(chunk.lines, chunk.first_line):
                    rid = quick_id(raw)
                    if rid is None:
                        parsed = classify(raw, source=name, line_no=n)
                        rid = parsed.id if type(parsed) is Record else ""
                    parts.add(rid, source, n, raw)
                if progress is not None:
                    done += chunk.end - chunk.start
                    lines += len(chunk.lines)
                    progress("merge: splitting", lines, done, total)
    except BaseException:
        parts.close()
        raise
    return parts
