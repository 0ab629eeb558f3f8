"""Recall by full-text search: an SQLite FTS5 index of a memory file, and a cached view.

Two caches, both checked before every use and both cheap to lose:

- `TextIndex`, in the state directory beside the merge index (`memsync.local.fileindex`): one FTS5
  row per entry line (text, tags and scope; porter stemming, so "retries" finds "retry").
  It is brought up to date by reading only the bytes appended since the last refresh
  (appends and merges only ever append, SEMANTICS rules 13 and 14), and rebuilt from the
  start when the file is not what was indexed: another inode or header generation (a
  compaction rewrote it, rule 15), shorter, or other bytes just before the offset read to.
- `LiveCache`, in memory: the per-id summary of the file's records (`core.view.Index`),
  keyed by the file's identity and size and folded forward the same way, so a `recall` or
  a prompt on an unchanged file reads nothing, and on a grown file reads only the new lines.

The index only proposes candidates. Every hit is checked against the view (rules 8 to
11): it is returned only when it is the live current version of its id at `now`, so a
forgotten, superseded or expired entry, or a beaten older version, never comes back.
Where SQLite has no FTS5, `recall` scans the live entries for the query's words instead,
with the same result contract.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Self

import msgspec

from memsync.core.lines import Header, classify
from memsync.core.prompt import scope_matches
from memsync.core.records import Record
from memsync.core.timestamps import format_ts
from memsync.core.view import Index, build_view
from memsync.local.fileindex import TAIL_BYTES, tail_hash
from memsync.local.fresh import now_us
from memsync.local.reading import no_gc, prompt_of
from memsync.local.sqlitedb import connect
from memsync.local.statedir import StateDir, StateDirLike
from memsync.local.storage import private_dirs, read_chunks, read_tail, require_file

__all__ = [
    "LiveCache",
    "RecallHit",
    "TextIndex",
    "fts5_available",
    "live_cache",
    "recall",
    "warm",
]

DEFAULT_LIMIT = 10
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


_decode_searchable = msgspec.json.Decoder(_Searchable).decode


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One live entry found by `recall`, best first. `score` is higher for a better match
    (the negated BM25 rank with FTS5; the count of query words matched without it)."""

    id: str
    kind: str
    text: str
    scope: str
    tags: tuple[str, ...]
    confidence: float
    source: str | None
    created_at: str
    score: float

    def to_json(self) -> dict[str, Any]:
        """The hit as a JSON object (the `recall --json` and MCP `recall` item)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "scope": self.scope,
            "tags": list(self.tags),
            "confidence": self.confidence,
            "source": self.source,
            "created_at": self.created_at,
            "score": round(self.score, 4),
        }


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


# The file's identity: what both caches check before resuming a read at an offset.


@dataclass(frozen=True, slots=True)
class _Identity:
    """Where a read of a file stopped, and what to check before resuming there: the
    inode, the header's generation (new at each rewrite), and the hash of the bytes just
    before the offset."""

    ino: int
    generation: str
    offset: int
    line: int
    tail: bytes

    def encode(self) -> str:
        return f"{self.ino}:{self.generation}:{self.offset}:{self.line}:{self.tail.hex()}"

    @classmethod
    def decode(cls, text: str) -> _Identity:
        ino, gen, offset, line, tail = text.split(":")
        return cls(int(ino), gen, int(offset), int(line), bytes.fromhex(tail))


def _generation(path: Path) -> str:
    """The header's generation token, or "" (no header, or one without a token)."""
    with open(path, "rb") as f:
        first = f.readline(4096)
    if not first.endswith(b"\n"):
        return ""
    try:
        parsed = classify(first.rstrip(b"\n"))
    except ValueError:  # UnsupportedFormat: reading the file will say so
        return ""
    return (parsed.generation or "") if isinstance(parsed, Header) else ""


def _resumable(path: Path, seen: _Identity | None, st: os.stat_result) -> bool:
    """Whether a read that stopped at `seen` may resume: same inode and generation, not
    shorter, and the same bytes just before the offset (else the file was rewritten)."""
    if seen is None or st.st_ino != seen.ino or st.st_size < seen.offset:
        return False
    if seen.offset and _generation(path) != seen.generation:
        return False
    return tail_hash(read_tail(path, seen.offset, TAIL_BYTES)) == seen.tail


def _identity(path: Path, ino: int, offset: int, line: int) -> _Identity:
    gen = _generation(path) if offset else ""
    return _Identity(ino, gen, offset, line, tail_hash(read_tail(path, offset, TAIL_BYTES)))


# The cached view


