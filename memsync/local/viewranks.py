"""The quick part of a memory file's persistent view (issue 20): read in place, not decoded.

The store of `memsync.local.viewstore` is decoded whole before it answers: at 1M records
that is a million objects, seconds and hundreds of MB for a `prompt` that shows a few
dozen lines. Beside it, `ViewStore.save` writes this file (`StateDir.view_ranks`), whose
columns are read where they lie (`mmap`), one element at a time:

- per id, sorted by id: its latest tombstone, best user and best inferred version
  (instant, where the line lies, expiry) and its supersession bits (rules 8 to 10): what
  `forget` (the id's newest record) and `recall` (whether a candidate is live) ask of a
  few ids, found by binary search;
- the entries live at `floor` (the clock when it was written, rules 8 to 11), ordered by
  `core.prompt.drop_rank`, last dropped first, with their confidence and scope; the
  number of them per scope; those that expire, by instant; those whose line is longer
  than `LONG_LINE`. A prompt block takes the top of that order that its budget can hold,
  and counts the rest from the per-scope counts.

Only the ids that the lines appended since touch (their own, or superseded by one) are
decided again, from their stored versions and the new lines, as a fold would (rules 8 to
11); an entry of the order that has expired since `floor` is passed over and counted out.

Never trusted blindly: the header is checksummed, and checked against the open memory file
exactly as the store is (`viewstore._matches`: identity, size, digest of every folded
byte); each 64 KiB block of the columns has its own checksum, checked the first time an
element of it is read: a damaged file gives no answer (the caller folds), never a wrong
one. The elements are read a page at a time (`viewranks_read.Pages`), not mapped: a
server's memory holds the pages its calls read, not the large parts of the file a mapping
brings in around them. A `now` before `floor`, a budget under `MIN_BUDGET` or more than `tail_limit` bytes
appended since: no answer either.
"""

from __future__ import annotations

import heapq
import mmap
import os
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any, cast

import msgspec

from memsync.core.lines import BadLine
from memsync.core.prompt import (
    HEAD_CHARS,
    PromptEntry,
    drop_rank,
    kept_at_most,
    line_chars,
    render_prompt,
    scope_matches,
    too_long_for,
)
from memsync.core.records import Located
from memsync.core.version import __version__
from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER, Index
from memsync.local.placed import LENGTH_BITS, LENGTH_MASK, OFFSET_BITS
from memsync.local.viewranks_read import BLOCK, Damaged, Pages

__all__ = ["FENCE", "FORMAT", "LONG_LINE", "MIN_BUDGET", "Damaged", "Quick"]

FORMAT = f"memsync-ranks/3 {__version__} {sys.byteorder}"
"""The format, memsync's version, and the byte order of the columns: any other is ignored."""

MIN_BUDGET = 1024
"""Blocks smaller than this are rendered by the fold: an entry may be too long for them
(`core.prompt.too_long_for`) at any length, and only those over `LONG_LINE` are listed."""
LONG_LINE = (MIN_BUDGET - 256) // 2
"""Lines longer than this are listed apart: only they may be too long for a block of
`MIN_BUDGET` or more (`reading.prompt_of`: a line of 2 * length + 256 characters at most)."""

_MAGIC = b"MSRANK1\n"
_PATH_BYTES = 4096  # as the store: `ViewStore._sweep` reads the path alone
_BLOCK = BLOCK
_ROWS = 8192  # the rows of ids remembered (`Quick.row_of`): about 1 MB at most
_RANKS = 4096  # the entries of the order remembered (`Quick._rank`): about 1 MB at most
_LENGTH_MASK, _LENGTH_BITS, _OFFSET_BITS = LENGTH_MASK, LENGTH_BITS, OFFSET_BITS

# Flags of an id.
_TOMB, _USER, _INFERRED, _USER_NO_EXP, _INFERRED_NO_EXP = 1, 2, 4, 8, 16
_SUP_USER, _SUP_INFERRED = 32, 64

