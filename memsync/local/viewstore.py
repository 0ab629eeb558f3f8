"""The persistent view of a memory file (issue 20): the fold kept in the state directory.

A command that reads a memory file (`show`, `prompt`, `forget`) folds every record into a
per-id summary (`core.view.Index`, rules 8 to 10) before it can answer. This module keeps
that summary on disk, one store per memory file (`StateDir.view_store`), so that the next
command folds only the bytes appended since (appends and merges only ever append, rules 13
and 14) instead of the whole file.

What a store holds: for each id its latest tombstone, best user and best inferred version
(instant, expiry, where the line lies: offset and length, and for a version the
`record_hash` of its line, issue 21: the view digest and a receipt's buckets are sums of
them, so a warm digest reads no line), the supersession bits of rule 10 and where every
superseding entry lies (handoff hands each over), the twins met (rule 7: `Memory.view`
lists them), the bad lines and whether the file has a header; and the identity of the
bytes it folded.

The hash column is lazy: 0 is "not known". A command that does not need a digest (`prompt`,
`show`, `recall`, `forget`) hashes no line (hashing every line made a cold `prompt` three
times slower); the first digest hashes the versions still at 0 and saves them
(`located.fill_hashes`), so that the next one is warm.

Never trusted blindly. Before each use a store is checked against the open file:

- its format (this module's `FORMAT`, with memsync's version) and a checksum of its whole
  content: a store of another version, a corrupt one or a half-written one is ignored;
- the file's real path, device and inode: a store of another file, a file replaced by a
  compaction (rule 15) or a copy, restored from a backup or copied from another machine;
- the size: a file shorter than what was folded was truncated;
- a digest of every byte that was folded, and when the size is the one folded, the
  modification time: an edit in place, anywhere (`foldcheck`: a note spares the read
  while the file's status is unchanged).

A file that only grew is folded from where the store stopped; anything else is read from
the start.

A store is written whole to a temporary file, then renamed over the old one (readers see
the old store or the new one, never half of one). Any error while writing it (a full
disk, a read-only state directory) is swallowed: the answer came from the fold, the store
is only time. Several processes may use one store at once: each validates what it reads.
On the command line, the store of a large file may be written by a detached process
(`ViewStore.detach_from`) while the command answers from its fold; a command that finds
no store meanwhile waits for it (`memsync.local.viewbuild`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterable
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, cast

import msgspec
import xxhash

from memsync.core.lines import BadLine
from memsync.core.records import Described, Located
from memsync.core.version import __version__
from memsync.core.view import Index
from memsync.local.foldcheck import MIN_BYTES, digest, matches_identity, remember, verified
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from memsync.local.storage import FILE_MODE, private_dirs, write_all
from memsync.local.viewslots import _Slot, _slot

if TYPE_CHECKING:
    from memsync.local.reading import ScanResult

__all__ = ["DETACH_BYTES", "FORMAT", "MIN_BYTES", "SAVE_AFTER_BYTES", "Resumed", "ViewStore"]

FORMAT = f"memsync-view/5 {__version__}"
"""The store's format and the version of memsync that wrote it: any other is rebuilt."""


SAVE_AFTER_BYTES = 1024 * 1024
"""A store is written again once this much was folded past it: writing it after every
appended record would cost more than folding the few new lines does, and a command then
folds at most this much more than what was appended since it last ran."""

DETACH_BYTES = 16 * 1024 * 1024
"""The command line's `detach_from`: from this size (the fold's two processes start there,
`located.PARALLEL_BYTES`) writing the store costs the first `prompt` of a file as much
again as its fold (7.5 s against 4 s at a million records): it answers without waiting."""

_MAGIC = b"MSVIEW2\n"
_PATH_BYTES = 4096
"""The file's real path, after the magic, padded to this size: read alone by `_sweep`."""


class _Stored(msgspec.Struct, array_like=True, gc=False):
    format: str
    path: str
    dev: int
    ino: int
    size: int
    line: int
    mtime_ns: int
    digest: bytes
    headerless: bool
    records: int
    bad: list[tuple[int, str]]
    tombs: _Slot
    user: _Slot
    inferred: _Slot
    sup_ids: list[str]
    sup_bits: list[int]
    superseding: list[tuple[str, int]]
    twins: list[tuple[Located, Located]]


_AT = attrgetter("at")
_encode = msgspec.msgpack.Encoder().encode
_decoder: list[msgspec.msgpack.Decoder[_Stored]] = []


def _decode(payload: bytes) -> _Stored:
    """The store's record. Its decoder is built at first use: building it resolves the
    type hints of `_Stored` and what it holds (0.2 ms), which a quick `prompt`, answered
    from the ranks file, does not need (issue 20)."""
    if not _decoder:
        _decoder.append(msgspec.msgpack.Decoder(_Stored))
    return _decoder[0].decode(payload)


