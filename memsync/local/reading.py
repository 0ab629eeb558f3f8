"""Reading memory files: scan them into one index, build their view, check them, render the
prompt block (SEMANTICS rules 1 to 12). Reads only; writes are `memory.py`'s."""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from memsync.core.lines import BadLine, Header, Invalid, classify, is_header
from memsync.core.prompt import (
    PromptEntry,
    drop_rank,
    kept_at_most,
    render_prompt,
    scope_matches,
    too_long_for,
)
from memsync.core.records import Described, Record
from memsync.core.timestamps import format_ts
from memsync.core.view import Index, View, build_view, distinct_twins
from memsync.local.fresh import now_us
from memsync.local.storage import read_chunks

if TYPE_CHECKING:  # pydantic is imported only when a caller asks for its models (start-up)
    from memsync.models import Entry

__all__ = [
    "BadLineWatch",
    "CheckReport",
    "MemoryView",
    "ScanResult",
    "SecretFinding",
    "is_header",
    "no_gc",
    "prompt_of",
    "prompt_of_described",
    "scan",
    "view_of",
]


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
    headerless: list[str] = field(default_factory=list)
    """Files whose first line is not a header: read all the same, with a warning (rule 2)."""
    secrets: list[SecretFinding] = field(default_factory=list)
    """Lines whose text looks like a credential (only when a check asked for them)."""
    future: list[tuple[str, int, Record]] = field(default_factory=list)
    """Records dated too far ahead: file, line, record (only when a check asked for them)."""
    superseding: list[tuple[str, int]] | None = None
    """Every entry that supersedes an id (rule 10), in the order folded: (the id it
    supersedes, its `Located.at`). Collected by the located fold only (`local.located`;
    handoff hands each over, issue 20); None: not collected."""
    lines: int = 0
    """How many lines the persistent view's fold read (`local.located`, where its store
    takes the number of the next line from); 0 where not counted."""


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
    from memsync.local.drain import recover_after_crash  # (start-up: `prompt` needs no lock)

    result = ScanResult()
    with no_gc():
        for i, path in enumerate(paths):
            name = names[i] if names else str(path)
            recover_after_crash(path)  # lines a killed compaction left aside (rule 16)
            for chunk in read_chunks(path):
                if chunk.first_line == 1 and chunk.lines and not is_header(chunk.lines[0]):
                    result.headerless.append(name)
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
        twins: records with the same key and different content, each conflict once
            (`core.view.distinct_twins`); the first of each pair won.
    """

    records: list[Record]
    bad: list[BadLine]
    twins: list[tuple[Record, Record]]
    headerless: list[str] = field(default_factory=list)
    """Files read without a header on their first line (rule 2: read, with a warning)."""

    @property
    def entries(self) -> list[Entry]:
        """The live entries as pydantic models."""
        from memsync.models import Entry, to_model

        return [e for e in map(to_model, self.records) if isinstance(e, Entry)]

    def __len__(self) -> int:
        return len(self.records)


class SecretFinding(msgspec.Struct, frozen=True):
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


def view_of(paths: Sequence[Path], now: int | None = None) -> MemoryView:
    """The view of several memory files together (rules 1 to 12)."""
    result = scan(paths)
    with no_gc():  # sorting a million live records allocates a million keys
        view: View = build_view(result.index, now_us() if now is None else now)
    return MemoryView(
        view.live, result.bad, distinct_twins(view.twins, result.index), result.headerless
    )


class _PromptFields(msgspec.Struct, gc=False):
    """What the prompt block needs of a live entry beyond its `Record`: decoded alone, not
    the whole record (a valid entry has them, typed, by rule 3)."""

    kind: str
    text: str
    scope: str = "global"
    confidence: float = 1.0


_decode_prompt_fields = msgspec.json.Decoder(_PromptFields).decode


class _PromptRank(msgspec.Struct, gc=False):
    """What deciding whether an entry can be in the block takes: its scope, and its
    confidence for the budget's order (the text is skipped, not decoded)."""

    scope: str = "global"
    confidence: float = 1.0


_decode_prompt_rank = msgspec.json.Decoder(_PromptRank).decode


