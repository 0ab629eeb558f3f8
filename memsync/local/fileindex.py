"""A persistent index of one memory file, kept in the state directory (SQLite, stdlib).

It lets a merge into a large file cost what changed instead of a re-read of the file: the
digest of every line (the merge's fast path), where each id's records and each
supersession are (so the few records a merge must judge against are read with `pread`),
and how far the file and each merge source have been read.

It is a cache, checked before every use: the file's inode, its size and a hash of the
bytes just before the offset read to must match, or the index is rebuilt from the start.
Deleting it costs one full read of the file and nothing else.
"""

from __future__ import annotations

import bisect
import itertools
import os
import sqlite3
import struct
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import xxhash

from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.core.scan import USUAL_ID as _USUAL_ID
from memsync.core.scan import (
    dest_relevant,
    line_digest,
    may_supersede,
    quick_id,
    superseding_starts,
)
from memsync.core.view import Index
from memsync.errors import LockTimeout
from memsync.local.fileidentity import TAIL_BYTES, tail_hash
from memsync.local.lock import held
from memsync.local.sqlitedb import connect
from memsync.local.storage import (
    Chunk,
    errors_named,
    open_for_reading,
    read_chunks_fd,
    read_tail,
)

__all__ = [
    "BUILD_WAIT",
    "TAIL_BYTES",
    "Cursor",
    "DigestStore",
    "FileIndex",
    "build_lock",
    "cursor_at",
    "cursor_valid",
    "tail_hash",
    "wait_for_build",
]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lines (h1 INTEGER PRIMARY KEY, h2 INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS recs (id TEXT NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sups (target TEXT NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS sups_target ON sups (target);
CREATE TABLE IF NOT EXISTS cursors (
    name TEXT PRIMARY KEY, ino INTEGER, offset INTEGER, line INTEGER, tail BLOB
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS held (h1 INTEGER PRIMARY KEY, source TEXT, line INTEGER, raw BLOB);
"""
_RECS_INDEX = "CREATE INDEX IF NOT EXISTS recs_id ON recs (id)"

_BATCH = 900  # SQLite's default limit on host parameters is 999
_JOIN_AFTER = 2_000  # digests asked about at once: past this, one join beats IN lists


def _usual_ids(joined: bytes, count: int) -> list[str] | None:
    """The id of each of the `count` lines `joined` by "\\n", when each starts the usual
    way (`{"id": "...`, no escape in the id, valid UTF-8): one regular expression and one
    decode for the chunk, no Python step per line. None when any line does not
    (`quick_id` decides a line at a time)."""
    found = _USUAL_ID.findall(b"\n" + joined)  # the regex needs the "\\n" before a line
    if len(found) != count:
        return None
    try:
        return b"\n".join(found).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None


_MASK64 = (1 << 64) - 1


def _split_digest(digest: int) -> tuple[int, int]:
    """A 128-bit digest as two signed 64-bit integers (SQLite's INTEGER): the first is the
    row key, the second is checked on lookup, so the full 128 bits decide a match."""
    hi, lo = digest >> 64, digest & _MASK64
    return (hi - (1 << 64) if hi >= 1 << 63 else hi, lo - (1 << 64) if lo >= 1 << 63 else lo)


def _join_digest(h1: int, h2: int) -> int:
    return ((h1 & _MASK64) << 64) | (h2 & _MASK64)


BUILD_WAIT = 600.0
"""How long opening an index waits for a builder of it (`memsync.local.indexbuild`: a
million lines take about 7 s) before giving up."""


def build_lock(db_path: Path) -> Path:
    """The lock a builder of index `db_path` holds while it runs (`StateDir.merge_index_build`)."""
    return db_path.with_suffix(".build")


def wait_for_build(db_path: Path, timeout: float = BUILD_WAIT) -> None:
    """Wait until no builder holds index `db_path` (none ever ran: no lock file, no wait).

    Raises:
        LockTimeout: a builder held it for longer than `timeout` seconds.
    """
    lock = build_lock(db_path)
    if not lock.exists():
        return
    busy = lambda: LockTimeout(f"{db_path}: still being built (waited {timeout:g} s)")
    with held(lock, timeout, busy):
        pass


@dataclass(frozen=True, slots=True)
class Cursor:
    """How far a file has been read: its inode, the offset and line number reached, and
    the hash of the `TAIL_BYTES` before the offset."""

    ino: int
    offset: int
    line: int
    tail: bytes


def cursor_valid(path: Path, cursor: Cursor) -> bool:
    """Whether `path` still holds, up to `cursor.offset`, what was read (same inode, not
    shorter, the same bytes just before the offset): only then may reading resume there."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    if st.st_ino != cursor.ino or st.st_size < cursor.offset:
        return False
    return tail_hash(read_tail(path, cursor.offset, TAIL_BYTES)) == cursor.tail


def cursor_at(path: Path, offset: int, line: int) -> Cursor:
    """A cursor for `path` read up to `offset` (line number `line` next)."""
    return Cursor(
        os.stat(path).st_ino, offset, line, tail_hash(read_tail(path, offset, TAIL_BYTES))
    )


class _Store:
    """An SQLite database in the state directory (mode 0600, write-ahead log), closed by
    `close()` or at the end of a `with` block."""

    def __init__(self, db_path: Path) -> None:
        self._db = connect(db_path)  # its errors are OSErrors naming db_path
        self._db.execute("PRAGMA temp_store=MEMORY")  # `_lookup`'s table of asked digests

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileIndex(_Store):
    """The persistent index of memory file `path`, stored in `db_path`.

    Call `refresh()` (under the file's lock when writing) before asking it anything.
    """

    def __init__(self, path: Path, db_path: Path, *, building: bool = False) -> None:
        if not building:
            wait_for_build(db_path)
        super().__init__(db_path)
        self.path = path
        self.db_path = db_path
        # 16 MiB: as fast as 64 here (the OS caches the file too), and 48 MB less (issue 14).
        self._db.execute("PRAGMA cache_size=-16384")
        self._db.executescript(_SCHEMA)
        self._db.execute(_RECS_INDEX)
        self.bytes_read = 0

    # The file itself

    def _meta(self) -> Cursor | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'file'").fetchone()
        if row is None:
            return None
        ino, offset, line, tail = row[0].split(":")
        return Cursor(int(ino), int(offset), int(line), bytes.fromhex(tail))

    def _set_meta(self, cursor: Cursor) -> None:
        value = f"{cursor.ino}:{cursor.offset}:{cursor.line}:{cursor.tail.hex()}"
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('file', ?)", (value,))

    @property
    def offset(self) -> int:
        meta = self._meta()
        return 0 if meta is None else meta.offset

    def behind(self) -> int:
        """How many bytes of the file `refresh` would read now: all of them if the index
        is stale (never built, or the file replaced or rewritten), which is then reset
        here, source cursors included, as `refresh` would reset it; else what the file
        gained since the last refresh."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return 0
        meta = self._meta()
        if meta is None or not cursor_valid(self.path, meta):
            self._reset()
            return size
        return max(0, size - meta.offset)

    def refresh(self, stop: int | None = None, then: Callable[[], None] | None = None) -> int:
        """Catch up with the file: index the lines appended since the last refresh (those
        that end by byte `stop`, if given), or everything again if the file was replaced
        or rewritten; `then()` runs in the same transaction (`indexbuild` sets the
        sources' cursors there). Return the bytes read.

        The file's inode and tail hash are taken from the descriptor the lines were read
        from: a file replaced meanwhile leaves an index of the old inode, which the next
        refresh finds stale, never one that pairs the old lines with the new inode."""
        meta = self._meta()
        if not self.path.exists():
            self._reset()
            return 0
        if meta is None or not cursor_valid(self.path, meta):
            self._reset()
            meta = Cursor(os.stat(self.path).st_ino, 0, 1, b"")
        offset, line = meta.offset, meta.line
        read = 0
        fd = open_for_reading(self.path)
        try:
            # In bulk (sorted inserts, and the id index made once at the end) when the lines
            # to read outnumber, by their bytes, those indexed already: a first build, or
            # a merge of partitions that brings the index up to date once.
            end = os.fstat(fd).st_size if stop is None else stop
            bulk = end - offset > offset
            self._db.execute("BEGIN")
            try:
                if bulk:
                    self._db.execute("DROP INDEX IF EXISTS recs_id")
                with errors_named(self.path):
                    for chunk in read_chunks_fd(fd, offset, line, stop):
                        self._add_chunk(chunk, sort=bulk)
                        read += chunk.end - chunk.start
                        offset, line = chunk.end, chunk.first_line + len(chunk.lines)
                    tail = os.pread(fd, min(offset, TAIL_BYTES), offset - min(offset, TAIL_BYTES))
                    ino = os.fstat(fd).st_ino
                if bulk:
                    self._db.execute(_RECS_INDEX)
                self._set_meta(Cursor(ino, offset, line, tail_hash(tail)))
                if then is not None:
                    then()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        finally:
            os.close(fd)
        self.bytes_read += read
        return read

    def _reset(self) -> None:
        # The file is not what was indexed (replaced, rewritten, deleted): what was read
        # from each source may not be in it any more, so the sources are read again too.
        self._db.execute("DELETE FROM cursors")
        self._db.executescript(
            "BEGIN; DELETE FROM lines; DELETE FROM recs; DELETE FROM sups;"
            " DELETE FROM meta; COMMIT;"
        )

    def _add_chunk(self, chunk: Chunk, *, sort: bool = False) -> None:
        lines = chunk.lines
        # Both halves of each line's digest as signed 64-bit integers, in C: the digest's
        # 16 bytes are its big-endian value (`_split_digest` says the same in Python).
        rows = list(struct.iter_unpack(">qq", b"".join(map(xxhash.xxh3_128_digest, lines))))
        if sort:
            rows.sort()
        # A line whose first half collides with another's is simply not recorded: lookups
        # compare both halves, so it is parsed and judged like any unknown line.
        self._db.executemany("INSERT OR IGNORE INTO lines VALUES (?, ?)", rows)
        sizes = list(map(len, lines))
        offsets = chunk.starts()
        joined = b"\n".join(lines)  # not `chunk.data`: a long first line is cut in `lines`
        ids = _usual_ids(joined, len(lines))
        if ids is None:
            self._add_each(chunk, offsets, sizes)
            return
        self._db.executemany(
            "INSERT INTO recs VALUES (?, ?, ?)", zip(ids, offsets, sizes, strict=True)
        )
        sups = []
        starts = list(itertools.accumulate((n + 1 for n in sizes), initial=0))  # in `joined`
        for at in superseding_starts(joined + b"\n"):
            i = bisect.bisect_left(starts, at)
            parsed = classify(lines[i])
            if type(parsed) is Record and parsed.supersedes is not None:
                sups.append((parsed.supersedes, offsets[i], sizes[i]))
        if sups:
            self._db.executemany("INSERT INTO sups VALUES (?, ?, ?)", sups)

    def _add_each(self, chunk: Chunk, offsets: list[int], sizes: list[int]) -> None:
        """`_add_chunk`'s records and supersessions, a line at a time: a chunk with a line
        that does not start the usual way (a header, a bad line, another key first)."""
        recs: list[tuple[str, int, int]] = []
        sups: list[tuple[str, int, int]] = []
        for i, raw in enumerate(chunk.lines):
            rid = quick_id(raw)
            if rid is not None and not may_supersede(raw):
                recs.append((rid, offsets[i], sizes[i]))
            else:  # a header of another format raises, naming the file (rule 2)
                parsed = classify(raw, source=str(self.path), line_no=chunk.first_line + i)
                if type(parsed) is Record:
                    recs.append((parsed.id, offsets[i], sizes[i]))
                    if parsed.supersedes is not None:
                        sups.append((parsed.supersedes, offsets[i], sizes[i]))
        self._db.executemany("INSERT INTO recs VALUES (?, ?, ?)", recs)
        if sups:
            self._db.executemany("INSERT INTO sups VALUES (?, ?, ?)", sups)

    # Questions a merge asks

    def intersection(self, digests: list[int], /) -> Collection[int]:
        """Which of `digests` are lines of the file (the answer to `core.merge.Known`).

        Asked in SQLite, never from a copy of every digest in memory: that copy grew with
        the file (80 MB a million lines), and its small objects, made between a merge's
        batches, kept the memory of each batch from being given back (issue 14)."""
        return _lookup(self._db, digests)

    def relevant(self, ids: Iterable[str], targets: Iterable[str] = ()) -> Index:
        """An index of the file's records of `ids` and of entries superseding `targets`,
        read with `pread` at the offsets the index holds (see `dest_relevant`)."""
        ids, targets = set(ids), set(targets)
        spots: set[tuple[int, int]] = set()
        for table, column, names in (("recs", "id", ids), ("sups", "target", targets)):
            names_list = sorted(names)
            for i in range(0, len(names_list), _BATCH):
                part = names_list[i : i + _BATCH]
                marks = ",".join("?" * len(part))
                sql = f"SELECT off, len FROM {table} WHERE {column} IN ({marks})"  # noqa: S608 (fixed names)
                spots.update(self._db.execute(sql, part))
        index = Index()
        if not spots:
            return index
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for off, size in sorted(spots):
                raw = os.pread(fd, size, off)
                self.bytes_read += len(raw)
                parsed = classify(raw)
                if type(parsed) is Record and dest_relevant(parsed, ids, targets):
                    index.add(parsed)
        finally:
            os.close(fd)
        return index

    # Cursors of sources read into this file

    def cursor(self, name: str) -> Cursor | None:
        row = self._db.execute(
            "SELECT ino, offset, line, tail FROM cursors WHERE name = ?", (name,)
        ).fetchone()
        return None if row is None else Cursor(row[0], row[1], row[2], row[3])

    def set_cursor(self, name: str, cursor: Cursor) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO cursors VALUES (?, ?, ?, ?, ?)",
            (name, cursor.ino, cursor.offset, cursor.line, cursor.tail),
        )

    def digests(self) -> Iterator[int]:
        """Every line digest (for tests and diagnostics)."""
        for h1, h2 in self._db.execute("SELECT h1, h2 FROM lines"):
            yield _join_digest(h1, h2)

    # Records held because they are dated too far ahead (merged once their time comes)

    def held(self) -> list[tuple[str, int, bytes]]:
        """The held lines: (source, line number, raw)."""
        rows = self._db.execute("SELECT source, line, raw FROM held ORDER BY source, line")
        return [(str(s), int(n), bytes(r)) for s, n, r in rows]

    def set_held(self, lines: Iterable[tuple[str, int, bytes]]) -> None:
        """Replace the held lines."""
        self._db.execute("DELETE FROM held")
        self._db.executemany(
            "INSERT OR REPLACE INTO held VALUES (?, ?, ?, ?)",
            [(_split_digest(line_digest(raw))[0], s, n, raw) for s, n, raw in lines],
        )


def _lookup(db: sqlite3.Connection, digests: list[int]) -> set[int]:
    """Which of `digests` table `lines` of `db` holds, comparing all 128 bits. Many at once
    (a chunk of a source read from its start) go through a temporary table and one join."""
    found: set[int] = set()
    if len(digests) > _JOIN_AFTER:
        db.execute("CREATE TEMP TABLE IF NOT EXISTS asked (h1 INTEGER, h2 INTEGER)")
        db.execute("DELETE FROM asked")
        db.executemany("INSERT INTO asked VALUES (?, ?)", map(_split_digest, digests))
        # CROSS JOIN: SQLite keeps this order, each asked digest looked up by its row key.
        sql = "SELECT a.h1, a.h2 FROM asked a CROSS JOIN lines l ON l.h1 = a.h1 AND l.h2 = a.h2"
        found.update(_join_digest(h1, h2) for h1, h2 in db.execute(sql))
        db.execute("DELETE FROM asked")
        return found
    wanted = set(digests)
    for i in range(0, len(digests), _BATCH):
        keys = [_split_digest(d)[0] for d in digests[i : i + _BATCH]]
        marks = ",".join("?" * len(keys))
        sql = f"SELECT h1, h2 FROM lines WHERE h1 IN ({marks})"  # noqa: S608 (placeholders)
        for h1, h2 in db.execute(sql, keys):
            digest = _join_digest(h1, h2)
            if digest in wanted:
                found.add(digest)
    return found


class DigestStore(_Store):
    """A persistent set of line digests (SQLite): the lines a hub is known to hold, so
    that a push sends only what the hub lacks. A cache like `FileIndex`: losing it costs a
    re-read of the hub, never a lost record."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(db_path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS lines (h1 INTEGER PRIMARY KEY, h2 INTEGER, seen INTEGER)"
        )

    def add(self, digests: Iterable[int], seen: int = 0) -> None:
        """Record that the hub holds these lines, first seen there at `seen` (microseconds;
        a line already recorded keeps its first time)."""
        rows = sorted((*_split_digest(d), seen) for d in digests)
        self._db.execute("BEGIN")
        self._db.executemany("INSERT OR IGNORE INTO lines VALUES (?, ?, ?)", rows)
        self._db.execute("COMMIT")

    def seen_at(self, raw: bytes) -> int | None:
        """When the line `raw` was first seen in the hub, or None if it never was."""
        h1, h2 = _split_digest(line_digest(raw))
        row = self._db.execute("SELECT h2, seen FROM lines WHERE h1 = ?", (h1,)).fetchone()
        return None if row is None or row[0] != h2 else int(row[1])

    def intersection(self, digests: list[int], /) -> set[int]:
        """Which of `digests` the store holds."""
        return _lookup(self._db, digests)

    def clear(self) -> None:
        self._db.execute("DELETE FROM lines")
