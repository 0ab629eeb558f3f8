"""The quick part of a large persistent view built on two cores (issue 20).

`viewranks_write.build` decides each id's live version in one loop per table: at a
million ids, most of the time a cold `prompt` spends writing its store. Its columns but
for the final sorts are per row, rows in the order of the ids, and each row depends on the
records of its id alone (SEMANTICS rules 8 to 11). So the ids are cut at one of them, the
pivot: a forked child builds the `Part` of the ids from the pivot on while this process
builds the part of those before, and the two are joined (`viewranks_write.join`) into
what one process would have built, byte for byte.

The child only reads: it writes its part to a pipe and leaves by `os._exit`. If it fails
for any reason, this process builds that part itself.
"""

from __future__ import annotations

import os
import pickle
import signal
from array import array
from collections.abc import Callable
from itertools import chain, compress, repeat
from operator import ge, lt
from typing import NamedTuple

from memsync.local.forking import fork_is_safe
from memsync.local.viewranks_write import Part, _Slot, finish, join, part

__all__ = ["PARALLEL_IDS", "build_in_halves"]

PARALLEL_IDS = 50_000
"""Tables of this many versions and tombstones together are built in two processes;
smaller ones in one: forking and sending half of the part back would cost more than
it saves. (Measured on 2 cores, median of 5 to 7 cold `prompt`s each: at 57,000 ids
0.45 s in two processes against 0.48 s in one; at 96,000, 0.69 s against 0.74 s.)"""

_SAMPLE = 4096
"""The pivot is taken among about this many of the tables' ids, evenly spaced."""
_SHARE = 0.45
"""The share of the ids this process builds: it then joins the two parts and sorts."""


class _Cols(NamedTuple):
    """A table's columns that `viewranks_write.part` reads (`_Slot`)."""

    ids: list[str]
    ts: list[int]
    at: list[int]
    expires: list[int | None]
    scope: list[str]
    confidence: list[float]


def build_in_halves(
    tombs: _Slot,
    user: _Slot,
    inferred: _Slot,
    superseded: dict[str, int],
    floor: int,
    *,
    parallel_from: int = PARALLEL_IDS,
    share: float = _SHARE,
    meanwhile: Callable[[], None] | None = None,
) -> tuple[list[str], list[int], list[array[int] | bytes]]:
    """What `viewranks_write.build` returns, built in two processes when the tables hold
    `parallel_from` ids or more and a second process can be forked safely (no other thread
    runs: a fork copies only the calling one) on a core of its own; else in this one.
    `share`: about the part of the ids built here (the rest in the child). `meanwhile` is
    called here first (while the child builds its part); if it raises, the child is
    killed and so is the build."""
    tables = (tombs.ids, user.ids, inferred.ids)
    pivot = None
    total = sum(map(len, tables))
    if total >= max(parallel_from, 1) and fork_is_safe():
        step = max(1, total // _SAMPLE)
        sample = sorted(chain.from_iterable(ids[::step] for ids in tables))
        pivot = sample[min(len(sample) - 1, int(len(sample) * share))] if sample else None
    if pivot is None:
        if meanwhile is not None:
            meanwhile()
        return finish(part(tombs, user, inferred, superseded, floor))
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process or memory to spare: all of it here
        os.close(read_end)
        os.close(write_end)
        if meanwhile is not None:
            meanwhile()
        return finish(part(tombs, user, inferred, superseded, floor))
    if pid == 0:  # the child: build, send, and leave without running anything of the parent's
        code = 1
        try:
            os.close(read_end)
            high = _part(tombs, user, inferred, superseded, floor, pivot, high=True)
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(high, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    got: Part | None = None
    try:
        if meanwhile is not None:
            meanwhile()
        low = _part(tombs, user, inferred, superseded, floor, pivot, high=False)
        with os.fdopen(read_end, "rb") as pipe:
            try:  # (our own child's, through our own pipe)
                got = pickle.load(pipe)  # noqa: S301
            except (pickle.UnpicklingError, EOFError, ValueError):
                got = None
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        _, status = os.waitpid(pid, 0)
    if not isinstance(got, Part) or os.waitstatus_to_exitcode(status) != 0:
        got = _part(tombs, user, inferred, superseded, floor, pivot, high=True)
    return finish(join(low, got))


def _part(
    tombs: _Slot,
    user: _Slot,
    inferred: _Slot,
    superseded: dict[str, int],
    floor: int,
    pivot: str,
    *,
    high: bool,
) -> Part:
    """The `Part` of the ids before `pivot`, or with `high` of the others, with each
    version's place in its whole table (`Part.met`)."""
    side = ge if high else lt
    sup = {rid: bits for rid, bits in superseded.items() if side(rid, pivot)}
    (t, _), (u, u_places), (i, i_places) = (
        _within(slot, pivot, high) for slot in (tombs, user, inferred)
    )
    return part(t, u, i, sup, floor, (u_places, i_places))


def _within(slot: _Slot, pivot: str, high: bool) -> tuple[_Cols, list[int]]:
    """The rows of `slot` whose id is before `pivot` (with `high`: the others), and the
    place of each in `slot`."""
    kept = list(map(ge if high else lt, slot.ids, repeat(pivot)))
    cols = _Cols(
        list(compress(slot.ids, kept)),
        list(compress(slot.ts, kept)),
        list(compress(slot.at, kept)),
        list(compress(slot.expires, kept)),
        list(compress(slot.scope, kept)),
        list(compress(slot.confidence, kept)),
    )
    return cols, list(compress(range(len(kept)), kept))
