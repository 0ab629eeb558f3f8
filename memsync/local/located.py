"""The view of memory files in two passes, holding no line (issue 14; SEMANTICS rules 1-12).

The first pass folds every record into an `Index` as a `Located` record: the fields the
view needs and where its line is, not the line itself. The second reads the live lines
again, in view order, from the same open files: a compaction that replaces a file between
the passes does not move them (the old inode stays readable), and appends only add lines
past the end. The view of a million records then takes a third of the memory of one
built from whole records, which must hold every current line.

Runs of lines that sit next to each other in a file are read back with one `pread`: in a
log appended in time order, most of the view is a few long runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, cast

import msgspec

from memsync.core.clock import FUTURE_TOLERANCE
from memsync.core.digest import record_hash
from memsync.core.lines import BadLine, Header, Invalid, classify_fields
from memsync.core.records import Described, Located, Record
from memsync.core.secrets import record_secrets
from memsync.core.view import build_view, distinct_twins
from memsync.local.drain import recover_after_crash
from memsync.local.fresh import now_us
from memsync.local.placed import LENGTH_BITS as _LENGTH_BITS
from memsync.local.placed import LENGTH_MASK as _LENGTH_MASK
from memsync.local.placed import OFFSET_BITS as _OFFSET_BITS
from memsync.local.placed import OFFSET_MASK as _OFFSET_MASK
from memsync.local.placed import RUN_BYTES as _RUN_BYTES
from memsync.local.placed import lines_at, runs_at
from memsync.local.reading import CheckReport, ScanResult, SecretFinding, is_header, no_gc
from memsync.local.storage import Chunk, errors_named, open_for_reading, read_chunks_fd

if TYPE_CHECKING:
    from memsync.local.viewstore import ViewStore

__all__ = [
    "LocatedView",
    "check_files",
    "fill_hashes",
    "fold_forward",
    "located_index",
    "located_view",
    "pack_at",
    "rank",
]

_CHUNK_BYTES = 1024 * 1024
"""The first pass reads 1 MiB at a time: the chunk's lines are alive only while folded."""
PARALLEL_BYTES = 16 * 1024 * 1024
"""Files this large together are folded in two processes (`fold_halves`); smaller ones
in one: forking and sending the summary back would cost more than it saves."""
_AT = attrgetter("at")


