"""Writing the quick part of a persistent view (`memsync.local.viewranks`, issue 20): its
columns from the store's tables, in one pass over the ids and one sort of the live ones."""

from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Iterable
from itertools import accumulate, repeat
from operator import add, mul
from typing import Any, NamedTuple, Protocol

import xxhash

from memsync.core.view import SUPERSEDED_BY_INFERRED, SUPERSEDED_BY_USER
from memsync.local.viewranks import (
    _BLOCK,
    _COLUMNS,
    _INFERRED,
    _INFERRED_NO_EXP,
    _LENGTH_MASK,
    _MAGIC,
    _PATH_BYTES,
    _SUP_INFERRED,
    _SUP_USER,
    _TOMB,
    _USER,
    _USER_NO_EXP,
    FENCE,
    FORMAT,
    LONG_LINE,
    _encode,
    _Head,
)
from memsync.local.viewranks_open import head_size


class _Slot(Protocol):
    """A table of the store as columns (`viewstore._Slot`)."""

    @property
    def ids(self) -> list[str]: ...
    @property
    def ts(self) -> list[int]: ...
    @property
    def at(self) -> list[int]: ...
    @property
    def expires(self) -> list[int | None]: ...
    @property
    def scope(self) -> list[str]: ...
    @property
    def confidence(self) -> list[float]: ...


