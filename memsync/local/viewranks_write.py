"""Writing the quick part of a persistent view (`memsync.local.viewranks`, issue 20): its
columns from the store's tables, in one pass over the ids and one sort of the live ones."""

from __future__ import annotations

import os
import struct
from array import array
from typing import Any, Protocol

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
    FORMAT,
    LONG_LINE,
    _encode,
    _Head,
    _live,
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


__all__ = ["build", "head_size", "pack", "parts"]


def _rank_bits(confidence: float) -> int:
    """A confidence as an unsigned integer in the same order (-0.0 as 0.0)."""
    bits: int = struct.unpack("<Q", struct.pack("<d", confidence + 0.0))[0]
    return bits ^ 0xFFFFFFFFFFFFFFFF if bits >> 63 else bits | 1 << 63


def build(
    tombs: _Slot,
    user: _Slot,
    inferred: _Slot,
    superseded: dict[str, int],
    floor: int,
) -> tuple[list[str], list[int], list[bytes]]:
    """The columns (`_COLUMNS`, as bytes) of the store's tables, and the scopes of the live
    entries with how many each has: the entries live at `floor` in drop order."""
    tpos = dict(zip(tombs.ids, range(len(tombs.ids)), strict=True))
    upos = dict(zip(user.ids, range(len(user.ids)), strict=True))
    ipos = dict(zip(inferred.ids, range(len(inferred.ids)), strict=True))
    ids = sorted(tpos.keys() | upos.keys() | ipos.keys() | superseded.keys())
    encoded = [rid.encode("utf-8", "surrogatepass") for rid in ids]
    offsets = array("Q", [0])
    total = 0
    for e in encoded:
        total += len(e)
        offsets.append(total)
    cols: dict[str, array[Any]] = {name: array(code) for name, code in _COLUMNS}
    flags, r_row, r_user, r_scope = cols["flags"], cols["r_row"], cols["r_user"], cols["r_scope"]
    t_ts, t_at = cols["tomb_ts"], cols["tomb_at"]
    u_ts, u_at, u_exp = cols["user_ts"], cols["user_at"], cols["user_exp"]
    i_ts, i_at, i_exp = cols["inf_ts"], cols["inf_at"], cols["inf_exp"]
    scope_no: dict[str, int] = {}
    keys: list[int] = []
    scope_of: dict[int, int] = {}
    for row, rid in enumerate(ids):
        f = 0
        bits = superseded.get(rid, 0)
        if bits & SUPERSEDED_BY_USER:
            f |= _SUP_USER
        if bits & SUPERSEDED_BY_INFERRED:
            f |= _SUP_INFERRED
        k = tpos.get(rid)
        tts = 0
        if k is not None:
            f |= _TOMB
            tts = tombs.ts[k]
            t_ts.append(tts)
            t_at.append(tombs.at[k])
        else:
            t_ts.append(0)
            t_at.append(0)
        uts = uexp = its = iexp = 0
        ku = upos.get(rid)
        if ku is not None:
            f |= _USER
            uts, ue = user.ts[ku], user.expires[ku]
            f |= _USER_NO_EXP if ue is None else 0
            uexp = 0 if ue is None else ue
            u_at.append(user.at[ku])
        else:
            u_at.append(0)
        ki = ipos.get(rid)
        if ki is not None:
            f |= _INFERRED
            its, ie = inferred.ts[ki], inferred.expires[ki]
            f |= _INFERRED_NO_EXP if ie is None else 0
            iexp = 0 if ie is None else ie
            i_at.append(inferred.at[ki])
        else:
            i_at.append(0)
        flags.append(f)
        u_ts.append(uts)
        u_exp.append(uexp)
        i_ts.append(its)
        i_exp.append(iexp)
        which = _live(f, tts, uts, uexp, its, iexp, floor)
        if which:
            slot, k = (user, ku) if which == 1 else (inferred, ki)
            assert k is not None
            conf = _rank_bits(slot.confidence[k])
            scope_of[row] = scope_no.setdefault(slot.scope[k], len(scope_no))
            # drop_rank as one integer: confidence, user, instant, then the id (its row:
            # the rows are in the order of the ids).
            keys.append((((conf << 1 | (which == 1)) << 64 | slot.ts[k] + (1 << 63)) << 32) | row)
    keys.sort(reverse=True)
    order = [k & 0xFFFFFFFF for k in keys]
    r_row.extend(order)
    r_scope.extend(map(scope_of.__getitem__, order))
    r_user.extend(k >> 96 & 1 for k in keys)
    counts = [0] * len(scope_no)
    for s in cols["r_scope"]:
        counts[s] += 1
    expiring: list[tuple[int, int]] = []
    long: list[tuple[int, int]] = []
    for pos, (row, is_user) in enumerate(zip(order, cols["r_user"], strict=True)):
        exp_none = flags[row] & (_USER_NO_EXP if is_user else _INFERRED_NO_EXP)
        if not exp_none:
            expiring.append(((u_exp if is_user else i_exp)[row], pos))
        length = (u_at if is_user else i_at)[row] & _LENGTH_MASK
        if length > LONG_LINE:
            long.append((-length, pos))
    expiring.sort()
    long.sort()
    cols["e_exp"].extend(e for e, _ in expiring)
    cols["e_pos"].extend(p for _, p in expiring)
    cols["l_pos"].extend(p for _, p in long)
    cols["offsets"] = offsets
    blob = b"".join(encoded)
    sections = [blob if name == "blob" else cols[name].tobytes() for name, _ in _COLUMNS]
    return list(scope_no), counts, sections


def pack(
    head: dict[str, Any], scopes: list[str], counts: list[int], sections: list[bytes]
) -> list[bytes]:
    """The file's parts: its header (with `head`'s identity of the memory file) and
    columns, each column 8-byte aligned and each 64 KiB block of them checksummed."""
    body = bytearray()
    where: list[tuple[int, int]] = []
    for data in sections:
        where.append((len(body), len(data)))
        body += data
        body += b"\0" * (-len(body) % 8)
    blocks = b"".join(
        xxhash.xxh3_64_digest(body[i : i + _BLOCK]) for i in range(0, len(body), _BLOCK)
    )
    encoded = _encode(_Head(**head, scopes=scopes, counts=counts, sections=where, blocks=blocks))
    named = os.fsencode(head["path"])[: _PATH_BYTES - 1].ljust(_PATH_BYTES, b"\0")
    length = len(encoded).to_bytes(4, "little")
    check = xxhash.xxh3_128_digest(named + length + encoded)
    start = len(_MAGIC) + _PATH_BYTES + 16 + 4 + len(encoded)
    return [_MAGIC, named, check, length, encoded, b"\0" * (-start % 8), bytes(body)]


def parts(stored: _Stored, superseded: dict[str, int], floor: int) -> list[bytes]:
    """The quick part of the store `stored` (whose tables' supersession bits are
    `superseded`) with the entries live at `floor`, as the parts of its file."""
    scopes, counts, sections = build(stored.tombs, stored.user, stored.inferred, superseded, floor)
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
