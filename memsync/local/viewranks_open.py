"""Finding, checking and opening the quick part of a persistent view
(`memsync.local.viewranks`, issue 20), and the answers the commands take from it."""

from __future__ import annotations

import contextlib
import mmap
import os
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import msgspec
import xxhash

from memsync.core.lines import BadLine, Invalid, classify
from memsync.core.records import Located, Record
from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER
from memsync.local.asides import asides_of
from memsync.local.foldcheck import matches_identity, verified
from memsync.local.statedir import StateDir
from memsync.local.viewranks import (
    _BLOCK,
    _COLUMNS,
    _LENGTH_BITS,
    _MAGIC,
    _PATH_BYTES,
    FENCE,
    FORMAT,
    MIN_BUDGET,
    Damaged,
    Quick,
    _decode_head,
)
from memsync.local.viewranks_read import Pages

__all__ = [
    "Stores",
    "discard",
    "fold_since",
    "head_size",
    "newest_stored",
    "open_quick",
    "opened_quick",
    "store_quick",
    "stored_lines",
    "stored_prompt",
]


class Stores(Protocol):
    """Where the persistent views are, and when they are used (`viewstore.ViewStore`)."""

    @property
    def state(self) -> StateDir: ...
    @property
    def min_bytes(self) -> int: ...
    @property
    def save_after(self) -> int: ...


def head_size(target: Path) -> int | None:
    """How many bytes of its memory file the quick part `target` folded, when its header
    is whole (its columns are not read); None else."""
    quick = _opened(target, "")
    return None if quick is None else quick.head.size


def stored_prompt(
    store: Stores,
    path: Path,
    scope: str | None,
    max_chars: int,
    now: int,
    *,
    markdown: bool = False,
) -> tuple[str, list[BadLine], list[str]] | None:
    """The `prompt` block of memory file `path` at `now` from its quick part in `store`,
    with the bad lines and the files without a header that a fold reports; None when the
    quick part cannot answer (`Quick.prompt`; invalid, damaged, or more than
    `store.save_after` bytes behind: the fold then writes it again). Raises OSError naming
    the file, and UnsupportedFormat (rule 2)."""
    if max_chars < MIN_BUDGET:
        return None
    with opened_quick(store, path) as quick:
        text = None if quick is None else quick.prompt(scope, max_chars, now, markdown=markdown)
        return None if quick is None or text is None else (text, quick.bad, quick.headerless)
    return None  # damaged (`opened_quick`)


@contextmanager
def stored_lines(
    store: Stores, path: Path, now: int
) -> Iterator[tuple[Iterator[bytes], list[BadLine], list[str]] | None]:
    """The lines of the live current versions of memory file `path` at `now`, in rule 12's
    order (`Quick.shown`: what `show --json` prints), read where they lie, with the bad
    lines and the files without a header that a fold reports; None when the quick part
    cannot answer (as `stored_prompt`). The file stays open while the lines are read.
    Raises OSError naming the file, and UnsupportedFormat (rule 2)."""
    from memsync.local.placed import lines_at

    places = None
    with opened_quick(store, path) as quick:
        places = None if quick is None else quick.shown(now)
        if quick is not None and places is not None:
            yield lines_at(places, [path], [quick.fd]), quick.bad, quick.headerless
            return
    yield None  # no quick part, a `now` before its floor, or damaged


@contextmanager
def opened_quick(store: Stores, path: Path) -> Iterator[Quick | None]:
    """The quick part in `store` of memory file `path` (`store_quick`; None when there is
    none to use), the file open (`Quick.fd`) while it is used; first, the lines a killed
    compaction left aside are copied back (rule 16). A block found damaged while it is
    used (`Damaged`) removes the quick part and ends the block without an answer: the
    caller's fold answers, and writes a new one. Raises OSError naming the file, and
    UnsupportedFormat (rule 2)."""
    from memsync.local.storage import errors_named, open_for_reading

    if asides_of(path):  # lines a killed compaction left aside (rule 16)
        from memsync.local.drain import recover_after_crash  # (start-up: nearly never)

        recover_after_crash(path)
    fd = open_for_reading(path)
    try:
        with errors_named(path):
            quick = store_quick(store, path, fd)
            try:
                yield quick
            except Damaged:
                discard(store.state.view_ranks(path))
    finally:
        os.close(fd)


def store_quick(store: Stores, path: Path, fd: int) -> Quick | None:
    """The quick part in `store` of the memory file open as `fd` (`open_quick`), when the
    file is large enough to have one and it is at most `store.save_after` bytes behind."""
    if os.fstat(fd).st_size < store.min_bytes:
        return None
    state = store.state
    return open_quick(
        state.view_ranks(path), state.view_seen(path), path, fd, str(path), store.save_after
    )


def newest_stored(
    target: Path, seen: Path, path: Path, fd: int, rid: str
) -> tuple[int | None, int] | None:
    """`ViewStore.newest` from the quick part `target` (its check's note: `seen`): the
    newest `created_at` of any record of `rid` in the bytes it folded (None: none), and
    how many bytes that is; None when it is not valid for the file open as `fd` (at
    `path`)."""
    quick = open_quick(target, seen, path, fd, str(path), None, fold=False)
    if quick is None:
        return None
    try:
        return quick.newest_stored(rid), quick.head.size
    except Damaged:
        discard(target)
        return None


def discard(target: Path) -> None:
    """Remove a damaged quick part (`Damaged`): else its whole header would keep it
    until the store is next written (`ViewStore.save` writes one that is missing)."""
    with contextlib.suppress(OSError):
        os.unlink(target)


