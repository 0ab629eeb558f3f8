"""The first pass of a large view on two cores: the second half of the bytes folded in a
forked process (issue 14).

The fold is order-free (SEMANTICS rules 8 to 10: `Index` gives the same summary whatever
order the records come in), so the files can be cut in two at a line boundary, each half
folded on its own, and the child's summary (the best records of each id, as `Located`
records, and every supersession) folded into the parent's. The view is the same as one
fold's; the time is about half of the fold, plus the child's summary sent over a pipe.

The child only reads: it writes its summary to the pipe and leaves by `os._exit`, never
flushing the parent's buffers. If it fails for any reason, the parent folds the second half
itself, so that an error (a file that cannot be read, a header of another format) is raised
as a one-process fold raises it, with its line number.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec

from memsync.core.lines import BadLine, Header
from memsync.core.records import Described, Located
from memsync.local.forking import fork_is_safe
from memsync.local.reading import ScanResult, SecretFinding

__all__ = ["Span", "fold_in_halves", "halves"]

_BLOCK = 1024 * 1024


class Span(NamedTuple):
    """Bytes `start` to `stop` (None: to the end) of file `file_no`, whose first line is
    line `first_line` (0: not known yet; the child counts it)."""

    file_no: int
    start: int
    stop: int | None
    first_line: int


Fold = Callable[[ScanResult, int, int, int | None, int], None]
"""Folds bytes `start` to `stop` of file `file_no`, starting at line `first_line`, into a
`ScanResult`."""


class _Rest(msgspec.Struct, gc=False):
    """The child's last frame: its `ScanResult` but for the best records (sent before)."""

    superseded: dict[str, int]
    twins: list[tuple[Located, Located]]
    records: int
    bad: list[BadLine]
    headers: list[Header]
    headerless: list[str]
    secrets: list[SecretFinding]
    future: list[tuple[str, int, Located]]
    superseding: list[tuple[str, int]] | None
    lines: int


_FRAME_RECORDS = 50_000
"""The child sends its best records in frames of this many, so that the parent holds one
frame at a time besides its own index (memory: issue 14)."""
_decode_records = msgspec.msgpack.Decoder(list[Located]).decode
_decode_described = msgspec.msgpack.Decoder(list[Described]).decode
_decode_rest = msgspec.msgpack.Decoder(_Rest).decode


