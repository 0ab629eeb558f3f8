"""Handing a slice of one memory file to another (`memsync handoff`): the lines of SRC
that make DEST's view of the selected ids agree with SRC's, merged into DEST (rule 14).

A large source (issue 14) is handed off in partitions by id, so that memory is that of one
partition, not of the source. The source's view is per id but for supersession (rule 10:
an id superseded by any record of any id). So the source's lines are split by id
(`compaction_partitions.partition_file`), the supersessions of the whole file are
gathered first from the few lines that may supersede (`core.scan.superseding_lines`), and
each partition's index, given those, yields that partition's view and its share of
`select_handoff`'s lines. The chosen lines go to a temporary file, then into the
destination like a merge, a partition at a time.

With the source's persistent view (issue 20, `ViewStore`), a source under the partition
size is selected from it instead: the live current versions' kind, scope, confidence
and instant are in the store, and so are where each superseding entry lies and the lines
that decide each id; only the lines handed over are read (`_stored_chosen`), and the same
ones as the whole-file fold chooses, in the same order.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

from memsync.core.handoff import HandoffFilter, select_handoff, within
from memsync.core.lines import classify
from memsync.core.merge import DEFAULT_MAX_FUTURE
from memsync.core.records import Described, Located, Record
from memsync.core.scan import superseding_lines
from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER, Index, build_view
from memsync.local.batching import Batch, by_counts, in_order
from memsync.local.compaction_partitions import partition_file
from memsync.local.destination import Streamed
from memsync.local.drain import recover_after_crash
from memsync.local.fresh import now_us
from memsync.local.located import LocatedView, located_view
from memsync.local.lock import DEFAULT_TIMEOUT
from memsync.local.merge import MergeResult, merge_batches
from memsync.local.progress import Progress
from memsync.local.reading import no_gc, scan
from memsync.local.spill import Spill
from memsync.local.storage import file_size, private_dirs, read_chunks
from memsync.local.viewstore import ViewStore

__all__ = ["PARTITION_BYTES", "chosen_lines", "handoff"]

PARTITION_BYTES = 32 * 1024 * 1024
"""A source larger than this is handed off in partitions by id of about this many bytes
(a partition's records, parsed, take about twice to three times its size)."""


def _ids_of(path: Path) -> set[str]:
    ids: set[str] = set()
    if path.exists():
        for chunk in read_chunks(path):
            for n, raw in enumerate(chunk.lines, chunk.first_line):
                parsed = classify(raw, source=str(path), line_no=n)
                if type(parsed) is Record:
                    ids.add(parsed.id)
    return ids


def handoff(
    src: Path,
    dest: Path,
    selection: HandoffFilter,
    *,
    now: int | None = None,
    dry_run: bool = False,
    lock_timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
    store: ViewStore | None = None,
) -> MergeResult:
    """Hand a slice of `src` to `dest`: append what makes DEST's view of the selected ids
    agree with SRC's: the live current versions that match `selection`, and SRC's
    tombstones and superseding records for ids DEST holds. Merge rules apply (rule 14):
    the chosen lines go through the merge driver (`merge_batches`), DEST streamed.

    With `store`, SRC's lines are chosen from its persistent view (issue 20), which this
    brings up to date: the same lines as without, reading only those. A source larger
    than `PARTITION_BYTES` is handed off in partitions all the same: its memory stays
    bounded (issue 14), which a view of every id of it, even from its store, is not."""
    at = now_us() if now is None else now
    if file_size(src) > PARTITION_BYTES:
        return _handoff_partitioned(src, dest, selection, at, dry_run, lock_timeout, progress)
    dest_ids = _ids_of(dest)
    if store is not None:
        chosen = _stored_chosen(src, dest_ids, selection, at, store)
    else:
        superseding: list[Record] = []

        def visit(_name: str, _line: int, rec: Record) -> None:
            if not rec.deleted and rec.supersedes in dest_ids:
                superseding.append(rec)

        result = scan([src], visit=visit)
        view = build_view(result.index, at)
        chosen = select_handoff(result.index, view.live, dest_ids, superseding, selection)
    streamed = Streamed(
        dest,
        now=at,
        max_future=DEFAULT_MAX_FUTURE,
        lock_timeout=lock_timeout,
        dry_run=dry_run,
        once=True,
        during="handoff",
    )
    total = MergeResult(dest=str(dest), dry_run=dry_run)
    return merge_batches(streamed, [Batch([(str(src), 0, chosen)])], total, keep_records=True)


def _stored_chosen(
    src: Path,
    dest_ids: set[str],
    selection: HandoffFilter,
    now: int,
    store: ViewStore,
) -> list[bytes]:
    """`select_handoff`'s lines for `src`, chosen through its persistent view: the live
    versions the store describes are selected by their columns (those folded since it was
    written, by their lines), and `select_handoff` is given whole records of only what it
    may hand over: those live versions, every entry superseding an id of `dest_ids` (rule
    10: each travels, `ScanResult.superseding`, in the file's order as a scan meets them),
    and the latest tombstone and best versions of the ids it looks up."""
    with located_view([src], now, store) as view:
        keep = _described_filter(selection)
        # (`select_handoff` filters those folded since the store by their lines)
        live = _whole(view, [r for r in view.records if keep(r)])
        found = view.scan.superseding or []
        superseding = [
            rec
            for rec in _whole(view, [_at(at) for rid, at in found if rid in dest_ids])
            if not rec.deleted and rec.supersedes in dest_ids
        ]
        index, source = Index(), view.scan.index
        wanted = [rid for rid in dest_ids if rid in source.tombs]
        looked_up = (
            (index.tombs, source.tombs, wanted),
            *(
                (mine, theirs, [rec.id for rec in superseding])
                for mine, theirs in (
                    (index.tombs, source.tombs),
                    (index.user, source.user),
                    (index.inferred, source.inferred),
                )
            ),
        )
        for mine, theirs, ids in looked_up:
            located = [theirs[rid] for rid in ids if rid in theirs]
            for rec in _whole(view, cast(list[Located], located)):
                mine[rec.id] = rec
    return select_handoff(index, live, dest_ids, superseding, selection)


def _described_filter(selection: HandoffFilter) -> Callable[[Located], bool]:
    """`selection.matches` from a `Described` record's columns (rule 3's defaults are in
    them); True for another (its line says). A scope's verdict is kept: a file holds few."""
    scopes: dict[str, bool] = {}

    def keep(rec: Located) -> bool:
        if type(rec) is not Described:
            return True
        if selection.kinds and rec.kind not in selection.kinds:
            return False
        if selection.scopes:
            ok = scopes.get(rec.scope)
            if ok is None:
                ok = scopes[rec.scope] = any(within(rec.scope, s) for s in selection.scopes)
            if not ok:
                return False
        if selection.min_confidence is not None and rec.confidence < selection.min_confidence:
            return False
        return selection.since is None or rec.ts >= selection.since

    return keep


def _at(at: int) -> Located:
    """A stand-in for the record whose line is at `at`, to read it (`LocatedView.lines_of`
    reads only `at`)."""
    return Located(b"", "", 0, False, False, None, None, at, 0)


def _whole(view: LocatedView, records: list[Located]) -> list[Record]:
    """The records whose lines are at the places of `records`, parsed (as a scan would)."""
    name = str(view.paths[0])
    return [cast(Record, classify(raw, source=name)) for raw in view.lines_of(records)]


def _handoff_partitioned(
    src: Path,
    dest: Path,
    selection: HandoffFilter,
    at: int,
    dry_run: bool,
    lock_timeout: float,
    progress: Progress | None,
) -> MergeResult:
    """`handoff` of a large source (issue 14): the lines are chosen a partition by id at a
    time (`chosen_lines`) into a temporary file beside `dest`, then merged a partition
    at a time, as `merge_files` does (a dry run: in one plan, to list them)."""
    private_dirs(dest.parent)
    chosen, counts = chosen_lines(src, _ids_of(dest), selection, at, dest.parent, progress)
    try:
        streamed = Streamed(
            dest,
            now=at,
            max_future=DEFAULT_MAX_FUTURE,
            lock_timeout=lock_timeout,
            dry_run=dry_run,
            once=dry_run,
        )
        if dry_run:
            chunks = ((str(src), 0, lines) for lines in chosen.chunks())
            batches = in_order(chunks, None)
        else:
            lines = itertools.chain.from_iterable(chosen.chunks())
            batches = by_counts(str(src), lines, counts)  # the partitions of `chosen_lines`
        return merge_batches(streamed, batches, MergeResult(dest=str(dest), dry_run=dry_run))
    finally:
        chosen.close()


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
    count = max(1, -(-size // PARTITION_BYTES))
    superseded = _supersessions(src)
    fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
    out = Spill(folder)
    counts: list[int] = []
    try:
        with no_gc():
            partitioned = partition_file(fd, name, folder, count, progress, "handoff: reading")
        try:
            for i, part in enumerate(partitioned.partitions):
                chosen = 0
                for raw in _partition_chosen(part, name, dest_ids, superseded, selection, now):
                    out.add(raw)
                    chosen += 1
                counts.append(chosen)
                if progress is not None:
                    progress("handoff: selecting", i + 1, i + 1, count)
        finally:
            partitioned.close()
    except BaseException:
        out.close()
        raise
    finally:
        os.close(fd)
    out.flush()
    return out, counts


def _partition_chosen(
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