def open_quick(
    target: Path,
    seen: Path,
    path: Path,
    fd: int,
    name: str,
    tail_limit: int | None,
    *,
    fold: bool = True,
) -> Quick | None:
    """The quick part `target` of the memory file open as `fd` (at `path`, reported as
    `name`) when it is whole and a fold of the file's first bytes (checked, or vouched
    for by the note `seen`: `foldcheck.verified`), and at most
    `tail_limit` bytes (None: any) were appended since; then with the records appended
    since folded (with `fold`). Else None. Raises OSError naming the file for the memory file's own
    errors, UnsupportedFormat for a header of another format appended (rule 2)."""
    quick = _opened(target, name)
    if quick is None:
        return None
    st = os.fstat(fd)
    head = quick.head
    if not matches_identity(head.path, head.dev, head.ino, head.size, head.mtime_ns, path, st):
        return None
    if tail_limit is not None and st.st_size - head.size > tail_limit:
        return None
    if not verified(seen, path, fd, st, head.size, head.digest):
        return None
    quick.fd = fd
    if fold:
        _fold_tail(quick, fd, name)
    return quick


def _opened(target: Path, name: str) -> Quick | None:
    """The quick part `target`, open (`_parse`), when it can be read and its header is
    whole; None else."""
    try:
        fd = os.open(target, os.O_RDONLY)
    except OSError:
        return None
    try:
        quick = _parse(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), name, fd)
    except (OSError, ValueError):  # (ValueError: an empty file)
        quick = None
    if quick is None:
        os.close(fd)
    return quick


def _parse(mm: mmap.mmap, name: str, fd: int) -> Quick | None:
    """The header and columns in `mm`, a mapping of the file open as `fd`, when its header
    is whole; None else. The quick part returned owns `fd` (`Pages`)."""
    start = len(_MAGIC) + _PATH_BYTES + 16 + 4
    if len(mm) < start or mm[: len(_MAGIC)] != _MAGIC:
        return None
    length = int.from_bytes(mm[start - 4 : start], "little")
    named = mm[len(_MAGIC) : len(_MAGIC) + _PATH_BYTES]
    encoded = mm[start : start + length]
    if (
        xxhash.xxh3_128_digest(named + mm[start - 4 : start] + encoded)
        != mm[start - 20 : start - 4]
    ):
        return None
    try:
        head = _decode_head(encoded)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if head.format != FORMAT or len(head.sections) != len(_COLUMNS):
        return None
    begin = start + length
    begin += -begin % 8
    body = memoryview(mm)[begin:]
    if len(head.blocks) != 8 * -(-len(body) // _BLOCK) or len(head.counts) != len(head.scopes):
        return None
    cols: dict[str, memoryview] = {}
    starts: dict[str, int] = {}
    for (column, code), (offset, size) in zip(_COLUMNS, head.sections, strict=True):
        item = array(code).itemsize
        if offset % 8 or size % item or offset + size > len(body):
            return None
        cols[column] = body[offset : offset + size].cast(code)  # type: ignore[call-overload]
        starts[column] = offset
    n = len(cols["flags"])
    per_id = [c for c, _ in _COLUMNS[2:] if not c.startswith(("r_", "e_", "l_", "f_"))]
    if len(cols["offsets"]) != n + 1 or any(len(cols[c]) != n for c in per_id):
        return None
    if len(cols["f_offsets"]) != -(-n // FENCE) + 1:
        return None
    if len(cols["e_row"]) != len(cols["e_exp"]):
        return None
    bad = [BadLine(name, line, reason) for line, reason in head.bad]
    headerless = [name] if head.headerless else []
    pages = Pages(fd, begin, len(body), memoryview(head.blocks))
    return Quick(head, -1, name, cols, starts, pages, body, bad=bad, headerless=headerless)


def _fold_tail(quick: Quick, fd: int, name: str) -> None:
    """The records and bad lines of the complete lines after what `quick` folded, as
    `located._fold` reads them (a record's `at` packs where its line is)."""
    fold_since(quick, fd, name, quick.head.size, quick.head.line)


def fold_since(quick: Quick, fd: int, name: str, offset: int, line: int) -> tuple[int, int]:
    """Fold into `quick` the complete lines of the file open as `fd` from `offset` (line
    number `line`) on: what `quick` folded must end there. Returns where the complete
    lines end and the next line's number (a long-lived reader folds from there next)."""
    from memsync.core.lines import is_header  # (start-up: `forget` folds no line)
    from memsync.local.storage import read_chunks_fd

    end = offset
    for chunk in read_chunks_fd(fd, offset, line):
        end, line = chunk.end, chunk.first_line + len(chunk.lines)
        lines = chunk.lines
        if chunk.first_line == 1 and lines and not is_header(lines[0]):
            quick.headerless = [name]  # (a file that was empty when it was written)
        for n, (raw, at) in enumerate(zip(lines, chunk.starts(), strict=True), chunk.first_line):
            p = classify(raw, source=name, line_no=n)
            if type(p) is Invalid:
                quick.bad.append(BadLine(name, n, p.reason))
            if type(p) is not Record:
                continue
            packed = at << _LENGTH_BITS | len(raw)
            rec = Located(b"", p.id, p.ts, p.deleted, p.user, p.supersedes, p.expires, packed, 0)
            quick.by_id.setdefault(rec.id, []).append(rec)
            if rec.supersedes is not None and not rec.deleted:
                bit = SUPERSEDED_BY_USER if rec.user else SUPERSEDED_BY_INFERRED
                quick.sup[rec.supersedes] = quick.sup.get(rec.supersedes, 0) | bit
    return end, line