class LiveCache:
    """The per-id summary of one memory file's records, folded forward as it grows.

    `index()` returns the summary of every complete line now in the file: nothing is read
    when the file's size and identity are unchanged, only the new lines when it grew, and
    everything again when it was rewritten. Thread-safe.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._index = Index()
        self._seen: _Identity | None = None
        self._stat: tuple[int, int, int] | None = None
        self.bytes_read = 0
        self._live: tuple[int, int, list[Record]] | None = None  # (size, valid until, live)
        # The last blocks rendered, by (scope, max_chars), with the live list they were
        # rendered from: a block of an unchanged file costs nothing the second time.
        self._rendered: dict[tuple[str | None, int | None], tuple[list[Record], str]] = {}

    def index(self) -> Index:
        """The summary of the file's records (rules 8 to 10), up to date."""
        with self._lock:
            return self._refresh()

    def live(self, now: int | None = None) -> list[Record]:
        """The view's live records at `now` (rule 12), rebuilt only when the file changed
        or an entry expired since the last call (rule 11)."""
        at = now_us() if now is None else now
        with self._lock:
            index = self._refresh()
            size = self._seen.offset if self._seen else 0
            cached = self._live
            if cached is not None and cached[0] == size and at < cached[1] and now is None:
                return cached[2]
            with no_gc():
                live = build_view(index, at).live
            until = min((r.expires for r in live if r.expires is not None), default=math.inf)
            self._live = (size, int(min(until, 2**62)), live)
            return live

    def prompt(self, scope: str | None, max_chars: int | None) -> str:
        """The memory block for a task in `scope` (`memsync.core.prompt.render_prompt`)
        now, rendered again only when the live records changed (issue 14)."""
        live = self.live()
        key = (scope, max_chars)
        with self._lock:
            hit = self._rendered.get(key)
        if hit is not None and hit[0] is live:
            return hit[1]
        text = prompt_of(live, scope, max_chars)
        with self._lock:
            if len(self._rendered) >= 64:  # many scopes: keep the memory bounded
                self._rendered.clear()
            self._rendered[key] = (live, text)
        return text

    def _refresh(self) -> Index:
        st = os.stat(self.path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self._stat:
            return self._index  # unchanged: nothing to read
        seen = self._seen
        if not _resumable(self.path, seen, st):
            self._index, seen = Index(), None
        offset, line = (seen.offset, seen.line) if seen else (0, 1)
        with no_gc():
            for chunk in read_chunks(self.path, offset, line):
                self._index.fold_lines(
                    chunk.lines, source=str(self.path), first_line=chunk.first_line
                )
                self.bytes_read += chunk.end - chunk.start
                offset, line = chunk.end, chunk.first_line + len(chunk.lines)
        self._seen = _identity(self.path, st.st_ino, offset, line)
        self._stat = key
        return self._index


_CACHES: dict[Path, LiveCache] = {}
_CACHES_LOCK = threading.Lock()


def live_cache(path: Path) -> LiveCache:
    """This process's `LiveCache` of memory file `path` (one per resolved path)."""
    key = path.resolve()
    with _CACHES_LOCK:
        found = _CACHES.get(key)
        if found is None:
            found = _CACHES[key] = LiveCache(key)
        return found


# The full-text index


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

    def _meta(self) -> _Identity | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'file'").fetchone()
        return None if row is None else _Identity.decode(row[0])

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
                and _resumable(self.path, seen, st)
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
        if not _resumable(self.path, seen, st):
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
        ident = _identity(self.path, st.st_ino, offset, line)
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('file', ?)", (ident.encode(),))
        return read

    def candidates(self, query: str, batch: int = 64) -> Iterator[tuple[str, int, float]]:
        """(id, created_at in us, score) of entry lines matching any word of `query`,
        best first (BM25; a higher score is better). Read a page of `batch` at a time:
        ranking with a LIMIT keeps only the best rows, where a full sort of every match
        costs milliseconds per ten thousand matches."""
        words = _words(query)
        if not words:
            return
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        offset = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT id, ts, rank FROM docs WHERE docs MATCH ? ORDER BY rank"
                    " LIMIT ? OFFSET ?",
                    (match, batch, offset),
                ).fetchall()
            for rid, ts, rank in rows:
                yield str(rid), int(ts), -float(rank)
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
        s = _decode_searchable(rec.raw)
        yield (" ".join([s.text, *s.tags, s.scope]), rec.id, rec.ts)


def _words(text: str) -> list[str]:
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))


_SUFFIXES = ("ies", "ied", "ing", "es", "ed", "s")