class _Stored(Protocol):
    """What the quick part takes of a store (`viewstore._Stored`)."""

    @property
    def path(self) -> str: ...
    @property
    def dev(self) -> int: ...
    @property
    def ino(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def line(self) -> int: ...
    @property
    def mtime_ns(self) -> int: ...
    @property
    def digest(self) -> bytes: ...
    @property
    def headerless(self) -> bool: ...
    @property
    def bad(self) -> list[tuple[int, str]]: ...
    @property
    def tombs(self) -> _Slot: ...
    @property
    def user(self) -> _Slot: ...
    @property
    def inferred(self) -> _Slot: ...


__all__ = ["Part", "build", "finish", "head_size", "join", "pack", "part", "parts"]


def _conf_bits(confidences: list[float]) -> list[int]:
    """Each confidence as an unsigned integer in the same order (-0.0 as 0.0): the bits
    of a double that is not negative (rule 3: a confidence is in [0, 1])."""
    doubles = array("d", map(add, confidences, repeat(0.0)))
    if doubles and min(doubles) < 0:  # (never, by rule 3: ordered all the same)
        return [_signed_bits(c) for c in doubles]
    return array("Q", doubles.tobytes()).tolist()


def _signed_bits(confidence: float) -> int:
    bits: int = struct.unpack("<Q", struct.pack("<d", confidence))[0]
    return bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63


def _versions(
    slot: _Slot, rows: list[int], flags: bytearray, flag: int, no_exp: int, n: int
) -> tuple[list[int], list[int], list[int]]:
    """A table of versions spread over `rows` (the row of each of its ids, in the table's
    order): their instants, where their lines are, and expiries, by row (`flags`
    marked). Lists while they are filled (an `array` boxes each element it is given)."""
    ts, at, exp = [0] * n, [0] * n, [0] * n
    for r, t, a, e in zip(rows, slot.ts, slot.at, slot.expires, strict=True):
        ts[r] = t
        at[r] = a
        if e is None:
            flags[r] |= flag | no_exp
        else:
            flags[r] |= flag
            exp[r] = e
    return ts, at, exp


def _rows(tables: list[list[str]]) -> tuple[list[str], list[list[int]]]:
    """The distinct ids of `tables`, sorted, and for each table the row (place among
    them) of each of its ids: one sort of all the ids, then one walk down it (no set and
    no dict of a million ids: each costs more than the walk)."""
    every = [rid for table in tables for rid in table]
    order = sorted(range(len(every)), key=every.__getitem__)
    ids: list[str] = []
    row_at = [0] * len(every)
    previous, row = None, -1
    for j in order:
        rid = every[j]
        if rid != previous:
            row += 1
            ids.append(rid)
            previous = rid
        row_at[j] = row
    del order, every
    found, start = [], 0
    for table in tables:
        found.append(row_at[start : start + len(table)])
        start += len(table)
    return ids, found


class Part(NamedTuple):
    """The quick part's columns of some of the store's rows (`part`), before the sorts
    that `finish` makes: what two processes build of two ranges of ids (`viewranks_halves`)
    and join (`join`)."""

    blob: bytes
    offsets: array[int]
    rows: dict[str, array[int] | bytes]
    """The columns with one value per row (`_PER_ROW`); `scope`: its number in `scopes`,
    0 for a row with no live entry."""
    scopes: list[str]
    """The scopes of the live entries, in the order first met (user versions first, then
    inferred ones, each table in its order)."""
    met: list[tuple[int, int]]
    """Where each of `scopes` was first met: (0 for a user version, 1 an inferred one,
    its place in its table as given by `part`'s `places`)."""
    keys: list[int]
    expiring: list[tuple[int, int]]
    long: list[tuple[int, int]]


_PER_ROW = (
    "flags",
    "tomb_ts",
    "tomb_at",
    "user_ts",
    "user_at",
    "user_exp",
    "inf_ts",
    "inf_at",
    "inf_exp",
    "live",
    "scope",
)


def build(
    tombs: _Slot,
    user: _Slot,
    inferred: _Slot,
    superseded: dict[str, int],
    floor: int,
) -> tuple[list[str], list[int], list[array[int] | bytes]]:
    """The columns (`_COLUMNS`) of the store's tables, and the scopes of the entries live
    at `floor` with how many each has. Column by column, one loop per table."""
    return finish(part(tombs, user, inferred, superseded, floor))


def part(
    tombs: _Slot,
    user: _Slot,
    inferred: _Slot,
    superseded: dict[str, int],
    floor: int,
    places: tuple[Iterable[int], Iterable[int]] | None = None,
) -> Part:
    """`build`'s columns of the tables given (all or some of the store's ids), but for
    the sorts. `places`: the place of each user and inferred version in its whole table
    (default: its place in the one given), for `Part.met`."""
    sup_ids = list(superseded)
    ids, (t_rows, u_rows, i_rows, s_rows) = _rows([tombs.ids, user.ids, inferred.ids, sup_ids])
    n = len(ids)
    try:  # ids are ASCII (genmem's, uuid's, the CLI's): one encode, lengths from the text
        blob = "".join(ids).encode("ascii")
        offsets = array("Q", accumulate(map(len, ids), initial=0))
    except UnicodeEncodeError:
        encoded = [rid.encode("utf-8", "surrogatepass") for rid in ids]
        blob, offsets = b"".join(encoded), array("Q", accumulate(map(len, encoded), initial=0))
    del ids
    flags = bytearray(n)
    t_ts, t_at = [0] * n, [0] * n
    for r, t, a in zip(t_rows, tombs.ts, tombs.at, strict=True):
        flags[r] |= _TOMB
        t_ts[r] = t
        t_at[r] = a
    u_ts, u_at, u_exp = _versions(user, u_rows, flags, _USER, _USER_NO_EXP, n)
    i_ts, i_at, i_exp = _versions(inferred, i_rows, flags, _INFERRED, _INFERRED_NO_EXP, n)
    for r, sup in zip(s_rows, superseded.values(), strict=True):
        flags[r] |= (_SUP_USER if sup & SUPERSEDED_BY_USER else 0) | (
            _SUP_INFERRED if sup & SUPERSEDED_BY_INFERRED else 0
        )
    del t_rows, s_rows
    live, scope = bytearray(n), [0] * n
    scope_no: dict[str, int] = {}
    met: list[tuple[int, int]] = []
    keys: list[int] = []
    expiring: list[tuple[int, int]] = []
    long: list[tuple[int, int]] = []
    if places is None:
        places = (range(len(u_rows)), range(len(i_rows)))
    # The entries live at `floor`, as `Index.alive` says (rules 8 to 11): a user version
    # that is current, neither superseded nor expired; an inferred one when no user one is
    # current. Each key is drop_rank as one integer: confidence, class, instant, id (the
    # rows are in the order of the ids).
    for user_class, slot, rows, no_exp, where in (
        (1, user, u_rows, _USER_NO_EXP, places[0]),
        (0, inferred, i_rows, _INFERRED_NO_EXP, places[1]),
    ):
        bits = _conf_bits(slot.confidence)
        table = (rows, slot.ts, slot.expires, slot.at, slot.scope, bits, where)
        for r, ts, exp, at, name, conf, place in zip(*table, strict=True):
            f = flags[r]
            tomb = f & _TOMB
            if tomb and ts <= t_ts[r]:
                continue
            if user_class:
                if f & _SUP_USER:
                    continue
            elif f & (_SUP_USER | _SUP_INFERRED) or (f & _USER and (not tomb or u_ts[r] > t_ts[r])):
                continue  # superseded, or the user version is current (rule 9)
            if not f & no_exp:
                if exp <= floor:
                    continue
                expiring.append((exp, r))
            live[r] = 2 - user_class
            number = scope_no.get(name)
            if number is None:
                number = scope_no[name] = len(scope_no)
                met.append((1 - user_class, place))
            scope[r] = number
            keys.append(((conf << 1 | user_class) << 64 | ts + _TS_OFFSET) << 32 | r)
            if (length := at & _LENGTH_MASK) > LONG_LINE:
                long.append((-length, r))
    per_row: dict[str, array[int] | bytes] = {
        "flags": bytes(flags),
        "tomb_ts": array("q", t_ts),
        "tomb_at": array("Q", t_at),
        "user_ts": array("q", u_ts),
        "user_at": array("Q", u_at),
        "user_exp": array("q", u_exp),
        "inf_ts": array("q", i_ts),
        "inf_at": array("Q", i_at),
        "inf_exp": array("q", i_exp),
        "live": bytes(live),
        "scope": array("I", scope),
    }
    return Part(blob, offsets, per_row, list(scope_no), met, keys, expiring, long)


def finish(done: Part) -> tuple[list[str], list[int], list[array[int] | bytes]]:
    """`build`'s answer from the `Part` of all the store's ids: the live entries sorted in
    drop order, the expiring ones by instant, the long ones longest first."""
    keys, scope = done.keys, done.rows["scope"]
    keys.sort(reverse=True)
    r_row = array("I", [k & 0xFFFFFFFF for k in keys])
    del keys[:]
    counts = [0] * len(done.scopes)
    for r in r_row:
        counts[scope[r]] += 1
    expiring, long = sorted(done.expiring), sorted(done.long)
    offsets, blob = done.offsets, done.blob
    fence = [blob[offsets[i] : offsets[i + 1]] for i in range(0, len(offsets) - 1, FENCE)]
    columns: dict[str, array[int] | bytes] = {
        **done.rows,
        "offsets": done.offsets,
        "blob": done.blob,
        "r_row": r_row,
        "e_exp": array("q", [e for e, _ in expiring]),
        "e_row": array("I", [r for _, r in expiring]),
        "l_row": array("I", [r for _, r in long]),
        "f_offsets": array("Q", accumulate(map(len, fence), initial=0)),
        "f_blob": b"".join(fence),
    }
    return done.scopes, counts, [columns[name] for name, _ in _COLUMNS]


def join(low: Part, high: Part) -> Part:
    """The `Part` of the ids of `low` and `high` together, when every id of `low` sorts
    before every id of `high`: its rows then theirs, the scopes numbered in the order
    first met in either (`Part.met`)."""
    n = len(low.offsets) - 1
    first = dict(zip(low.scopes, low.met, strict=True))
    for name, place in zip(high.scopes, high.met, strict=True):
        first[name] = min(first.get(name, place), place)
    scopes = sorted(first, key=first.__getitem__)
    number = {name: i for i, name in enumerate(scopes)}
    rows: dict[str, array[int] | bytes] = {}
    for name in _PER_ROW[:-1]:  # (all but `scope`)
        a, b = low.rows[name], high.rows[name]
        rows[name] = a + b  # type: ignore[operator]  # (bytes with bytes, arrays alike)
    # The scope numbers of each half in the joined order; 0 stays 0 where no entry is live.
    scope = array("I")
    for half in (low, high):
        renumber = [number[name] for name in half.scopes] or [0]
        lives = map(bool, half.rows["live"])
        scope += array("I", map(mul, map(renumber.__getitem__, half.rows["scope"]), lives))
    rows["scope"] = scope
    shift = repeat(n)
    return Part(
        low.blob + high.blob,
        low.offsets + array("Q", map(add, high.offsets[1:], repeat(len(low.blob)))),
        rows,
        scopes,
        [first[name] for name in scopes],
        low.keys + list(map(add, high.keys, shift)),
        low.expiring + [(e, r + n) for e, r in high.expiring],
        low.long + [(length, r + n) for length, r in high.long],
    )


_TS_OFFSET = 1 << 63
"""Added to an instant (signed, microseconds) to sort it as an unsigned one."""


def pack(
    head: dict[str, Any], scopes: list[str], counts: list[int], sections: list[array[int] | bytes]
) -> list[bytes]:
    """The file's parts: its header (with `head`'s identity of the memory file) and
    columns, each column 8-byte aligned and each 64 KiB block of them checksummed."""
    pieces: list[array[int] | bytes] = []
    where: list[tuple[int, int]] = []
    size = 0
    for data in sections:
        length = len(memoryview(data).cast("B"))
        where.append((size, length))
        pieces += [data, b"\0" * (-length % 8)]
        size += length + -length % 8
    body = b"".join(pieces)  # (one copy of the columns, not two)
    del pieces, sections
    view = memoryview(body)
    blocks = b"".join(
        xxhash.xxh3_64_digest(view[i : i + _BLOCK]) for i in range(0, len(body), _BLOCK)
    )
    encoded = _encode(_Head(**head, scopes=scopes, counts=counts, sections=where, blocks=blocks))
    named = os.fsencode(head["path"])[: _PATH_BYTES - 1].ljust(_PATH_BYTES, b"\0")
    head_length = len(encoded).to_bytes(4, "little")
    check = xxhash.xxh3_128_digest(named + head_length + encoded)
    start = len(_MAGIC) + _PATH_BYTES + 16 + 4 + len(encoded)
    return [_MAGIC, named, check, head_length, encoded, b"\0" * (-start % 8), body]


def parts(
    stored: _Stored,
    superseded: dict[str, int],
    floor: int,
    built: tuple[list[str], list[int], list[array[int] | bytes]] | None = None,
) -> list[bytes]:
    """The quick part of the store `stored` (whose tables' supersession bits are
    `superseded`) with the entries live at `floor`, as the parts of its file; `built`:
    what `build` returns of them, when the caller built it (`viewranks_halves`)."""
    if built is None:
        built = build(stored.tombs, stored.user, stored.inferred, superseded, floor)
    scopes, counts, sections = built
    head = {
        "format": FORMAT,
        "path": stored.path,
        "dev": stored.dev,
        "ino": stored.ino,
        "size": stored.size,
        "line": stored.line,
        "mtime_ns": stored.mtime_ns,
        "digest": stored.digest,
        "headerless": stored.headerless,
        "bad": stored.bad,
        "floor": floor,
    }
    return pack(head, scopes, counts, sections)