class Resumed(msgspec.Struct):
    """A fold resumed from a store: the summary of the file's first `offset` bytes (its
    first `line - 1` lines), and what it holds."""

    scan: ScanResult
    offset: int
    line: int
    held: int
    kept: tuple[bytes, bytes] = (b"", b"")
    """The store's hash columns of user and inferred versions (`ViewStore.save`)."""


class ViewStore(msgspec.Struct, frozen=True):
    """The persistent views of memory files in a state directory.

    `min_bytes`: files smaller than this are neither stored nor looked up (`MIN_BYTES`);
    `save_after`: how far a store may fall behind before it is written again
    (`SAVE_AFTER_BYTES`); `detach_from`: a store due of a fold of this many bytes or more
    is written by a detached process (`viewbuild.detached`) and `save` returns at once,
    so that the command answers from its fold meanwhile (None: always here; a library, a
    server and the daemon wait, only the command line detaches, from `DETACH_BYTES`).
    """

    state: StateDir
    min_bytes: int = MIN_BYTES
    save_after: int = SAVE_AFTER_BYTES
    detach_from: int | None = None

    def resume(self, path: Path, fd: int, name: str, *, hashes: bool = False) -> Resumed | None:
        """The stored fold of the file open as `fd` (at `path`, reported as `name`), when
        a store exists and is valid for it (see the module's docstring); else None.

        With `hashes`, each version holds the `record_hash` of its line when the store
        knows it (`Located.hash`, for a digest; else 0, the column is lazy); without, 0,
        and the hashes stay packed in `Resumed.kept` (an int object per id costs a prompt
        10 MB at 300k records)."""
        stored = self._valid(path, fd)
        if stored is None:
            return None
        kept = (stored.user.hash, stored.inferred.hash)
        scan = _scan_of(stored, name, hashes)
        return Resumed(scan, stored.size, stored.line, stored.size, kept)

    def built_meanwhile(self, path: Path, fd: int) -> bool:
        """Whether a detached process was writing the store of the file open as `fd` (at
        `path`) and this waited until it was done (`viewbuild.awaited`): a store worth
        resuming from again, where there was none."""
        if self.detach_from is None or os.fstat(fd).st_size < self.detach_from:
            return False  # the command line's alone: a library or a server does not wait
        from memsync.local.viewbuild import awaited

        return awaited(self.state, path)

    def _covers(self, path: Path, fd: int, offset: int) -> bool:
        """Whether the store and quick part there now are valid for the file open as `fd`
        and hold its first `offset` bytes at least (another process wrote them)."""
        from memsync.local import viewranks_write

        stored = self._valid(path, fd)
        size = viewranks_write.head_size(self.state.view_ranks(path))
        return stored is not None and stored.size >= offset and (size or 0) >= offset

    def newest(self, path: Path, fd: int, rid: str) -> tuple[int | None, int] | None:
        """From a valid store of the file open as `fd`: the newest `created_at` of any
        record of `rid` in the bytes it folded (None: no record), and how many bytes that
        is; None without a valid store. Its quick part first: a lookup of one id."""
        from memsync.local.viewranks_open import newest_stored  # (start-up)

        if os.fstat(fd).st_size >= self.min_bytes:
            state = self.state
            found = newest_stored(state.view_ranks(path), state.view_seen(path), path, fd, rid)
            if found is not None:
                return found
        stored = self._valid(path, fd)
        if stored is None:
            return None
        newest: int | None = None
        # Each table holds the latest record of its class (rule 9: later wins), so the
        # newest of the three is the newest of all the id's records.
        for slot in (stored.tombs, stored.user, stored.inferred):
            try:
                ts = slot.ts[slot.ids.index(rid)]
            except ValueError:
                continue
            newest = ts if newest is None else max(newest, ts)
        return newest, stored.size

    def _valid(self, path: Path, fd: int) -> _Stored | None:
        st = os.fstat(fd)
        if st.st_size < self.min_bytes:
            return None
        try:
            with open(self.state.view_store(path), "rb") as f:
                blob = f.read()
        except OSError:
            return None
        stored = _unpack(blob)
        if stored is None or not _matches(stored, self.state.view_seen(path), path, fd, st):
            return None
        return stored

    def save(
        self,
        path: Path,
        fd: int,
        scan: ScanResult,
        offset: int,
        line: int,
        held: int,
        lines: Callable[[list[Located]], Iterable[bytes]],
        kept: tuple[bytes, bytes] = (b"", b""),
        *,
        force: bool = False,
        now: int | None = None,
    ) -> None:
        """Write the fold `scan` of the file's first `offset` bytes as its store, when the
        file is large enough and the store now held (`held` bytes) is far enough behind.
        `lines(records)` reads the lines of `Located` records (in the order given): the
        versions folded since the store was read are read again for their kind, scope and
        confidence; their hashes are the fold's (`Located.hash`, 0: not known); `kept` is
        the `Resumed.kept` of the store read (the hashes of the versions it held). With
        `force`, written however little was folded since (hashes were filled in). Its quick
        part (`viewranks`) is written with it, or alone when it is behind the store, its
        entries live at `now` (the command's) or the clock, the earlier. Errors are
        swallowed (the store is only time): a full disk leaves the old store or none, and
        the next command folds more. From `detach_from` bytes, it is written by a detached
        process (this one's fold, copied by the fork) and this returns at once."""
        if offset < self.min_bytes or scan.superseding is None:
            return  # (superseding entries not collected: no store rather than a wrong one)
        from memsync.local import viewranks_write  # (start-up)
        from memsync.local.viewranks_halves import build_in_halves

        due = not held or force or offset - held >= max(self.save_after, 1)
        size = None if due else viewranks_write.head_size(self.state.view_ranks(path))
        if size is not None and size >= held:
            return  # neither the store nor its quick part is behind
        if self.detach_from is not None and offset >= self.detach_from:
            from memsync.local.viewbuild import detached

            here = msgspec.structs.replace(self, detach_from=None)
            args = (path, fd, scan, offset, line, held, lines, kept)
            write = partial(here.save, *args, force=force, now=now)
            if detached(self.state, path, fd, write, partial(here._covers, path, fd, offset)):
                return
        try:
            st = os.fstat(fd)
            mtime = st.st_mtime_ns if offset == st.st_size else -1
            started, made = time.time_ns(), digest(fd, offset)
            stored = _Stored(
                FORMAT,
                os.path.realpath(path),
                st.st_dev,
                st.st_ino,
                offset,
                line,
                mtime,
                made,
                bool(scan.headerless),
                scan.index.records,
                [(b.line, b.reason) for b in scan.bad],
                _slot(scan.index.tombs, None),
                _slot(scan.index.user, lines, kept[0]),
                _slot(scan.index.inferred, lines, kept[1]),
                list(scan.index.superseded),
                list(scan.index.superseded.values()),
                scan.superseding,
                cast(list[tuple[Located, Located]], scan.index.twins),
            )

            def write_store(record: _Stored = stored) -> None:
                if _replaced(path, st):
                    return
                payload = _encode(record)
                target = self.state.prepared(self.state.view_store(path))
                if not held:
                    _sweep(target)
                _write(target, _header(record.path, payload), payload)

            floor = now_us() if now is None else min(now, now_us())
            # On two cores at a million ids (`viewranks_halves`): the store is written
            # while the child builds its half of the quick part.
            sup = scan.index.superseded
            tables = (stored.tombs, stored.user, stored.inferred)
            built = build_in_halves(*tables, sup, floor, meanwhile=write_store if due else None)
            parts = viewranks_write.parts(stored, sup, floor, built)
            del stored, write_store  # its columns, before the write
            if _replaced(path, st):
                return  # (a compaction since, mostly while a detached process built it)
            _write(self.state.prepared(self.state.view_ranks(path)), *parts)
            remember(self.state.view_seen(path), path, st, offset, made, started)
        except (
            OSError,
            OverflowError,
            MemoryError,
            msgspec.DecodeError,
            msgspec.ValidationError,
        ):
            # The store is only time: the answer came from the fold. A line changed under
            # us is the next fold's; a process under a memory limit goes without a store.
            return