def prompt_of(
    records: Iterable[Record],
    scope: str | None,
    max_chars: int | None,
    lines: Iterable[bytes] | None = None,
    *,
    markdown: bool = False,
) -> str:
    """`render_prompt` over live records (`markdown`: escaped as Markdown); `lines` are their lines, in order, when the
    records do not hold them (`Located`).

    With `max_chars`, only the `kept_at_most(max_chars)` matching entries the budget
    would drop last are decoded whole and held (a heap); the others are counted (the
    `more` of `render_prompt`): the block of a million entries holds a few dozen."""
    raws = (rec.raw for rec in records) if lines is None else lines
    if max_chars is None:
        entries = [
            _prompt_entry(rec, raw)
            for rec, raw in zip(records, raws, strict=True)
            if not rec.deleted
        ]
        return render_prompt(entries, scope, max_chars, markdown=markdown)
    limit = kept_at_most(max_chars)
    best: list[tuple[tuple[float, bool, int, str], bytes, Record]] = []
    # Entries too long for any block are passed over by the block (and named), so they
    # must not take the heap's places of entries that fit: only lines long enough to be
    # one are decoded: a rendered line is at most twice its JSON (Markdown escapes) plus
    # its brackets, and the heading, the head and the "left out" line take under 250.
    too_long: list[PromptEntry] = []
    matching = 0
    for rec, raw in zip(records, raws, strict=True):
        if rec.deleted:
            continue
        f = _decode_prompt_rank(raw)
        if not scope_matches(f.scope, scope):
            continue
        matching += 1
        if 2 * len(raw) + 256 > max_chars:
            entry = _prompt_entry(rec, raw)
            if too_long_for(entry, max_chars, markdown=markdown):
                too_long.append(entry)
                continue
        rank = drop_rank(f.confidence, rec.user, rec.ts, rec.id)  # unique: one record an id
        if len(best) < limit:
            heapq.heappush(best, (rank, raw, rec))
        elif rank > best[0][0]:
            heapq.heapreplace(best, (rank, raw, rec))
    entries = [_prompt_entry(rec, raw) for _, raw, rec in best] + too_long
    more = matching - len(entries)
    return render_prompt(entries, scope, max_chars, more=more, markdown=markdown)


def prompt_of_described(
    records: Sequence[Record],
    scope: str | None,
    max_chars: int,
    line: Callable[[Record], bytes],
    length: Callable[[Record], int],
    *,
    markdown: bool = False,
) -> str:
    """`prompt_of(records, scope, max_chars, ...)` for records whose lines are not held,
    reading only the lines it needs: none for a `Described` record (the persistent view's,
    issue 20) the budget leaves out, one for any other. `line(rec)` reads a record's line,
    `length(rec)` is its length without reading it. The same block as `prompt_of`."""
    limit = kept_at_most(max_chars)
    best: list[tuple[tuple[float, bool, int, str], Record]] = []
    too_long: list[PromptEntry] = []
    matching = 0
    for rec in records:
        if rec.deleted:
            continue
        if type(rec) is Described:
            rec_scope, confidence = rec.scope, rec.confidence
        else:
            f = _decode_prompt_rank(line(rec))
            rec_scope, confidence = f.scope, f.confidence
        if not scope_matches(rec_scope, scope):
            continue
        matching += 1
        if 2 * length(rec) + 256 > max_chars:  # as `prompt_of`: perhaps too long for any block
            entry = _prompt_entry(rec, line(rec))
            if too_long_for(entry, max_chars, markdown=markdown):
                too_long.append(entry)
                continue
        rank = drop_rank(confidence, rec.user, rec.ts, rec.id)  # unique: one record an id
        if len(best) < limit:
            heapq.heappush(best, (rank, rec))
        elif rank > best[0][0]:
            heapq.heapreplace(best, (rank, rec))
    entries = [_prompt_entry(rec, line(rec)) for _, rec in best] + too_long
    more = matching - len(entries)
    return render_prompt(entries, scope, max_chars, more=more, markdown=markdown)


def _prompt_entry(rec: Record, raw: bytes) -> PromptEntry:
    f = _decode_prompt_fields(raw)
    return PromptEntry(rec.id, f.kind, f.text, f.scope, rec.user, f.confidence, rec.ts)


@dataclass
class BadLineWatch:
    """Reads a file's new lines for bad ones (rule 4), so that each is reported once: how
    far `path` was checked, and how many bad lines it had. A replaced file (compaction:
    another inode, or shorter) is read again from the start."""

    path: Path
    ino: int = 0
    offset: int = 0
    line: int = 1
    bad: int = 0

    def new_bad_lines(self) -> Iterator[BadLine]:
        """The bad lines appended since the last call, as they are found.
        Raises OSError, and UnsupportedFormat (rule 2)."""
        st = self.path.stat()
        if st.st_ino != self.ino or st.st_size < self.offset:
            self.ino, self.offset, self.line, self.bad = st.st_ino, 0, 1, 0
        name = str(self.path)
        for chunk in read_chunks(self.path, self.offset, self.line):
            for n, raw in enumerate(chunk.lines, chunk.first_line):
                parsed = classify(raw, source=name, line_no=n)
                if isinstance(parsed, Invalid):
                    self.bad += 1
                    yield BadLine(name, n, parsed.reason)
            self.offset, self.line = chunk.end, chunk.first_line + len(chunk.lines)
