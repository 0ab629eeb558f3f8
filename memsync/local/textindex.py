"""The full-text index of a memory file: SQLite FTS5, in the state directory.

`TextIndex`, beside the merge index (`memsync.local.fileindex`): one FTS5 row per entry line
(text, tags and scope; porter stemming, so "retries" finds "retry"). It is brought up to
date by reading only the bytes appended since the last refresh (appends and merges only
ever append, SEMANTICS rules 13 and 14), and rebuilt from the start when the file is not
what was indexed (`memsync.local.fileidentity.FileIdentity`). The index only proposes
candidates: `memsync.local.fulltext.recall` checks each against the view.
"""

from __future__ import annotations

import _thread  # its lock alone: `threading` is 0.5 ms of recall's start-up (issue 20)
import os
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Self

import msgspec

from memsync.core.lines import classify
from memsync.core.records import Record
from memsync.local.fileidentity import FileIdentity, identity_of, resumable
from memsync.local.sqlitedb import connect
from memsync.local.storage import private_dirs, read_chunks

__all__ = ["COMMON", "TextIndex", "body_of", "fts5_available", "searchable", "words"]

COMMON = 2000
"""A word held by more lines than this is common: `TextIndex.candidates` ranks its lines a
window of the latest at a time instead of all at once (the cost of a recall follows this,
not the number of lines holding the word)."""
OPTIMIZE_AFTER = 4 << 20
"""A refresh that read this many bytes (a build, a rebuild, a large merge appended) leaves
the index merged into one segment (FTS5 `optimize`), so that the small refreshes after
appends stay small."""
_MAX_ROWID, _MIN_ROWID = 2**63 - 1, -(2**63)

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
    """Whether this Python's SQLite was built with FTS5: whether it knows
    `fts5_source_id()`, which FTS5's initialisation registers with the `fts5` module (0.04
    ms, where creating an FTS5 table in memory took 0.35 ms of each `recall`, issue 20)."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("SELECT fts5_source_id()")
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
        self.db_path = db_path
        # Its errors are OSErrors naming db_path; another server's refresh may hold the
        # write lock while it indexes a large file: wait for it.
        self._db = connect(db_path, timeout=30.0, check_same_thread=False)
        self._db.executescript(_SCHEMA)
        self._lock = _thread.allocate_lock()
        self.bytes_read = 0
        self.optimize_after = OPTIMIZE_AFTER
        """A refresh that read at least this many bytes merges the index into one segment."""

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
                if read >= self.optimize_after:
                    # A bulk read leaves FTS5 many segments that later small refreshes
                    # would merge: a recall after an append then paid up to 0.4 s (23 MB
                    # written, at 1M lines). One merge now, in the same transaction: 1.3 s
                    # at 1M, against a build of several seconds.
                    self._db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
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

    def candidates(
        self, query: str, batch: int = 64, common: int | None = None
    ) -> Iterator[tuple[str, int, float, str]]:
        """(id, created_at in us, score, body) of entry lines matching any word of `query`,
        best first (BM25; a higher score is better).

        A word held by more than `common` lines (default `COMMON`) is common: ranking
        every line that holds it would cost time in proportion to them (bm25 of each,
        0.25 s for 230,000 matches). So, as a common-terms query does:

        - no common word in the query: every matching line, best first, as always;
        - rare and common words: first every line holding a rare word, best first by
          BM25 over the rare words only; then the lines holding only common words, as
          below;
        - the common words: the `common` most recently indexed lines that hold one (the
          latest in the file), best first by how many of those words each holds, then
          the newer (`_windows`); then the next `common` older ones (more at a time, as
          the pages grow), and so on. One common word alone: every line holding it, the
          newest first (the same order, `_newest`).

        Every matching line comes at last (recall keeps reading while its candidates are
        stale or filtered out); only the order changes, and only for common words. The
        cost follows `common` and the query's words, not the matches."""
        wanted = words(query)
        if not wanted:
            return
        cap = COMMON if common is None else common
        rare: list[str] = []
        frequent: list[str] = []
        for w in wanted:
            phrase = '"' + w.replace('"', '""') + '"'
            (frequent if self._holders(phrase, cap + 1) > cap else rare).append(phrase)
        if rare:
            yield from self._ranked(" OR ".join(rare), batch)
        if len(frequent) == 1:  # each line holds it once: the window's order is the newest
            yield from self._newest(frequent[0], batch)
        elif frequent:
            yield from self._windows(frequent, cap)

    def _holders(self, match: str, most: int) -> int:
        """How many lines match `match`, counted up to `most` (a bounded count)."""
        with self._lock:
            (n,) = self._db.execute(
                "SELECT count(*) FROM (SELECT 1 FROM docs WHERE docs MATCH ? LIMIT ?)",
                (match, most),
            ).fetchone()
        return int(n)

    def _ranked(self, match: str, batch: int) -> Iterator[tuple[str, int, float, str]]:
        """Every line matching `match`, best first, a page of `batch` at a time: ranking
        with a LIMIT keeps only the best rows, where a full sort of every match costs
        milliseconds per ten thousand matches."""
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

    def _newest(self, phrase: str, batch: int) -> Iterator[tuple[str, int, float, str]]:
        """Every line matching `phrase`, the newest first, a page of `batch` at a time (then
        larger pages): `_windows`' order for one phrase (every line holds it once, so the
        newer line comes first), read as far as the caller goes instead of a whole window
        counted and sorted (2 ms of a recall of one common word at a million records)."""
        newest = _MAX_ROWID  # exclusive
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT rowid, id, ts, body FROM docs WHERE docs MATCH ? AND rowid < ?"
                    " ORDER BY rowid DESC LIMIT ?",
                    (phrase, newest, batch),
                ).fetchall()
            for _, rid, ts, body in rows:
                yield str(rid), int(ts), 1.0, str(body)
            if len(rows) < batch:
                return
            newest = int(rows[-1][0])
            batch *= 4  # many stale hits in a row: take bigger pages

    def _windows(self, phrases: list[str], size: int) -> Iterator[tuple[str, int, float, str]]:
        """Every line matching one of `phrases`, newest windows first: the `size` latest
        lines, best first, then the next older window (four times larger), and so on.

        Within a window a line is scored by how many of the phrases it holds, and a tie
        goes to the newer line (as the plain scan without FTS5 scores, `fulltext._scan`):
        a common word says little about a line, and BM25 would first count every line in
        the index holding it (its IDF, 8 ms for 230,000 lines), the most of a recall's
        time at a million records. Each window is bounded by rowids (lines are indexed in
        file order), so SQLite reads only its lines; a line's id, instant and body are
        read only when the caller gets that far (it usually stops after a few)."""
        match = " OR ".join(phrases)
        newest = _MAX_ROWID  # the window's upper bound, inclusive
        while True:
            held: Counter[int] = Counter()
            with self._lock:
                edge = self._db.execute(
                    "SELECT rowid FROM docs WHERE docs MATCH ? AND rowid <= ?"
                    " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                    (match, newest, size),
                ).fetchone()
                oldest = _MIN_ROWID if edge is None else int(edge[0])  # exclusive
                for phrase in phrases:
                    held.update(
                        rowid
                        for (rowid,) in self._db.execute(
                            "SELECT rowid FROM docs WHERE docs MATCH ? AND rowid <= ? AND rowid > ?",
                            (phrase, newest, oldest),
                        )
                    )
            ranked = sorted(held.items(), key=lambda r: (-r[1], -r[0]))
            for rowid, count in ranked:
                with self._lock:
                    row = self._db.execute(
                        "SELECT id, ts, body FROM docs WHERE rowid = ?", (rowid,)
                    ).fetchone()
                if row is not None:  # (None: deleted by a rebuild since, under our feet)
                    yield str(row[0]), int(row[1]), float(count), str(row[2])
            if edge is None:
                return
            newest = oldest
            size *= 4  # many stale hits: take bigger windows

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