# The columns, in the file's order: per id (sorted by id; `live`: which version is live at
# `floor`, 0 none, 1 the user one, 2 the inferred one; `scope`: its scope's number), then
# the rows of the live entries in drop order (`r_`), of those that expire, by instant
# (`e_`), and of those with a line over `LONG_LINE`, longest first (`l_`).
_COLUMNS = (
    ("offsets", "Q"),
    ("blob", "B"),
    ("flags", "B"),
    ("tomb_ts", "q"),
    ("tomb_at", "Q"),
    ("user_ts", "q"),
    ("user_at", "Q"),
    ("user_exp", "q"),
    ("inf_ts", "q"),
    ("inf_at", "Q"),
    ("inf_exp", "q"),
    ("live", "B"),
    ("scope", "I"),
    ("r_row", "I"),
    ("e_exp", "q"),
    ("e_row", "I"),
    ("l_row", "I"),
    ("f_offsets", "Q"),
    ("f_blob", "B"),
)
FENCE = 256
"""The fence (columns `f_offsets`, `f_blob`) holds the id of every `FENCE`th row: a lookup
searches it, then one stretch of `FENCE` rows, and so checks three or four blocks of the
columns, not one per step of a search of every id (twenty at 1M ids, 0.5 ms a lookup)."""


class _Head(msgspec.Struct, array_like=True, gc=False):
    format: str
    path: str
    dev: int
    ino: int
    size: int
    line: int
    mtime_ns: int
    digest: bytes
    headerless: bool
    bad: list[tuple[int, str]]
    floor: int
    scopes: list[str]
    counts: list[int]
    sections: list[tuple[int, int]]
    blocks: bytes


_decode_head = msgspec.msgpack.Decoder(_Head).decode
_encode = msgspec.msgpack.Encoder().encode


class _Fields(msgspec.Struct, gc=False):
    """What a prompt entry holds beyond its record (as `reading._PromptFields`)."""

    kind: str
    text: str
    scope: str = "global"
    confidence: float = 1.0


_decode_fields = msgspec.json.Decoder(_Fields).decode


