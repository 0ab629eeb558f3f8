"""`Memory`: one memory file, the library's main entry point (core + storage + lock).

Reading builds the view of SEMANTICS rules 1 to 12 from the file's records; writing appends
whole lines under the file's lock (rule 13). Timestamps memsync writes follow a hybrid
clock so that a new version or a tombstone written on a machine whose clock is behind still
wins (see `Memory._stamp`).
"""

from __future__ import annotations

import gc
import os
import secrets as _random
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from memsync.core.lines import BadLine, Header, Invalid, classify
from memsync.core.prompt import PromptEntry, render_prompt
from memsync.core.records import Record
from memsync.core.secrets import find_secrets
from memsync.core.timestamps import MS, SECOND, format_ts, from_datetime
from memsync.core.view import Index, View, build_view
from memsync.errors import InvalidRecord, MemsyncError, SecretRefused
from memsync.local.lock import DEFAULT_TIMEOUT, file_lock
from memsync.local.netfs import warn_if_network_fs
from memsync.local.storage import append_bytes, read_chunks, read_from, read_tail
from memsync.models import Entry, Tombstone, to_model

if TYPE_CHECKING:
    from memsync.local.compaction import CompactionResult

__all__ = [
    "FUTURE_TOLERANCE",
    "MAX_FUTURE",
    "CheckReport",
    "Memory",
    "MemoryView",
    "SecretFinding",
    "header_line",
    "new_id",
    "now_us",
    "scan",
]

MAX_FUTURE = 24 * 3600 * SECOND
"""A record dated more than this ahead of the local clock is held, not trusted."""

FUTURE_TOLERANCE = 5 * 60 * SECOND
"""`check` reports records dated more than this ahead of the local clock."""

_TAIL_FOR_CLOCK = 16 * 1024
"""How much of the end of a file the hybrid clock reads: memsync's own last write is there."""


def now_us() -> int:
    """The local clock, in microseconds since the epoch."""
    return from_datetime(datetime.now(UTC))


def new_id() -> str:
    """A new record id: 12 random lowercase hex digits."""
    return _random.token_hex(6)


def header_line(now: int, generation: str | None = None) -> bytes:
    """A header line for a new file (rule 2), with a generation token (new at each rewrite)."""
    obj = {
        "format": "agent-memory/0.1",
        "created_at": format_ts(now),
        "generation": generation or _random.token_hex(8),
    }
    return msgspec.json.encode(obj) + b"\n"


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic GC while folding many records: they hold no cycles, and generation-2
    passes over a million live objects would cost more than the fold itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class ScanResult:
    """What reading some files gave: the index of their records, their bad lines, headers."""

    index: Index = field(default_factory=Index)
    bad: list[BadLine] = field(default_factory=list)
    headers: list[Header] = field(default_factory=list)


def scan(
    paths: Sequence[Path],
    *,
    visit: Callable[[str, int, Record], None] | None = None,
    names: Sequence[str] | None = None,
) -> ScanResult:
    """Read every complete line of `paths` into one index (rules 1 to 10).

    `visit(file, line_no, record)` is called for each valid record when given. `names` are
    the file names used in reports (default: the paths as given).
    Raises OSError for a file that cannot be read and UnsupportedFormat (rule 2).
    """
    result = ScanResult()
    with no_gc():
        for i, path in enumerate(paths):
            name = names[i] if names else str(path)
            for chunk in read_chunks(path):
                if visit is None:
                    bad, headers = result.index.fold_lines(
                        chunk.lines, source=name, first_line=chunk.first_line
                    )
                    result.bad += bad
                    result.headers += headers
                else:
                    _fold_visiting(result, chunk.lines, name, chunk.first_line, visit)
    return result


def _fold_visiting(
    result: ScanResult,
    lines: list[bytes],
    name: str,
    first_line: int,
    visit: Callable[[str, int, Record], None],
) -> None:
    for n, raw in enumerate(lines, first_line):
        parsed = classify(raw, source=name, line_no=n)
        if type(parsed) is Record:
            result.index.add(parsed)
            visit(name, n, parsed)
        elif type(parsed) is Invalid:
            result.bad.append(BadLine(name, n, parsed.reason))
        elif type(parsed) is Header:
            result.headers.append(parsed)