def _stem(word: str) -> str:
    """A crude stemmer for the fallback scan: enough that "retries" meets "retry"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("y") and len(word) > 3 else word


# recall itself


@dataclass(frozen=True, slots=True)
class _Filter:
    scope: str | None
    kinds: frozenset[str]
    min_confidence: float

    def keeps(self, obj: dict[str, Any]) -> bool:
        if self.kinds and obj["kind"] not in self.kinds:
            return False
        if float(obj.get("confidence", 1.0)) < self.min_confidence:
            return False
        return self.scope is None or scope_matches(obj.get("scope", "global"), self.scope)


def _hit(rec: Record, score: float) -> RecallHit:
    obj = rec.fields()
    return RecallHit(
        id=rec.id,
        kind=obj["kind"],
        text=obj["text"],
        scope=obj.get("scope", "global"),
        tags=tuple(obj.get("tags") or ()),
        confidence=float(obj.get("confidence", 1.0)),
        source=obj.get("source"),
        created_at=format_ts(rec.ts),
        score=score,
    )


def recall(
    path: str | os.PathLike[str],
    query: str,
    *,
    scope: str | None = None,
    kinds: Iterable[str] = (),
    min_confidence: float = 0.0,
    limit: int = DEFAULT_LIMIT,
    now: int | None = None,
    state_dir: StateDirLike | None = None,
    use_fts: bool | None = None,
) -> list[RecallHit]:
    """The live entries of memory file `path` that best match `query`, best first.

    At most `limit` hits; only entries that are the live current version of their id at
    `now` (SEMANTICS rules 8 to 11); with `scope`, only entries `scope_matches` would put
    in that task's prompt (global ones included); with `kinds`, only those kinds. The FTS5
    index lives in `state_dir` (a `StateDir` or its path; default: memsync's state
    directory, `$XDG_STATE_HOME/memsync`); `use_fts=False`
    forces the plain word-match scan (the fallback where FTS5 is missing).

    Raises:
        FileNotFoundError: the file does not exist (IsADirectoryError: it is a folder).
    """
    p = Path(path).expanduser()
    require_file(p)
    at = now_us() if now is None else now
    flt = _Filter(scope, frozenset(kinds), min_confidence)
    cache_ = live_cache(p)
    if use_fts is None:
        use_fts = fts5_available()
    if not use_fts:
        return _scan(cache_.live(now), query, flt, limit)
    index = cache_.index()
    hits: list[RecallHit] = []
    fts = _text_index(p.resolve(), StateDir.of(state_dir).recall_index(p))
    fts.refresh()
    for rid, ts, score in fts.candidates(query, batch=max(32, 4 * limit)):
        rec = index.alive(rid, at)
        if rec is None or rec.ts != ts:
            continue  # forgotten, superseded, expired or an older version
        hit = _hit(rec, score)
        if flt.keeps({"kind": hit.kind, "confidence": hit.confidence, "scope": hit.scope}):
            hits.append(hit)
            if len(hits) >= limit:
                break
    return hits


def warm(path: Path, state_dir: StateDir | None = None) -> None:
    """Bring the cached view and the FTS5 index of `path` up to date now, so that the
    first `recall` does not pay for reading a large file (a server calls it at start).
    `state_dir` None: the default state directory."""
    live_cache(path).index()
    if fts5_available():
        _text_index(path.resolve(), StateDir.of(state_dir).recall_index(path)).refresh()


_INDEXES: dict[tuple[Path, Path], TextIndex] = {}


def _text_index(path: Path, db_path: Path) -> TextIndex:
    """This process's open `TextIndex` of `path` in `db_path`: a server answering many
    queries opens the database once, not per query."""
    with _CACHES_LOCK:
        found = _INDEXES.get((path, db_path))
        if found is None or not db_path.exists():
            found = _INDEXES[(path, db_path)] = TextIndex(path, db_path)
        return found


def _scan(live: Sequence[Record], query: str, flt: _Filter, limit: int) -> list[RecallHit]:
    """The fallback: score each live entry by how many of the query's (stemmed) words it
    holds; ties go to the newer entry."""
    wanted = {_stem(w) for w in _words(query)}
    if not wanted:
        return []
    scored: list[tuple[float, int, Record]] = []
    for rec in live:
        s = _decode_searchable(rec.raw)
        have = {_stem(w) for w in _words(" ".join([s.text, *s.tags, s.scope]))}
        n = len(wanted & have)
        if n and flt.keeps(rec.fields()):
            scored.append((float(n), rec.ts, rec))
    scored.sort(key=lambda t: (-t[0], -t[1], t[2].id))
    return [_hit(rec, score) for score, _, rec in scored[:limit]]