def _replaced(path: Path, st: os.stat_result) -> bool:
    """Whether `path` is no longer the file of status `st` (replaced or gone): its store
    would be of a file no command reads again."""
    try:
        return not os.path.samestat(os.stat(path), st)
    except OSError:
        return True


def _header(path: str, payload: bytes) -> bytes:
    """What precedes a store's payload: the magic, the real path of its memory file
    (padded, so that `_sweep` reads it alone), and the checksum of both."""
    named = os.fsencode(path)[: _PATH_BYTES - 1].ljust(_PATH_BYTES, b"\0")
    h = xxhash.xxh3_128(named)
    h.update(payload)
    return _MAGIC + named + h.digest()


def _pack(stored: _Stored) -> bytes:
    payload = _encode(stored)
    return _header(stored.path, payload) + payload


def _unpack(blob: bytes) -> _Stored | None:
    """The store in `blob`, or None when it is not a whole store of this format."""
    if not blob.startswith(_MAGIC):
        return None
    start = len(_MAGIC)
    named = blob[start : start + _PATH_BYTES]
    check = blob[start + _PATH_BYTES : start + _PATH_BYTES + 16]
    payload = blob[start + _PATH_BYTES + 16 :]
    h = xxhash.xxh3_128(named)
    h.update(payload)
    if h.digest() != check:
        return None  # half-written (never by us: we rename), or damaged
    try:
        stored = _decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if stored.format != FORMAT:
        return None
    if any(len(s.hash) != 8 * len(s.ids) for s in (stored.user, stored.inferred)):
        return None  # (written whole and checksummed: never)
    return stored