class Quick:
    """A valid quick part of the memory file open as `fd`, with the records appended
    since it was written (`tail`): answers as a fold of the whole file would.

    A plain class, not a dataclass: `dataclasses` imports `inspect` (about 5 ms of a warm
    `prompt`'s start-up, issue 20)."""

    def __init__(
        self,
        head: _Head,
        fd: int,
        name: str,
        cols: dict[str, memoryview],
        starts: dict[str, int],
        pages: Pages,
        body: memoryview,
        *,
        bad: list[BadLine] | None = None,
        headerless: list[str] | None = None,
    ) -> None:
        self.head = head
        self.fd = fd
        self.name = name
        self._cols = cols
        """The columns, mapped: their lengths and types; read whole by `shown` alone."""
        self._starts = starts
        self._pages = pages
        """The columns, read a page at a time (the elements the other questions read)."""
        self._body = body
        self.by_id: dict[str, list[Located]] = {}
        """The records appended since, by id, in file order."""
        self.sup: dict[str, int] = {}
        """The supersession bits the records appended since give (rule 10)."""
        self.bad: list[BadLine] = [] if bad is None else bad
        self.headerless: list[str] = [] if headerless is None else headerless
        self._rows: dict[str, int | None] = {}
        self._ranks: list[tuple[int, bool, int | None, int, int, int, str]] = []

    def _get(self, column: str, i: int) -> Any:
        """Element `i` of `column`, its block checked the first time (raises Damaged)."""
        col = self._cols[column]
        if not 0 <= i < len(col):
            raise IndexError(f"{column}[{i}]")
        return self._pages.get(self._starts[column] + i * col.itemsize, col.format)

    def check_all(self, most: int | None = None) -> bool:
        """Check the blocks of the columns not checked yet, at most `most` (None: all),
        each read and dropped (raises Damaged): the questions after it check none (a
        server's start, `LiveQuick`). Whether every block is now checked."""
        pages = self._pages
        todo = [block for block in range(pages.blocks) if block not in pages.checked]
        for block in todo[:most]:
            pages.check(block)
        return most is None or len(todo) <= most

    def release(self) -> None:
        """Drop the pages of the mapping read so far (by `shown`) from this process's
        memory: clean pages of a file, mapped again from the page cache when next needed;
        the blocks already checked stay checked (the mapping is of the same file)."""
        mm = self._body.obj
        if isinstance(mm, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            mm.madvise(mmap.MADV_DONTNEED)

    def _id(self, row: int) -> bytes:
        start, end = self._get("offsets", row), self._get("offsets", row + 1)
        return self._pages.read(self._starts["blob"] + start, end - start)

    def _fenced(self, i: int) -> bytes:
        """The id of row `i * FENCE`."""
        start, end = self._get("f_offsets", i), self._get("f_offsets", i + 1)
        return self._pages.read(self._starts["f_blob"] + start, end - start)

    def row_of(self, rid: str) -> int | None:
        """The row of `rid` (binary search of the fence, then of the ids of its stretch),
        None when the store has none. Remembered (`_rows`): a server's every prompt asks
        again for each id appended since."""
        if rid in self._rows:
            return self._rows[rid]
        key = rid.encode("utf-8", "surrogatepass")
        stretches = bisect_right(range(len(self._cols["f_offsets"]) - 1), key, key=self._fenced)
        row = None
        if stretches:  # (0: `key` is before the first id)
            start, end = (stretches - 1) * FENCE, min(len(self._cols["flags"]), stretches * FENCE)
            i = bisect_left(range(end), key, start, end, key=self._id)
            row = i if i < end and self._id(i) == key else None
        if len(self._rows) >= _ROWS:
            self._rows.clear()
        self._rows[rid] = row
        return row

    def _stored(self, row: int, rid: str, index: Index) -> None:
        """The stored versions and supersession bits of `rid` (at `row`), into `index`."""
        g = self._get
        f = g("flags", row)
        if f & _TOMB:
            index.tombs[rid] = Located(
                b"", rid, g("tomb_ts", row), True, False, None, None, g("tomb_at", row), 0
            )
        if f & _USER:
            exp = None if f & _USER_NO_EXP else g("user_exp", row)
            ts, at = g("user_ts", row), g("user_at", row)
            index.user[rid] = Located(b"", rid, ts, False, True, None, exp, at, 0)
        if f & _INFERRED:
            exp = None if f & _INFERRED_NO_EXP else g("inf_exp", row)
            ts, at = g("inf_ts", row), g("inf_at", row)
            index.inferred[rid] = Located(b"", rid, ts, False, False, None, exp, at, 0)
        bits = (SUPERSEDED_BY_USER if f & _SUP_USER else 0) | (
            SUPERSEDED_BY_INFERRED if f & _SUP_INFERRED else 0
        )
        if bits:
            index.superseded[rid] = bits

    def newest_stored(self, rid: str) -> int | None:
        """The newest `created_at` of any record of `rid` in the folded bytes (each class
        keeps its latest, rule 9), None when there is none. Raises Damaged."""
        row = self.row_of(rid)
        if row is None:
            return None
        f = self._get("flags", row)
        found = [
            self._get(column, row)
            for flag, column in ((_TOMB, "tomb_ts"), (_USER, "user_ts"), (_INFERRED, "inf_ts"))
            if f & flag
        ]
        return max(found) if found else None

    def versions(self, rid: str) -> Index:
        """The summary of `rid` alone (rules 8 to 10): its stored versions and supersession
        bits, and the records of it appended since, as `Located` ones. Raises Damaged."""
        index = Index(line=self.line)
        row = self.row_of(rid)
        if row is not None:
            self._stored(row, rid, index)
        for rec in self.by_id.get(rid, ()):
            index.add(rec)
        if sup := self.sup.get(rid, 0):
            index.superseded[rid] = index.superseded.get(rid, 0) | sup
        return index

    def alive(self, rid: str, now: int) -> Located | None:
        """The live current version of `rid` at `now` (rules 8 to 11), from its stored
        versions and the records appended since. Raises Damaged."""
        return cast(Located | None, self.versions(rid).alive(rid, now))  # only `Located`

    def next_expiry(self, now: int) -> int | None:
        """The first instant after `now` at which an entry of the order or a record
        appended since expires (None: none will): until then a block at `now` stays the
        block (rule 11: time changes the view only by expiry). Raises Damaged."""
        col = self._cols["e_exp"]
        lo, hi = 0, len(col)
        while lo < hi:  # the first expiry after `now` (the column is by instant)
            mid = (lo + hi) // 2
            if self._get("e_exp", mid) <= now:
                lo = mid + 1
            else:
                hi = mid
        found = [self._get("e_exp", lo)] if lo < len(col) else []
        for recs in self.by_id.values():
            found.extend(r.expires for r in recs if r.expires is not None and r.expires > now)
        return min(found, default=None)

    def line(self, rec: Located | Any) -> bytes:
        """The line of a record of the memory file (read again from where it lies)."""
        rest = rec.at >> _LENGTH_BITS
        return os.pread(self.fd, rec.at & _LENGTH_MASK, rest & ((1 << _OFFSET_BITS) - 1))

    def _entry(self, rid: str, user: bool, ts: int, at: int) -> tuple[PromptEntry, int]:
        rest = at >> _LENGTH_BITS
        raw = os.pread(self.fd, at & _LENGTH_MASK, rest & ((1 << _OFFSET_BITS) - 1))
        f = _decode_fields(raw)
        return PromptEntry(rid, f.kind, f.text, f.scope, user, f.confidence, ts), len(raw)

    def _ranked(self, row: int) -> tuple[int, bool, int | None, int, int]:
        """Row, class, expiry, instant and line of the entry live at `floor` of `row`."""
        g = self._get
        user = g("live", row) == 1
        f = g("flags", row)
        if user:
            exp = None if f & _USER_NO_EXP else g("user_exp", row)
            return row, True, exp, g("user_ts", row), g("user_at", row)
        exp = None if f & _INFERRED_NO_EXP else g("inf_exp", row)
        return row, False, exp, g("inf_ts", row), g("inf_at", row)

    def prompt(
        self, scope: str | None, max_chars: int, now: int, *, markdown: bool = False
    ) -> str | None:
        """`reading.prompt_of` of the live entries at `now` (the same block), from the
        drop order: None for a budget under `MIN_BUDGET` or a `now` before `floor` (the
        order holds only the entries live then). Raises Damaged."""
        head = self.head
        if max_chars < MIN_BUDGET or now < head.floor:
            return None
        wanted = {i for i, s in enumerate(head.scopes) if scope_matches(s, scope)}
        matching = sum(head.counts[i] for i in wanted)
        affected = {rid: self.row_of(rid) for rid in self.by_id.keys() | self.sup.keys()}
        for rid, row in affected.items():
            if row is None:
                continue
            # Its place in the order (if it has one) is decided again below.
            index = Index(line=self.line)
            self._stored(row, rid, index)
            was = index.alive(rid, head.floor)
            if was is None:
                continue  # not in the order (nor counted: the expired are, below, not it)
            if scope_matches(_decode_fields(self.line(was)).scope, scope):
                matching -= 1
        skip = {row for row in affected.values() if row is not None}
        for k in range(len(self._cols["e_exp"])):  # expired since `floor`
            if self._get("e_exp", k) > now:
                break
            row = self._get("e_row", k)
            if row not in skip and self._get("scope", row) in wanted:
                matching -= 1
        limit = kept_at_most(max_chars)
        fitting: list[PromptEntry] = []
        too_long: list[PromptEntry] = []
        for rid in affected:
            rec = self.alive(rid, now)
            if rec is None:
                continue
            entry, length = self._entry(rid, rec.user, rec.ts, rec.at)
            if not scope_matches(entry.scope, scope):
                continue
            matching += 1
            if 2 * length + 256 > max_chars and too_long_for(entry, max_chars, markdown=markdown):
                too_long.append(entry)
            else:
                fitting.append(entry)
        top = self._top(skip, wanted, now, limit, max_chars, markdown)
        for long_row in self._long(max_chars):
            row, user, exp, ts, at = self._ranked(long_row)
            if row in skip or (exp is not None and exp <= now):
                continue
            if self._get("scope", row) not in wanted:
                continue
            entry, _ = self._entry(self._id(row).decode("utf-8", "surrogatepass"), user, ts, at)
            if too_long_for(entry, max_chars, markdown=markdown):
                too_long.append(entry)
        chosen = heapq.nlargest(limit, fitting + top, key=_drop_key)
        more = matching - len(chosen) - len(too_long)
        return render_prompt(chosen + too_long, scope, max_chars, more=more, markdown=markdown)

    def shown(self, now: int) -> list[int] | None:
        """Where the line of each live current version at `now` lies (`Located.at`), in
        rule 12's order (`created_at`, then id): the records of a fold's view
        (`core.view.build_view`), which `show --json` prints; None for a `now` before
        `floor` (the order holds only the entries live then). Reads every block of the
        columns once. Raises Damaged."""
        if now < self.head.floor:
            return None
        self.check_all()
        affected = {rid: self.row_of(rid) for rid in self.by_id.keys() | self.sup.keys()}
        skip = {row for row in affected.values() if row is not None}
        c = self._cols
        flags, live = c["flags"], c["live"]
        user_ts, user_at, user_exp = c["user_ts"], c["user_at"], c["user_exp"]
        inf_ts, inf_at, inf_exp = c["inf_ts"], c["inf_at"], c["inf_exp"]
        stamps: list[int] = []
        places: list[int] = []
        rows: list[int] = []  # -1: a record appended since, named in `since`
        for row in c["r_row"]:  # live at `floor`; expired since, or decided again: out
            if row in skip:
                continue
            if live[row] == 1:
                if flags[row] & _USER_NO_EXP or user_exp[row] > now:
                    stamps.append(user_ts[row])
                    places.append(user_at[row])
                    rows.append(row)
            elif flags[row] & _INFERRED_NO_EXP or inf_exp[row] > now:
                stamps.append(inf_ts[row])
                places.append(inf_at[row])
                rows.append(row)
        since: dict[int, str] = {}
        for rid in affected:
            rec = self.alive(rid, now)
            if rec is not None:
                since[len(rows)] = rid
                stamps.append(rec.ts)
                places.append(rec.at)
                rows.append(-1)
        order = sorted(range(len(stamps)), key=stamps.__getitem__)
        i = 0
        while i < len(order):  # runs of equal instants, by id (rule 12): rare
            j = i + 1
            while j < len(order) and stamps[order[j]] == stamps[order[i]]:
                j += 1
            if j - i > 1:
                order[i:j] = sorted(
                    order[i:j], key=lambda k: since[k] if k in since else self._rid(rows[k])
                )
            i = j
        return [places[k] for k in order]

    def _rid(self, row: int) -> str:
        return self._id(row).decode("utf-8", "surrogatepass")

    def _top(
        self,
        skip: set[int],
        wanted: set[int],
        now: int,
        limit: int,
        max_chars: int,
        markdown: bool,
    ) -> list[PromptEntry]:
        """The first `limit` entries of the order, live at `now`, of a scope in `wanted`,
        not too long for the block, and not of an id decided again (`skip`); fewer when
        their lines alone overflow the block (`core.prompt.overflows`: the block cannot
        hold one after them; a 4,000-character block then reads a few dozen lines, not
        `kept_at_most`'s 1,334)."""
        top: list[PromptEntry] = []
        chars = HEAD_CHARS
        for pos in range(len(self._cols["r_row"])):
            if len(top) >= limit or chars > max_chars:
                break
            row, user, exp, ts, at, in_scope, rid = self._rank(pos)
            if row in skip or (exp is not None and exp <= now) or in_scope not in wanted:
                continue
            entry, length = self._entry(rid, user, ts, at)
            if 2 * length + 256 > max_chars and too_long_for(entry, max_chars, markdown=markdown):
                continue  # counted apart (`_long`)
            top.append(entry)
            chars += line_chars(entry, markdown=markdown)
        return top

    def _rank(self, pos: int) -> tuple[int, bool, int | None, int, int, int, str]:
        """`_ranked` of the entry at `pos` of the order, its scope's number and its id;
        remembered for the first `_RANKS` positions: every prompt walks them again (a
        20,000-character block about 440, eight columns each, read a page at a time)."""
        if pos < len(self._ranks):
            return self._ranks[pos]
        row, user, exp, ts, at = self._ranked(self._get("r_row", pos))
        found = (row, user, exp, ts, at, self._get("scope", row), self._rid(row))
        if pos == len(self._ranks) < _RANKS:
            self._ranks.append(found)
        return found

    def _long(self, max_chars: int) -> Iterable[int]:
        """The positions of the entries whose line may be too long for a block of
        `max_chars` (longest first)."""
        for k in range(len(self._cols["l_row"])):
            row = self._get("l_row", k)
            at = self._ranked(row)[4]
            if 2 * (at & _LENGTH_MASK) + 256 <= max_chars:
                return
            yield row


def _drop_key(e: PromptEntry) -> tuple[float, bool, int, str]:
    return drop_rank(e.confidence, e.user, e.ts, e.id)