@dataclass(frozen=True)
class MemoryView:
    """The view of a memory (rules 8 to 12) with what reading it found along the way.

    Attributes:
        records: the live current versions, ordered by (`created_at`, `id`).
        bad: bad lines (file, line, reason); never dropped, never propagated.
        twins: records with the same key and different content; the first of each pair won.
    """

    records: list[Record]
    bad: list[BadLine]
    twins: list[tuple[Record, Record]]

    @property
    def entries(self) -> list[Entry]:
        """The live entries as pydantic models."""
        return [e for e in map(to_model, self.records) if isinstance(e, Entry)]

    def __len__(self) -> int:
        return len(self.records)


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A line whose text looks like a credential."""

    file: str
    line: int
    what: str


@dataclass(frozen=True)
class CheckReport:
    """What `check` found: bad lines, twins, credential-shaped text, records dated too far
    ahead. Clean when all four are empty."""

    bad: list[BadLine]
    twins: list[tuple[Record, Record]]
    secrets: list[SecretFinding]
    future: list[tuple[str, int, Record]]

    @property
    def clean(self) -> bool:
        return not (self.bad or self.twins or self.secrets or self.future)

    def to_json(self) -> dict[str, Any]:
        """The `check --json` document."""
        return {
            "bad": [{"file": b.file, "line": b.line, "reason": b.reason} for b in self.bad],
            "twins": [
                {"id": a.id, "created_at": format_ts(a.ts), "kept": _text(a), "other": _text(b)}
                for a, b in self.twins
            ],
            "secrets": [{"file": s.file, "line": s.line, "what": s.what} for s in self.secrets],
            "future": [
                {"file": f, "line": n, "id": r.id, "created_at": format_ts(r.ts)}
                for f, n, r in self.future
            ],
        }


def _text(rec: Record) -> str:
    return rec.raw.decode("utf-8", "replace")


class _Texts(msgspec.Struct, gc=False):
    """The human-written strings of a record: what a secret could hide in."""

    text: str = ""
    scope: str = ""
    source: str | None = None
    tags: list[str] = []


_decode_texts = msgspec.json.Decoder(_Texts).decode


def record_secrets(rec: Record) -> list[str]:
    """What looks like a credential in the human-written strings of a record (its text,
    scope, source and tags), decoded so that JSON escapes cannot hide a value. The short
    fields repeat across records (a session id, a scope), so their verdicts are cached."""
    t = _decode_texts(rec.raw)
    found = find_secrets(t.text)
    for value in (t.scope, t.source or "", *t.tags):
        found += _field_secrets(value)
    return list(dict.fromkeys(found))


@lru_cache(maxsize=4096)
def _field_secrets(value: str) -> list[str]:
    return find_secrets(value)


def view_of(paths: Sequence[Path], now: int | None = None) -> MemoryView:
    """The view of several memory files together (rules 1 to 12)."""
    result = scan(paths)
    with no_gc():  # sorting a million live records allocates a million keys
        view: View = build_view(result.index, now_us() if now is None else now)
    return MemoryView(view.live, result.bad, view.twins)


def check_files(paths: Sequence[Path], now: int | None = None) -> CheckReport:
    """Bad lines, twins, credential-shaped text, and records more than 5 minutes ahead."""
    limit = (now_us() if now is None else now) + FUTURE_TOLERANCE
    found: list[SecretFinding] = []
    future: list[tuple[str, int, Record]] = []

    def visit(name: str, line: int, rec: Record) -> None:
        if rec.ts > limit:
            future.append((name, line, rec))
        if not rec.deleted:
            for what in record_secrets(rec):
                found.append(SecretFinding(name, line, what))

    result = scan(paths, visit=visit)
    return CheckReport(result.bad, list(result.index.twins), found, future)


class Memory:
    """One memory file: read its view, append to it, check it.

    Example:
        >>> mem = Memory.open("~/.local/share/agent-memory/me.jsonl")
        >>> entry = mem.add("preference", "The person prefers short answers.", source="user")
        >>> print(mem.to_prompt(scope="github.com"))

    Writes are appends of whole lines under the file's lock; nothing is ever edited in place.
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = DEFAULT_TIMEOUT):
        self.path = Path(path).expanduser()
        self.lock_timeout = lock_timeout

    def __repr__(self) -> str:
        return f"Memory({str(self.path)!r})"

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, create: bool = True, now: int | None = None
    ) -> Memory:
        """Open a memory file; create it (mode 0600, with a header) when missing and `create`.

        Raises:
            FileNotFoundError: it does not exist and `create` is False.
        """
        mem = cls(path)
        if not mem.path.exists():
            if not create:
                raise FileNotFoundError(f"{mem.path}: no such memory file")
            mem.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with file_lock(mem.path, mem.lock_timeout):
                if not mem.path.exists():
                    fd = os.open(mem.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    try:
                        os.write(fd, header_line(now_us() if now is None else now))
                    finally:
                        os.close(fd)
        warn_if_network_fs(mem.path)
        return mem

    # Reading

    def view(self, now: int | datetime | None = None) -> MemoryView:
        """The view at `now` (default: the local clock): live current versions (rule 12)."""
        return view_of([self.path], _as_us(now))

    def to_prompt(
        self,
        scope: str | None = None,
        *,
        max_chars: int | None = None,
        now: int | datetime | None = None,
    ) -> str:
        """The memory block for a task in `scope` (see `memsync.core.prompt.render_prompt`)."""
        return prompt_of(self.view(now).records, scope, max_chars)

    def check(self, now: int | datetime | None = None) -> CheckReport:
        """Bad lines, twins, credential-shaped text, records dated more than 5 min ahead."""
        return check_files([self.path], _as_us(now))

    def read_from(self, offset: int = 0) -> tuple[list[bytes], int]:
        """The complete lines from byte `offset` and the offset to read from next."""
        return read_from(self.path, offset)

    # Writing

    def add(
        self,
        kind: str,
        text: str,
        *,
        scope: str = "global",
        tags: Iterable[str] = (),
        source: str | None = None,
        confidence: float = 1.0,
        expires_at: datetime | str | None = None,
        supersedes: str | None = None,
        now: int | datetime | None = None,
    ) -> Entry:
        """Append a new entry with a new id and return it.

        Raises:
            SecretRefused: the text looks like a credential (the spec: never store secrets).
            InvalidRecord: a field breaks rule 3 (an unknown kind, a confidence out of [0, 1]).
        """
        found = find_secrets("\n".join([text, scope, source or "", *tags]))
        if found:
            raise SecretRefused(
                f"refusing to store what looks like a secret ({', '.join(found)}); "
                "memory files are shared and never hold credentials"
            )
        obj: dict[str, Any] = {
            "id": new_id(),
            "kind": kind,
            "text": text,
            "scope": scope,
            "tags": list(tags),
            "source": source,
            "confidence": confidence,
            "expires_at": _as_text_ts(expires_at),
            "supersedes": supersedes,
        }
        model = self._append(obj, _as_us(now), fresh_id=True)
        assert isinstance(model, Entry)
        return model

    def supersede(
        self,
        old_id: str,
        text: str,
        *,
        kind: str | None = None,
        now: int | datetime | None = None,
        **fields: Any,
    ) -> Entry:
        """Append an entry that replaces `old_id` for good (rule 10); `kind` defaults to the
        old entry's kind."""
        if kind is None:
            old = self._current(old_id)
            if old is None or old.deleted:
                raise MemsyncError(f"{self.path}: no live entry with id {old_id!r}")
            kind = str(old.fields()["kind"])
        return self.add(kind, text, supersedes=old_id, now=now, **fields)

    def forget(self, rid: str, *, now: int | datetime | None = None) -> Tombstone:
        """Append a tombstone for `rid` (rule 8); later than every record of `rid` here.

        Raises:
            MemsyncError: the file holds no record with that id.
        """
        if self._newest_of(rid) is None:
            raise MemsyncError(f"{self.path}: no record with id {rid!r}")
        model = self._append({"id": rid, "deleted": True}, _as_us(now))
        assert isinstance(model, Tombstone)
        return model

    def compact(
        self,
        *,
        now: int | datetime | None = None,
        horizon_days: float = 90.0,
        quiet_seconds: float = 60.0,
        dry_run: bool = False,
        acknowledged: Callable[[Record], bool] | None = None,
        grace_seconds: float = 5.0,
    ) -> CompactionResult:
        """Rewrite the file with only what its view needs (rules 15 and 16); see
        `memsync.local.compaction.compact_file`. Raises NotQuiet when the file is busy."""
        from memsync.local.compaction import compact_file  # it imports this module

        return compact_file(
            self.path,
            now=_as_us(now),
            horizon_days=horizon_days,
            quiet_seconds=quiet_seconds,
            dry_run=dry_run,
            acknowledged=acknowledged,
            grace_seconds=grace_seconds,
        )

    def _append(
        self, obj: dict[str, Any], now: int | None, *, fresh_id: bool = False
    ) -> Entry | Tombstone:
        """Stamp, validate (through the one validator, `classify`) and append one record.
        `fresh_id`: the id was just drawn at random, so no record of it can exist yet."""
        with file_lock(self.path, self.lock_timeout):
            at = now_us() if now is None else now
            obj["created_at"] = format_ts(self._stamp(None if fresh_id else obj["id"], at))
            line = msgspec.json.encode(obj)
            parsed = classify(line, source=str(self.path))
            if not isinstance(parsed, Record):
                reason = parsed.reason if isinstance(parsed, Invalid) else "not a record"
                raise InvalidRecord(f"invalid record: {reason}")
            append_bytes(self.path, line + b"\n", header=header_line(parsed.ts))
        return to_model(parsed)

    def _stamp(self, rid: str | None, now: int) -> int:
        """The `created_at` for a new record of `rid`: a hybrid clock.

        At least `now`; at least 1 ms after the newest record of `rid` in the file (so a
        `forget` or a new version written on a machine whose clock is behind still wins,
        where last-writer-wins on raw clocks would silently drop it); and never before the
        newest stamp near the end of the file, which is where memsync's own last write is
        (clocks step backwards). Stamps more than `MAX_FUTURE` ahead are not followed: one
        broken clock must not drag every later write into the future.
        """
        limit = now + MAX_FUTURE
        floor = now
        size = self.path.stat().st_size if self.path.exists() else 0
        lines, _ = _split(read_tail(self.path, size, _TAIL_FOR_CLOCK)) if size else ([], 0)
        for raw in lines:
            rec = classify(raw, source=str(self.path))
            if type(rec) is Record and floor < rec.ts <= limit:
                floor = rec.ts
        newest = None if rid is None else self._newest_of(rid)
        if newest is not None:
            floor = max(floor, newest + MS)
        return -(-floor // MS) * MS  # whole milliseconds, rounded up

    def _newest_of(self, rid: str) -> int | None:
        """The newest `created_at` of any record of `rid`; scans only lines naming it."""
        needle = msgspec.json.encode(rid)[1:-1]
        newest: int | None = None
        for chunk in read_chunks(self.path):
            if needle not in b"\n".join(chunk.lines):
                continue
            for raw in chunk.lines:
                if needle in raw:
                    rec = classify(raw, source=str(self.path))
                    if type(rec) is Record and rec.id == rid:
                        newest = rec.ts if newest is None else max(newest, rec.ts)
        return newest

    def _current(self, rid: str) -> Record | None:
        index = Index()
        needle = msgspec.json.encode(rid)[1:-1]
        for chunk in read_chunks(self.path):
            for raw in chunk.lines:
                if needle in raw:
                    rec = classify(raw, source=str(self.path))
                    if type(rec) is Record and rec.id == rid:
                        index.add(rec)
        return index.current(rid)


def _split(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines of a tail read; the first may be cut, and then it is simply invalid."""
    end = data.rfind(b"\n") + 1
    return (data[: end - 1].split(b"\n") if end else []), end


def prompt_of(records: Iterable[Record], scope: str | None, max_chars: int | None) -> str:
    """`render_prompt` over live records."""
    entries = []
    for rec in records:
        if rec.deleted:
            continue
        obj = rec.fields()
        entries.append(
            PromptEntry(
                id=rec.id,
                kind=obj["kind"],
                text=obj["text"],
                scope=obj.get("scope", "global"),
                user=rec.user,
                confidence=float(obj.get("confidence", 1.0)),
                ts=rec.ts,
            )
        )
    return render_prompt(entries, scope, max_chars)


def _as_us(value: int | datetime | None) -> int | None:
    if isinstance(value, datetime):
        return from_datetime(value)
    return value


def _as_text_ts(value: datetime | str | None) -> str | None:
    if isinstance(value, datetime):
        return format_ts(from_datetime(value))
    return value