def _matches(stored: _Stored, seen: Path, path: Path, fd: int, st: os.stat_result) -> bool:
    """Whether `stored` is a fold of the first bytes of the file open as `fd` (checked,
    or vouched for by the note `seen`: `foldcheck.verified`)."""
    s = stored
    if not matches_identity(s.path, s.dev, s.ino, s.size, s.mtime_ns, path, st):
        return False
    return verified(seen, path, fd, st, s.size, s.digest)


def _scan_of(stored: _Stored, name: str, hashes: bool) -> ScanResult:
    """The `ScanResult` the store holds, its records as `Located` ones of file 0; with
    `hashes`, each version with the hash of its line (`ViewStore.resume`)."""
    from memsync.local.reading import ScanResult  # only to resume: a quick prompt needs none

    index = Index()
    index.records = stored.records
    tombs = stored.tombs
    for rid, ts, at, exp in zip(tombs.ids, tombs.ts, tombs.at, tombs.expires, strict=True):
        index.tombs[rid] = Located(b"", rid, ts, True, False, None, exp, at, 0)
    for table, slot, user in (
        (index.user, stored.user, True),
        (index.inferred, stored.inferred, False),
    ):
        column = slot.hash
        packed = (
            (int.from_bytes(column[i : i + 8], "big") for i in range(0, len(column), 8))
            if hashes
            else itertools.repeat(0, len(slot.ids))
        )
        columns = (slot.ids, slot.ts, slot.at, slot.expires, slot.kind, slot.scope, slot.confidence)
        for rid, ts, at, exp, kind, scope, conf, h in zip(*columns, packed, strict=True):
            table[rid] = Described(b"", rid, ts, False, user, None, exp, at, h, kind, scope, conf)
    index.superseded = dict(zip(stored.sup_ids, stored.sup_bits, strict=True))
    index.twins = list(stored.twins)
    scan = ScanResult(index, superseding=stored.superseding)
    scan.bad = [BadLine(name, n, reason) for n, reason in stored.bad]
    if stored.headerless:
        scan.headerless.append(name)
    return scan


def _sweep(target: Path) -> None:
    """Remove the stores beside `target` whose memory file is gone, or of another format:
    kept for nothing, they would fill the state directory (a test suite's temporary files,
    a memory moved away). Run when a store is written without one before (a new file, or
    one rewritten): a short read of each store. The check's notes (`foldcheck`) go with
    their store."""
    for name in os.listdir(target.parent):
        other = target.parent / name
        if not name.endswith((".view", ".ranks")) or other == target:
            continue
        try:
            with open(other, "rb") as f:
                head = f.read(len(_MAGIC) + _PATH_BYTES)
            if head.startswith((_MAGIC, b"MSRANK1\n")):
                named = head[len(_MAGIC) :].rstrip(b"\0")
                if named and os.path.exists(os.fsdecode(named)):
                    continue
            os.unlink(other)
        except OSError:
            continue
    names = set(os.listdir(target.parent))
    for name in names:
        if name.endswith(".seen") and name.removesuffix(".seen") + ".view" not in names:
            with contextlib.suppress(OSError):
                os.unlink(target.parent / name)
        elif name.endswith(".building") and name.removesuffix(".building") + ".view" not in names:
            from memsync.local.viewbuild import unlink_unheld

            unlink_unheld(target.parent / name)


def _write(target: Path, *parts: bytes) -> None:
    """`parts` one after the other as the file `target`, atomically: a temporary file
    beside it, then renamed.
    Temporary files of `target` that a killed process left are removed first."""
    private_dirs(target.parent)
    prefix = f".{target.name}.tmp-"
    for name in os.listdir(target.parent):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            pid = int(name[len(prefix) :])
            if pid != os.getpid() and not _alive(pid):
                with contextlib.suppress(OSError):
                    os.unlink(target.parent / name)
    tmp = target.with_name(f"{prefix}{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            for part in parts:
                write_all(fd, part)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: alive
    return True
