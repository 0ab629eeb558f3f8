"""The full-text index of a memory file: SQLite FTS5, in the state directory.

`TextIndex`, beside the merge index (`memsync.local.fileindex`): one FTS5 row per entry line
(text, tags and scope; porter stemming, so "retries" finds "retry"). It is brought up to
date by reading only the bytes appended since the last refresh (appends and merges only
ever append, SEMANTICS rules 13 and 14), and rebuilt from the start when the file is not
what was indexed (`memsync.local.livecache.FileIdentity`). The index only proposes
candidates: `memsync.local.fulltext.recall` checks each against the view.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Self

import msgspec

from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.local.livecache import FileIdentity, identity_of, resumable
from memsync.local.sqlitedb import connect
from memsync.local.storage import private_dirs, read_chunks

__all__ = ["TextIndex", "body_of", "fts5_available", "searchable", "words"]

_WORD = re.compile(r"\w+", re.UNICODE)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(
    body, id UNINDEXED, ts UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


class _Searchable(msgspec.Struct, gc=False):
    """What of an entry line is searched: its text, tags and scope."""

    text: str = ""
    scope: str = "global"
    tags: list[str] = []


searchable = msgspec.json.Decoder(_Searchable).decode
"""What of an entry line is searched (its text, tags and scope), decoded from the line."""


@cache
def fts5_available() -> bool:
    """Whether this Python's SQLite was built with FTS5."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        db.close()


class TextIndex:
    """The FTS5 index of memory file `path`, stored in `db_path` (0600, write-ahead log).

    Call `refresh()` before searching. Several processes may share it: a refresh takes
    SQLite's write lock first and re-reads where the last one stopped under it, so two
    servers never index the same lines twice.
    """

    def __init__(self, path: Path, db_path: Path) -> None:
        for folder in (db_path.parent.parent, db_path.parent):  # the state dir, then ours
            private_dirs(folder)
        self.path = path
        # Its errors are OSErrors naming db_path; another server's refresh may hold the
        # write lock while it indexes a large file: wait for it.
        self._db = connect(db_path, timeout=30.0, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self.bytes_read = 0

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _meta(self) -> FileIdentity | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'file'").fetchone()
        return None if row is None else FileIdentity.decode(row[0])

    def refresh(self) -> int:
        """Index the entry lines appended since the last refresh, or every line again when
        the file was rewritten or replaced. Return the bytes read."""
        with self._lock:
            st = os.stat(self.path)
            seen = self._meta()
            if (
                seen is not None
                and seen.ino == st.st_ino
                and seen.offset == st.st_size
                and resumable(self.path, seen, st)
            ):
                return 0  # the common case: nothing new, no write lock taken
            self._db.execute("BEGIN IMMEDIATE")
            try:
                read = self._catch_up()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self.bytes_read += read
            return read

    def _catch_up(self) -> int:
        st = os.stat(self.path)
        seen = self._meta()  # again, under the write lock: another process may have moved it
        if not resumable(self.path, seen, st):
            self._db.execute("DELETE FROM docs")
            seen = None
        offset, line = (seen.offset, seen.line) if seen else (0, 1)
        read = 0
        for chunk in read_chunks(self.path, offset, line):
            self._db.executemany(
                "INSERT INTO docs (body, id, ts) VALUES (?, ?, ?)", _rows(chunk.lines)
            )
            read += chunk.end - chunk.start
            offset, line = chunk.end, chunk.first_line + len(chunk.lines)
        ident = identity_of(self.path, st.st_ino, offset, line)
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('file', ?)", (ident.encode(),))
        return read

    def candidates(self, query: str, batch: int = 64) -> Iterator[tuple[str, int, float, str]]:
        """(id, created_at in us, score, body) of entry lines matching any word of `query`,
        best first (BM25; a higher score is better). Read a page of `batch` at a time:
        ranking with a LIMIT keeps only the best rows, where a full sort of every match
        costs milliseconds per ten thousand matches."""
        wanted = words(query)
        if not wanted:
            return
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in wanted)
        offset = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT id, ts, rank, body FROM docs WHERE docs MATCH ? ORDER BY rank"
                    " LIMIT ? OFFSET ?",
                    (match, batch, offset),
                ).fetchall()
            for rid, ts, rank, body in rows:
                yield str(rid), int(ts), -float(rank), str(body)
            if len(rows) < batch:
                return
            offset += batch
            batch *= 4  # many stale hits in a row: take bigger pages

    def rows(self) -> list[tuple[str, int, str]]:
        """Every indexed (id, created_at, body), sorted (for tests and diagnostics)."""
        with self._lock:
            return sorted(
                (str(i), int(t), str(b))
                for i, t, b in self._db.execute("SELECT id, ts, body FROM docs")
            )


def _rows(lines: Sequence[bytes]) -> Iterable[tuple[str, str, int]]:
    """The FTS rows of the entry lines among `lines`: tombstones, headers and bad lines
    have nothing to search (rule 4: a bad line is skipped, never an error)."""
    for raw in lines:
        try:
            rec = classify(raw)
        except ValueError:
            continue  # an unsupported header: the view reports it, recall need not
        if type(rec) is not Record or rec.deleted:
            continue
        yield (body_of(rec.raw), rec.id, rec.ts)


def body_of(raw: bytes) -> str:
    """What is searched of entry line `raw`: its text, tags and scope, as one string (the
    index's `body`)."""
    s = searchable(raw)
    return " ".join([s.text, *s.tags, s.scope])


def words(text: str) -> list[str]:
    """The distinct words of `text`, lowercased, in order."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