def halves(fds: Sequence[int]) -> tuple[list[Span], list[Span]] | None:
    """The files of `fds` cut in two halves of about equal bytes at a line boundary, or
    None when a second process cannot be forked safely (another thread runs: a fork
    copies only the calling one) or would not run on a core of its own."""
    sizes = [os.fstat(fd).st_size for fd in fds]
    total = sum(sizes)
    if not fork_is_safe():
        return None
    before = 0
    for file_no, size in enumerate(sizes):
        if before + size > total // 2:
            cut = _line_end(fds[file_no], total // 2 - before, size)
            first = [Span(n, 0, None, 1) for n in range(file_no)]
            second = [Span(n, 0, None, 1) for n in range(file_no + 1, len(fds))]
            if cut is None:  # no line ends after the middle: the whole file goes first
                return [*first, Span(file_no, 0, None, 1)], second
            return [*first, Span(file_no, 0, cut, 1)], [Span(file_no, cut, None, 0), *second]
        before += size
    return None


def _line_end(fd: int, at: int, size: int) -> int | None:
    """The offset just past the first "\\n" at or after `at`, or None before `size`."""
    while at < size:
        block = os.pread(fd, _BLOCK, at)
        if not block:
            return None
        found = block.find(b"\n")
        if found >= 0:
            return at + found + 1
        at += len(block)
    return None


def _count_lines(fd: int, stop: int) -> int:
    """The number of "\\n" in the first `stop` bytes of `fd`."""
    count = pos = 0
    while pos < stop:
        block = os.pread(fd, min(_BLOCK * 8, stop - pos), pos)
        if not block:
            break
        count += block.count(b"\n")
        pos += len(block)
    return count


def fold_in_halves(
    result: ScanResult,
    fds: Sequence[int],
    first: list[Span],
    second: list[Span],
    fold: Fold,
) -> None:
    """Fold `first` into `result` here and `second` in a forked child, then the child's
    summary into `result`; `fold(result, file_no, start, stop, first_line)` folds one span.
    If the child fails, the second half is folded here."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process or memory to spare: both halves here
        os.close(read_end)
        os.close(write_end)
        for span in (*first, *second):
            fold(result, *_numbered(span, fds))
        return
    if pid == 0:  # the child: fold, send, and leave without running anything of the parent's
        code = 1
        try:
            os.close(read_end)
            half = ScanResult()
            half.index.line = result.index.line  # ties read lines from the same files
            for span in second:
                fold(half, *_numbered(span, fds))
            _send(write_end, half)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    records = result.index.records
    try:
        for span in first:
            fold(result, *span)
        records = result.index.records
        rest = _receive(result, read_end)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    if rest is not None and os.waitstatus_to_exitcode(status) == 0:
        _fold_rest(result, rest, records)
        return
    # The child failed, or sent something unreadable. The best records it sent before are
    # folded in again below with the rest of its half, which changes nothing (the same
    # lines, at the same places) but the count of records, set back here.
    result.index.records = records
    for span in second:  # here, so that an error is raised as it is
        fold(result, *_numbered(span, fds))


def _numbered(span: Span, fds: Sequence[int]) -> Span:
    """`span` with its first line number, counted if not known."""
    if span.first_line:
        return span
    line = _count_lines(fds[span.file_no], span.start) + 1
    return Span(span.file_no, span.start, span.stop, line)


def _send(fd: int, half: ScanResult) -> None:
    """The child's summary: frames of best records, then the rest (`_Rest`)."""
    index = half.index
    for best in (index.tombs, index.user, index.inferred):
        records = list(best.values())
        # `Described` ones (a fold for the persistent view) in their own frames: decoded
        # as `Located` they would lose their kind, scope and confidence.
        described = [r for r in records if type(r) is Described]
        if described:
            records = [r for r in records if type(r) is not Described]
        for tag, group in ((b"R", records), (b"D", described)):
            for i in range(0, len(group), _FRAME_RECORDS):
                _write_frame(fd, tag, msgspec.msgpack.encode(group[i : i + _FRAME_RECORDS]))
    rest = _Rest(
        superseded=index.superseded,
        twins=index.twins,  # type: ignore[arg-type]
        records=index.records,
        bad=half.bad,
        headers=half.headers,
        headerless=half.headerless,
        secrets=half.secrets,
        future=half.future,  # type: ignore[arg-type]
        superseding=half.superseding,
        lines=half.lines,
    )
    _write_frame(fd, b"E", msgspec.msgpack.encode(rest))


def _receive(result: ScanResult, fd: int) -> _Rest | None:
    """Fold the child's best records into `result` as they come (the fold is order-free:
    rules 8 to 10, and folding one again changes nothing); its last frame, or None when it
    did not arrive whole and readable. The caller folds that in once the child is known
    to have succeeded (`_fold_rest`): its lists would be there twice if the second half
    were then folded here again."""
    index = result.index
    names: dict[object, object] = {}
    with os.fdopen(os.dup(fd), "rb") as pipe:
        while head := pipe.read(9):
            body = pipe.read(int.from_bytes(head[1:], "big")) if len(head) == 9 else b""
            try:
                if head[:1] == b"R":
                    for rec in _decode_records(body):
                        index.add(rec)
                    continue
                if head[:1] == b"D":
                    for rec in _decode_described(body):
                        index.add(_interned(rec, names))
                    continue
                if head[:1] != b"E":
                    return None
                return _decode_rest(body)
            except msgspec.DecodeError:
                return None
    return None


def _fold_rest(result: ScanResult, rest: _Rest, records: int) -> None:
    """The child's last frame folded into `result`, which held `records` records before
    the child's best ones were folded in."""
    index = result.index
    index.records = records + rest.records
    superseded = index.superseded
    for rid, bits in rest.superseded.items():
        superseded[rid] = superseded.get(rid, 0) | bits
    index.twins += rest.twins
    result.bad += rest.bad
    result.headers += rest.headers
    result.headerless += rest.headerless
    result.secrets += rest.secrets
    result.future += rest.future
    result.lines += rest.lines
    if rest.superseding is not None:  # after the first half's: the file's order
        result.superseding = (result.superseding or []) + rest.superseding


def _interned(rec: Described, names: dict[object, object]) -> Described:
    """`rec` holding the kind, scope and confidence objects met before, when equal: a
    decode makes new ones for each record, a few distinct values held by hundreds of
    thousands of records (memory, tests/local/test_bounded_memory.py). (A confidence of
    zero is left as it is: -0.0 would be taken for 0.0.)"""
    force = msgspec.structs.force_setattr
    force(rec, "kind", names.setdefault(rec.kind, rec.kind))
    force(rec, "scope", names.setdefault(rec.scope, rec.scope))
    if rec.confidence:
        force(rec, "confidence", names.setdefault(rec.confidence, rec.confidence))
    return rec


def _write_frame(fd: int, kind: bytes, body: bytes) -> None:
    data = memoryview(kind + len(body).to_bytes(8, "big") + body)
    while data:
        data = data[os.write(fd, data) :]
