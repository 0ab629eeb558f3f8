"""Recall by full-text search: the live entries of a memory file that match a query.

The full-text index (`memsync.local.textindex`, SQLite FTS5 in the state directory) only
proposes candidates; the cached view (`memsync.local.livecache`) decides. Every hit is
checked against the view (rules 8 to 11): it is returned only when it is the live current
version of its id at `now`, so a forgotten, superseded or expired entry, or a beaten older
version, never comes back. Where SQLite has no FTS5, `recall` scans the live entries for
the query's words instead, with the same result contract.
"""

from __future__ import annotations

import _thread  # its lock alone: `threading` is 0.5 ms of recall's start-up (issue 20)
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from memsync.core.prompt import scope_matches
from memsync.core.records import Record
from memsync.core.timestamps import format_ts
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir, StateDirLike
from memsync.local.storage import require_file
from memsync.local.textindex import TextIndex, body_of, fts5_available, words

if TYPE_CHECKING:
    from memsync.local.livecache import LiveCache, live_cache
    from memsync.local.livequick import LiveQuick

__all__ = [
    "LiveCache",
    "RecallHit",
    "TextIndex",
    "fts5_available",
    "live_cache",
    "recall",
    "recall_live",
    "warm",
]

DEFAULT_LIMIT = 10