@dataclass
class LocatedView:
    """The view of memory files (rules 8 to 12) whose lines are read again on demand.

    A context manager: it holds the files open from the first pass to the last line read.

    Attributes:
        records: the live current versions ordered by (`created_at`, `id`), as `Located`
            records (their `raw` is empty: `lines()` gives the lines).
        scan: what the first pass found: bad lines, headers, files without a header.
    """

    records: list[Located]
    scan: ScanResult
    paths: list[Path]
    _fds: list[int] = field(repr=False)
    resumed: bool = False
    """Whether the first pass started from a persistent view: then all but the records
    folded since it was written are `Described` (issue 20)."""
    described: bool = False
    """Whether its records are `Described` ones (but those folded since a persistent view
    was read): a view resumed from one, or folded to write one (issue 20). A selection
    then reads only the lines it keeps."""

    def lines(self) -> Iterator[bytes]:
        """The line of each of `records`, in order, as written (without its "\\n").

        Raises OSError naming the file when a line is no longer where it was read: a file
        rewritten in place, which memsync never does (rule 13).
        """
        return lines_at(map(_AT, self.records), self.paths, self._fds)

    def runs(self) -> Iterator[bytes]:
        """The lines of `lines()`, each run of adjacent ones as the bytes that hold them,
        each line with its "\\n" (`placed.runs_at`): what a writer of every line copies
        at once. Raises OSError as `lines()` does."""
        return runs_at(map(_AT, self.records), self.paths, self._fds)

    def hashes(self) -> Iterator[int]:
        """The `record_hash` of each of `records`, in order (`hashes_of`)."""
        return self.hashes_of(self.records)

    def hashes_of(self, records: Sequence[Located]) -> Iterator[int]:
        """The `record_hash` of each line of `records`, in the order given: the one the
        fold kept (a persistent view's winners, issue 21), else of the line read again."""
        lines = self.lines_of([r for r in records if not r.hash])
        for r in records:
            yield r.hash or record_hash(next(lines))

    def lines_of(self, records: list[Located]) -> Iterator[bytes]:
        """The lines of `records` (any of this view's files), in the order given: adjacent
        ones read with one `pread`, as `lines()` reads the view's."""
        return LocatedView(records, self.scan, self.paths, self._fds, self.resumed).lines()

    def line(self, rec: Record) -> bytes:
        """One record's line: read again for a `Located` record (to settle a tie)."""
        if rec.raw or not isinstance(rec, Located):
            return rec.raw
        file_no, offset, length = _unpack(rec.at)
        with errors_named(self.paths[file_no]):
            return os.pread(self._fds[file_no], length, offset)

    def length(self, rec: Record) -> int:
        """The length of a `Located` record's line (without its "\\n"), read from `at`."""
        return rec.at & _LENGTH_MASK if isinstance(rec, Located) else len(rec.raw)

    def close(self) -> None:
        """Close the files (idempotent)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def located_view(
    paths: Sequence[Path],
    now: int | None = None,
    store: ViewStore | None = None,
    *,
    hashes: bool = False,
    ranked: bool = True,
) -> LocatedView:
    """The view of several memory files together at `now` (default: the local clock),
    read in two passes (see the module's docstring).

    With `store`, the first pass over one file starts from its persistent view
    (`memsync.local.viewstore`, issue 20) when that is valid, folding only the bytes
    appended since, and leaves it up to date. Several files are folded whole. With
    `hashes` too, the records hold their lines' `record_hash` (`Located.hash`: from the
    store, or hashed as they are folded), so that `hashes()` reads no line (issue 21).
    Without `ranked`, `records` is left empty: the first pass alone, for a caller that may
    answer from the store it has just written and else calls `rank` (`at` as `now`).

    Raises OSError naming a file that cannot be read, and UnsupportedFormat (rule 2).
    """
    at = now_us() if now is None else now
    view = _first_pass(paths, None, store if len(paths) == 1 else None, hashes=hashes, now=at)
    if ranked:
        rank(view, at)
    return view


def rank(view: LocatedView, now: int) -> None:
    """Set `view.records`: the live versions of its first pass at `now` (rules 8 to 12),
    in view order. Closes the view if that fails."""
    try:
        with no_gc():  # sorting a million records allocates a million keys
            view.records = cast(list[Located], build_view(view.scan.index, now).live)
    except BaseException:
        view.close()
        raise


def located_index(path: Path, store: ViewStore | None = None) -> LocatedView:
    """The first pass alone over one memory file: `scan.index` is the per-id summary of its
    records (rules 8 to 10) as `Located` ones, `records` is empty; with `store`, from and
    into its persistent view (issue 20). What a lookup of a few ids needs (`recall`).

    Raises OSError naming the file when it cannot be read, and UnsupportedFormat (rule 2).
    """
    return _first_pass([path], None, store)


def fold_forward(view: LocatedView, offset: int, line: int) -> tuple[int, int]:
    """Fold the complete lines of the one file of `view` from byte `offset` (its line
    number `line`) into `view.scan`, as the first pass folds them; return where they end
    and the next line's number. What a long-lived reader calls as the file grows (rules 13
    and 14: lines are only appended)."""
    [path], [fd] = view.paths, view._fds
    with errors_named(path), no_gc():
        for chunk in read_chunks_fd(fd, offset, line, chunk_bytes=_CHUNK_BYTES):
            _fold(view.scan, chunk, str(path), 0, None)
            offset, line = chunk.end, chunk.first_line + len(chunk.lines)
    return offset, line


def check_files(paths: Sequence[Path], now: int | None = None) -> CheckReport:
    """What `check` reports of several memory files (`CheckReport`), read as
    `located_view` reads them: bad lines, twins, credential-shaped text (issue 13, item 6)
    and records more than `FUTURE_TOLERANCE` ahead of `now` (default: the local clock).

    Raises OSError naming a file that cannot be read, and UnsupportedFormat (rule 2).
    """
    limit = (now_us() if now is None else now) + FUTURE_TOLERANCE
    with _first_pass(paths, limit) as view:
        scan = view.scan
        pairs = ((_whole(a, view), _whole(b, view)) for a, b in scan.index.twins)
        twins = distinct_twins(pairs, scan.index)
        future = [(name, n, _whole(rec, view)) for name, n, rec in scan.future]
    return CheckReport(scan.bad, twins, scan.secrets, future)


def _whole(rec: Record, view: LocatedView) -> Record:
    """`rec` as a `Record` holding its line."""
    line = view.line(rec)
    return Record(line, rec.id, rec.ts, rec.deleted, rec.user, rec.supersedes, rec.expires)


def _first_pass(
    paths: Sequence[Path],
    future_after: int | None,
    store: ViewStore | None = None,
    *,
    hashes: bool = False,
    now: int | None = None,
) -> LocatedView:
    """The files opened and folded, in two processes when they are large (`fold_halves`);
    with `future_after`, also checked for what `check_files` reports; with `store` (one
    file), from and into its persistent view, `hashes` as `located_view` says."""
    view = LocatedView([], ScanResult(), list(paths), [])
    view.scan.index.line = view.line  # a tie between two versions reads both lines
    try:
        for path in view.paths:
            recover_after_crash(path)  # lines a killed compaction left aside (rule 16)
            view._fds.append(open_for_reading(path))
        if store is not None:
            _stored_pass(view, store, hashes, now)
            return view

        def fold(result: ScanResult, file_no: int, start: int, stop: int | None, line: int) -> None:
            path = view.paths[file_no]
            with errors_named(path):
                chunks = read_chunks_fd(
                    view._fds[file_no], start, line, stop, chunk_bytes=_CHUNK_BYTES
                )
                for chunk in chunks:
                    _fold(result, chunk, str(path), file_no, future_after)

        with no_gc():  # a million records hold no cycles
            cut = None
            if sum(os.fstat(fd).st_size for fd in view._fds) >= PARALLEL_BYTES:
                from memsync.local.fold_halves import fold_in_halves, halves  # (start-up)

                cut = halves(view._fds)
            if cut is None:
                for file_no in range(len(view.paths)):
                    fold(view.scan, file_no, 0, None, 1)
            else:
                fold_in_halves(view.scan, view._fds, *cut, fold)
    except BaseException:
        view.close()
        raise
    return view


def _stored_pass(view: LocatedView, store: ViewStore, hashes: bool, now: int | None) -> None:
    """The first pass over one file from its persistent view: only the bytes after what
    the store folded, when it is valid; else the whole file. Then the store is written
    again when it is far enough behind (`ViewStore.save`). With `hashes`, the versions
    hold their lines' hashes (`located_view`); `now` is the view's (`ViewStore.save`)."""
    [path], [fd] = view.paths, view._fds
    name = str(path)
    resumed = store.resume(path, fd, name, hashes=hashes)
    if resumed is None and store.built_meanwhile(path, fd):  # (by a command just before)
        resumed = store.resume(path, fd, name, hashes=hashes)
    kept = (b"", b"") if resumed is None else resumed.kept
    with errors_named(path), no_gc():
        if resumed is not None:
            resumed.scan.index.line = view.line
            view.scan, view.resumed = resumed.scan, True
            offset, line, held = resumed.offset, resumed.line, resumed.held
            for chunk in read_chunks_fd(fd, offset, line, chunk_bytes=_CHUNK_BYTES):
                _fold(view.scan, chunk, name, 0, None, hashed=hashes)
                offset, line = chunk.end, chunk.first_line + len(chunk.lines)
        else:
            # The whole file up to its last complete line now (a writer may be appending),
            # in two processes when it is large; the store then starts at that line.
            offset, held = _last_line_end(fd, os.fstat(fd).st_size), 0
            if offset >= PARALLEL_BYTES:
                from memsync.local.fold_halves import fold_in_halves, halves  # (start-up)

                cut = halves(view._fds)
            else:
                cut = None

            def fold(
                result: ScanResult, file_no: int, start: int, stop: int | None, n: int
            ) -> None:
                end = offset if stop is None else min(stop, offset)
                for chunk in read_chunks_fd(fd, start, n, end, chunk_bytes=_CHUNK_BYTES):
                    _fold(result, chunk, name, file_no, None, hashed=hashes, described=True)
                    result.lines += len(chunk.lines)

            if cut is None:
                fold(view.scan, 0, 0, None, 1)
            else:
                fold_in_halves(view.scan, view._fds, *cut, fold)
            line = 1 + view.scan.lines if offset >= store.min_bytes else 0
        # The store's hash column is lazy (`memsync.local.viewstore`): a digest fills in
        # what it lacks, and saves it however little was appended, so the next is warm.
        view.described = True
        filled = hashes and fill_hashes(view)
        store.save(
            path, fd, view.scan, offset, line, held, view.lines_of, kept, force=filled, now=now
        )


def fill_hashes(view: LocatedView) -> bool:
    """Give each version in the view's index whose hash is not known (`Located.hash` 0: a
    persistent view's lazy column, issue 21) the `record_hash` of its line, read again in
    the file's order; whether any was. Each keeps its place in its table (what
    `viewstore._kept_hashes` relies on)."""
    index = view.scan.index
    filled = False
    for table in (index.user, index.inferred):
        # A located pass folds only `Located` records (`_fold`, `ViewStore.resume`).
        versions = cast(dict[str, Located], table).values()
        missing = sorted((r for r in versions if not r.hash), key=_AT)
        if not missing:
            continue
        filled = True
        for rec, raw in zip(missing, view.lines_of(missing), strict=True):
            table[rec.id] = msgspec.structs.replace(rec, hash=record_hash(raw))
    return filled


def _last_line_end(fd: int, size: int) -> int:
    """The offset just after the last "\n" in the first `size` bytes of `fd` (0: none)."""
    end = size
    while end > 0:
        start = max(0, end - _RUN_BYTES)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _fold(
    result: ScanResult,
    chunk: Chunk,
    name: str,
    file_no: int,
    future_after: int | None,
    *,
    hashed: bool = False,
    described: bool = False,
) -> None:
    """Classify a chunk's lines; fold its records in as `Located` records; with
    `future_after`, note the records dated after it and those that look like they hold a
    credential (and every entry that supersedes, `ScanResult.superseding`); with
    `hashed`, give each version that becomes its class's best (rule 9)
    the `record_hash` of its line, in memory now: the persistent view keeps it, so that
    the digest reads no line (issue 21); with `described`, each version as a `Described`
    one, with the kind, scope and confidence its line's decode gave (the persistent view
    keeps them: `ViewStore.save` then reads no line again, issue 20)."""
    lines = chunk.lines
    if chunk.first_line == 1 and lines and not is_header(lines[0]):
        result.headerless.append(name)
    if result.superseding is None:
        result.superseding = []
    superseding = result.superseding
    index = result.index
    add, bad = index.add, result.bad
    scopes: dict[str, str] = {}
    confidences: dict[float, float] = {}
    for n, (raw, at) in enumerate(zip(lines, chunk.starts(), strict=True), chunk.first_line):
        parsed = classify_fields(raw, source=name, line_no=n)
        if type(parsed) is tuple:  # a record: no `Record` built, only what is kept
            rid, ts, deleted, user, supersedes, expires, kind, scope, confidence = parsed
            packed = ((file_no << _OFFSET_BITS | at) << _LENGTH_BITS) | len(raw)  # `pack_at`
            rec: Located
            if described and not deleted:
                # One scope and confidence object per chunk, not one per version (a few
                # distinct ones). (A zero is left as it is: -0.0 would be taken for 0.0.)
                scope = scopes.setdefault(scope, scope)
                if confidence:
                    confidence = confidences.setdefault(confidence, confidence)
                rec = Described(
                    b"", rid, ts, False, user, supersedes, expires, packed, 0,
                    kind, scope, confidence,
                )  # fmt: skip
            else:
                rec = Located(b"", rid, ts, deleted, user, supersedes, expires, packed, 0)
            add(rec)
            if supersedes is not None and not deleted:
                superseding.append((supersedes, packed))
            if hashed and not deleted:
                # Only a version that is now the best of its class can be in the view: the
                # others are never hashed (a tombstone is never in it).
                best = index.user if user else index.inferred
                if best.get(rid) is rec:
                    best[rid] = msgspec.structs.replace(rec, hash=record_hash(raw))
            if future_after is not None:
                if ts > future_after:
                    result.future.append((name, n, rec))
                if not deleted:
                    result.secrets += (SecretFinding(name, n, what) for what in record_secrets(raw))
        elif type(parsed) is Invalid:
            bad.append(BadLine(name, n, parsed.reason))
        elif type(parsed) is Header:
            result.headers.append(parsed)


def pack_at(file_no: int, offset: int, length: int) -> int:
    """The `Located.at` of a line of `length` bytes (without its "\n") at `offset` of the
    view's file `file_no`: what the first pass gives the record it folds from there."""
    return ((file_no << _OFFSET_BITS | offset) << _LENGTH_BITS) | length


def _unpack(at: int) -> tuple[int, int, int]:
    """(file number, offset, length) of a `Located.at`."""
    rest = at >> _LENGTH_BITS
    return rest >> _OFFSET_BITS, rest & _OFFSET_MASK, at & _LENGTH_MASK
