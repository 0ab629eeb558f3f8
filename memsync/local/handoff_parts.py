"""Handoff of a large file in partitions by id, so that memory is that of one partition,
not of the source (issue 14).

The source's view is per id but for supersession (rule 10: an id superseded by any
record of any id). So the source's lines are split by id (`compaction_parts.split_file`),
the supersessions of the whole file are gathered first from the few lines that may
supersede (`core.scan.superseding_lines`), and each partition's index, given those,
yields that partition's view and its share of `select_handoff`'s lines. The chosen lines
go to a temporary file, then into the destination like a merge, in batches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from memsync.core.handoff import HandoffFilter, select_handoff
from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.scan import superseding_lines
from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER, Index, build_view
from memsync.local.compaction_parts import PART_BYTES, Spill, split_file
from memsync.local.drain import recover_after_crash
from memsync.local.progress import Progress
from memsync.local.reading import no_gc
from memsync.local.storage import read_chunks

__all__ = ["PART_BYTES", "chosen_lines"]


def _supersessions(src: Path) -> dict[str, int]:
    """Every supersession of `src` (rule 10): superseded id -> SUPERSEDED_BY_* bits."""
    bits: dict[str, int] = {}
    for chunk in read_chunks(src):
        for raw in superseding_lines(chunk.data):
            rec = classify(raw)
            if type(rec) is Record and not rec.deleted and rec.supersedes is not None:
                bit = SUPERSEDED_BY_USER if rec.user else SUPERSEDED_BY_INFERRED
                bits[rec.supersedes] = bits.get(rec.supersedes, 0) | bit
    return bits


def chosen_lines(
    src: Path,
    dest_ids: set[str],
    selection: HandoffFilter,
    now: int,
    folder: Path,
    progress: Progress | None = None,
) -> tuple[Spill, list[int]]:
    """`select_handoff`'s lines for `src` into a temporary file in `folder` (the caller
    closes it), computed a partition at a time (by id), and how many lines each partition
    gave, in the file's order."""
    recover_after_crash(src)  # lines a killed compaction left aside (rule 16)
    name = str(src)
    size = src.stat().st_size
    count = max(1, -(-size // PART_BYTES))
    superseded = _supersessions(src)
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    out = Spill(folder)
    counts: list[int] = []
    try:
        with no_gc():
            parted = split_file(fd, name, folder, count, progress, "handoff: reading")
        try:
            for i, part in enumerate(parted.parts):
                chosen = 0
                for raw in _part_chosen(part, name, dest_ids, superseded, selection, now):
                    out.add(raw)
                    chosen += 1
                counts.append(chosen)
                if progress is not None:
                    progress("handoff: selecting", i + 1, i + 1, count)
        finally:
            parted.close()
    except BaseException:
        out.close()
        raise
    finally:
        os.close(fd)
    out.flush()
    return out, counts


def _part_chosen(
    part: Spill,
    name: str,
    dest_ids: set[str],
    superseded: dict[str, int],
    selection: HandoffFilter,
    now: int,
) -> Iterator[bytes]:
    index = Index()
    superseding: list[Record] = []
    with no_gc():
        for lines in part.chunks():
            for line in lines:
                n, _, raw = line.partition(b" ")
                rec = classify(raw, source=name, line_no=int(n))
                if type(rec) is Record:
                    index.add(rec)
                    if not rec.deleted and rec.supersedes in dest_ids:
                        superseding.append(rec)
        index.superseded = superseded  # rule 10 counts supersessions from every id
        live = build_view(index, now).live
        yield from select_handoff(index, live, dest_ids, superseding, selection)