def __getattr__(name: str) -> Any:
    """`LiveCache` and `live_cache`, imported when first asked for: the command line's
    recall reads the persistent view and needs neither the cached view's fold nor what it
    imports (about 50 modules, 20 ms of start-up)."""
    if name in ("LiveCache", "live_cache"):
        from memsync.local import livecache

        return getattr(livecache, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _live_cache(path: Path) -> LiveCache:
    from memsync.local.livecache import live_cache

    return live_cache(path)


class RecallHit(msgspec.Struct, frozen=True):
    """One live entry found by `recall`, best first. `score` is higher for a better match
    (the negated BM25 rank with FTS5; the count of query words matched without it). With a
    common word in the query (`textindex.COMMON`), hits holding a rare word come first,
    scored by BM25 over the rare words; then the common words' hits, newest window first,
    each scored by the count of those words it holds: scores then decrease within each
    part and window, not across them."""

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


_SUFFIXES = ("ies", "ied", "ing", "es", "ed", "s")


def _stem(word: str) -> str:
    """A crude stemmer for the fallback scan: enough that "retries" meets "retry"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("y") and len(word) > 3 else word


# recall itself


class _Filter(msgspec.Struct, frozen=True):
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
    persistent: bool = False,
) -> list[RecallHit]:
    """The live entries of memory file `path` that best match `query`, best first.

    At most `limit` hits, each live entry at most once (a line a merge repeated, rule 14,
    is one entry); only entries that are the live current version of their id at `now`
    (SEMANTICS rules 8 to 11), matched on that version's own text, tags and scope (a
    beaten twin's words do not find the winner); with `scope`, only entries `scope_matches` would put
    in that task's prompt (global ones included); with `kinds`, only those kinds. The FTS5
    index lives in `state_dir` (a `StateDir` or its path; default: memsync's state
    directory, `$XDG_STATE_HOME/memsync`); `use_fts=False`
    forces the plain word-match scan (the fallback where FTS5 is missing).

    Best first is BM25's order, except for a common word (held by more than
    `textindex.COMMON` lines, 2,000): rare words' matches come first, then the common
    words' latest lines a window at a time, best first within each window
    (`TextIndex.candidates`), so that the cost follows the window, not the matches.

    `persistent`: the view comes from the file's persistent view in the state directory
    (`memsync.local.viewstore`, issue 20), folding only what was appended since, instead of
    this process's cache (`live_cache`): for a process that recalls once (the command
    line); a server that recalls again and again keeps its cache.

    Raises:
        FileNotFoundError: the file does not exist (IsADirectoryError: it is a folder).
    """
    p = Path(path).expanduser()
    require_file(p)
    at = now_us() if now is None else now
    flt = _Filter(scope, frozenset(kinds), min_confidence)
    if use_fts is None:
        use_fts = fts5_available()
    if not use_fts:
        return _scan(_live_cache(p).records(now), query, flt, limit)
    try:
        if persistent:
            return _recall_stored(p, query, flt, limit, at, StateDir.of(state_dir))
        # The cache first: it copies in what a killed compaction left aside (rule 16),
        # which the text index then reads too.
        with _live_cache(p).reading() as (index, line):
            fts = _text_index(p.resolve(), StateDir.of(state_dir).recall_index(p))
            _refresh(fts)
            return _hits(fts, query, flt, limit, lambda rid: index.alive(rid, at), line)
    except _IndexUnusable as exc:
        return _scan_instead(p, exc, query, flt, limit, now)


def recall_live(
    live: LiveQuick,
    query: str,
    *,
    scope: str | None = None,
    kinds: Iterable[str] = (),
    min_confidence: float = 0.0,
    limit: int = DEFAULT_LIMIT,
    now: int | None = None,
    state_dir: StateDirLike | None = None,
) -> list[RecallHit]:
    """`recall` of the file `live` reads (a server's `LiveQuick`, held between calls):
    each candidate checked against its quick part, with the lines appended since folded
    in (one lookup each, no view of every id in memory); where it has none, through the
    persistent view as `recall(..., persistent=True)` (a damaged or no valid quick part),
    or this process's cache (`recall`'s default) for a file under `min_bytes` of the
    store, which never has one: a fold of it at every call would cost milliseconds, its
    view held costs little memory. Same contract and arguments as `recall`."""
    from memsync.local.viewranks import Damaged

    p = live.path
    require_file(p)
    if os.stat(p).st_size < live.store.min_bytes:
        return recall(
            p,
            query,
            scope=scope,
            kinds=kinds,
            min_confidence=min_confidence,
            limit=limit,
            now=now,
            state_dir=state_dir,
        )
    at = now_us() if now is None else now
    flt = _Filter(scope, frozenset(kinds), min_confidence)
    state = StateDir.of(state_dir)
    if not fts5_available():
        return _scan(_live_cache(p).records(now), query, flt, limit)
    try:
        fts = _text_index(p.resolve(), state.recall_index(p))
        try:
            with live.held() as quick:
                if quick is not None:
                    _refresh(fts)
                    alive = quick.alive
                    return _hits(fts, query, flt, limit, lambda rid: alive(rid, at), quick.line)
        except Damaged:
            pass  # (discarded: the store answers, and writes one)
        return _recall_stored(p, query, flt, limit, at, state)
    except _IndexUnusable as exc:
        return _scan_instead(p, exc, query, flt, limit, now)


def _recall_stored(
    path: Path, query: str, flt: _Filter, limit: int, at: int, state: StateDir
) -> list[RecallHit]:
    """`recall` through the persistent view: the same checks of each candidate against
    the view (rules 8 to 11), the line of each read from the file. From its quick part
    when it is valid (each candidate one lookup, `viewranks`), else from the store."""
    from memsync.local.viewranks_open import opened_quick
    from memsync.local.viewstore import ViewStore

    store = ViewStore(state)
    fts = _text_index(path.resolve(), state.recall_index(path))
    with opened_quick(store, path) as quick:  # damaged: the store answers, and writes one
        if quick is not None:
            _refresh(fts)
            return _hits(fts, query, flt, limit, lambda rid: quick.alive(rid, at), quick.line)
    from memsync.local.located import located_index  # (start-up: the quick part answers)

    with located_index(path, store) as view:
        index = view.scan.index
        _refresh(fts)
        return _hits(fts, query, flt, limit, lambda rid: index.alive(rid, at), view.line)


def _hits(
    fts: TextIndex,
    query: str,
    flt: _Filter,
    limit: int,
    alive: Callable[[str], Record | None],
    line: Callable[[Any], bytes],
) -> list[RecallHit]:
    """The first `limit` hits of the text index's candidates for `query` that `flt`
    keeps and that match the current version of a live id (`alive(id)`, its line read
    with `line`)."""
    hits: list[RecallHit] = []
    seen: set[str] = set()
    for rid, ts, score, body in fts.candidates(query, batch=max(32, 4 * limit)):
        if rid in seen:
            continue  # a line repeated by a merge (rule 14), or the id's other row
        found = alive(rid)
        if found is None or found.ts != ts:
            continue  # forgotten, superseded, expired or an older version
        raw = line(found)
        if body != body_of(raw):
            continue  # a beaten twin (rule 9): the match must be in the current version
        seen.add(rid)
        rec = Record(raw, rid, ts, found.deleted, found.user, found.supersedes, found.expires)
        hit = _hit(rec, score)
        if flt.keeps({"kind": hit.kind, "confidence": hit.confidence, "scope": hit.scope}):
            hits.append(hit)
            if len(hits) >= limit:
                break
    return hits


def warm(path: Path, state_dir: StateDir | None = None) -> None:
    """Bring the persistent view and the FTS5 index of `path` up to date now, so that the
    first `recall` does not pay for reading a large file (a server calls it at start).
    `state_dir` None: the default state directory."""
    if fts5_available():
        recall(path, "", state_dir=state_dir, persistent=True)  # the view, not the words
        _text_index(path.resolve(), StateDir.of(state_dir).recall_index(path)).refresh()
    else:
        _live_cache(path).index()  # what the fallback scan reads


_INDEXES: dict[tuple[Path, Path], TextIndex] = {}
_INDEXES_LOCK = _thread.allocate_lock()


class _IndexUnusable(Exception):
    """The state directory cannot hold or bring up to date the text index: not a folder,
    not writable, full. `recall` then answers by the plain scan (`_scan`), as where FTS5
    is missing, rather than fail: the index is a cache."""


def _text_index(path: Path, db_path: Path) -> TextIndex:
    """This process's open `TextIndex` of `path` in `db_path`: a server answering many
    queries opens the database once, not per query. Raises _IndexUnusable."""
    with _INDEXES_LOCK:
        found = _INDEXES.get((path, db_path))
        if found is None or not db_path.exists():
            try:
                found = _INDEXES[(path, db_path)] = TextIndex(path, db_path)
            except (OSError, sqlite3.Error) as exc:
                raise _unusable(db_path, exc) from exc
        return found


def _refresh(fts: TextIndex) -> None:
    """`fts.refresh()`; raises _IndexUnusable when the index cannot be written. (Should
    the memory file itself fail to read, the scan that follows says so.)"""
    try:
        fts.refresh()
    except (OSError, sqlite3.Error) as exc:
        raise _unusable(fts.db_path, exc) from exc


def _unusable(db_path: Path, exc: OSError | sqlite3.Error) -> _IndexUnusable:
    """Why the index at `db_path` cannot be used, as the command line says an OSError
    ("<file>: no space left on device")."""
    if isinstance(exc, OSError) and exc.strerror:
        return _IndexUnusable(f"{exc.filename or db_path}: {exc.strerror.lower()}")
    return _IndexUnusable(f"{db_path}: {exc}")


def _scan_instead(
    path: Path, exc: _IndexUnusable, query: str, flt: _Filter, limit: int, now: int | None
) -> list[RecallHit]:
    from memsync.local.logs import get_logger

    get_logger("memsync").warning("recall without its full-text index: %s", exc)
    return _scan(_live_cache(path).records(now), query, flt, limit)


def _scan(live: Sequence[Record], query: str, flt: _Filter, limit: int) -> list[RecallHit]:
    """The fallback: score each live entry by how many of the query's (stemmed) words it
    holds; ties go to the newer entry."""
    wanted = {_stem(w) for w in words(query)}
    if not wanted:
        return []
    scored: list[tuple[float, int, Record]] = []
    for rec in live:
        have = {_stem(w) for w in words(body_of(rec.raw))}
        n = len(wanted & have)
        if n and flt.keeps(rec.fields()):
            scored.append((float(n), rec.ts, rec))
    scored.sort(key=lambda t: (-t[0], -t[1], t[2].id))
    return [_hit(rec, score) for score, _, rec in scored[:limit]]
