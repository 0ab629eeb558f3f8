"""Whether a fold kept in the state directory is one of a memory file's first bytes
(issue 20): the identity of the file it folded, and a digest of every byte it folded.

Reading every folded byte costs about 0.1 s at 1M records, three times the interpreter's
own start-up: too much to pay at every command when the file has not changed. So a check
that read them leaves a note beside the store (`StateDir.view_seen`): "while this file's
status (device, inode, size, modification and change times) is exactly this, its first
`size` bytes have this digest". The next command whose `fstat` is the same to the
nanosecond trusts the note and reads nothing; any write to the file changes its change
time (`st_ctime`, which no user can set), so an edit in place, a truncation, a copy over it
or a restore from a backup all make the note stale, and the bytes are read again.

Two limits, the ones git's index has ("racy git"), are handled:

- A file written within a tick of the filesystem's clock of our check could be written
  again within the same tick, and keep its status: a note is left only for a file whose
  change time is `_RACY_NS` older than the check's start.
- Network filesystems set times with the server's clock, and some cache attributes: no
  note is left for a file on one (`netfs.on_network_fs`), its bytes are read every time.

`carry` lets a writer that appended to a file under its lock (`memsync add`) move the
note to the file's new status: the bytes the note vouches for are before the append, which
`O_APPEND` never touches. It checks that the file grew by exactly its own bytes; a
same-size edit in place in the instant between its two `fstat` calls, or within the same
clock tick after it, would go unnoticed until the file next changes. Linux from 6.13
(multigrain timestamps: a change time that was read is never reused by the next write) and
APFS (nanosecond times) close the second window; the first is microseconds wide.
"""

from __future__ import annotations

import contextlib
import os
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsync.local.statedir import StateDirLike

__all__ = [
    "MIN_BYTES",
    "carry",
    "carry_append",
    "digest",
    "matches_identity",
    "remember",
    "verified",
]

MIN_BYTES = 256 * 1024
"""Files smaller than this get no persistent view by default (`viewstore.ViewStore`):
folding them takes a few milliseconds, less than reading and checking a store, and the
state directory stays free of them."""

_BLOCK = 1 << 20
"""How much of the file `digest` reads at a time."""

_RACY_NS = 50_000_000
"""A file changed less than this before a check is not vouched for: coarse filesystem
clocks tick every 1 to 10 ms (Linux's jiffies), and the margin covers them with room."""

_SEEN = b"memsync-seen/1"
_PAIRS = 4
"""How many (size, digest) pairs a note keeps for one status: the store and its quick part
may have folded different lengths, and each reader checks its own."""


def matches_identity(
    real: str, dev: int, ino: int, size: int, mtime_ns: int, path: Path, st: os.stat_result
) -> bool:
    """Whether a fold of `size` bytes of the file `real` (device, inode, modification
    time) may be one of the first bytes of `path` (`st`): its digest decides."""
    if (dev, ino) != (st.st_dev, st.st_ino) or st.st_size < size:
        return False
    if st.st_size == size and st.st_mtime_ns != mtime_ns:
        return False  # same size, written since: an edit in place
    return real == os.path.realpath(path)


def digest(fd: int, size: int) -> bytes:
    """A digest of the first `size` bytes of `fd`, every one of them: an edit in place
    anywhere in what was folded (an editor that truncates and rewrites the same inode) is
    noticed even when lines were appended after it. xxh3 runs at memory speed: about 0.1 s
    for 300 MB (1M records) from the page cache, beside seconds for the fold it saves."""
    import xxhash  # (start-up: `add` imports this module, and reads no byte)

    h = xxhash.xxh3_128()
    h.update(size.to_bytes(8, "big"))
    done = 0
    while done < size:  # os.pread, not preadv: macOS has it on every version we run on
        block = os.pread(fd, min(_BLOCK, size - done), done)
        if not block:
            break  # shorter than folded: the size check has already said so
        h.update(block)
        done += len(block)
    return h.digest()


def verified(note: Path, path: Path, fd: int, st: os.stat_result, size: int, want: bytes) -> bool:
    """Whether the first `size` bytes of the file open as `fd` (at `path`, status `st`)
    have the digest `want`: from the note `note` when it vouches for exactly this status,
    else by reading them (`digest`), and then a note is left for the next command."""
    status = _status(st)
    pairs = _read(note, status)
    if (size, want) in pairs:
        return True
    started = time.time_ns()
    if digest(fd, size) != want:
        return False
    remember(note, path, st, size, want, started, pairs)
    return True


def remember(
    note: Path,
    path: Path,
    st: os.stat_result,
    size: int,
    made: bytes,
    started: int,
    pairs: list[tuple[int, bytes]] | None = None,
) -> None:
    """Leave a note that the file at `path` (status `st`) has the digest `made` over its
    first `size` bytes, as read from `started` (`time.time_ns()` before the read), unless
    the file changed too recently to be told apart from a change to come, or lies on a
    network filesystem. `pairs`: what the note already holds for this status."""
    if st.st_ctime_ns > started - _RACY_NS:
        return
    from memsync.local.netfs import on_network_fs  # (a note is left rarely)

    if on_network_fs(path):
        return
    status = _status(st)
    if pairs is None:
        pairs = _read(note, status)
    kept = [(size, made), *[p for p in pairs if p != (size, made)][: _PAIRS - 1]]
    _write(note, status, kept)


def carry(note: Path, before: os.stat_result, after: os.stat_result, appended: int) -> None:
    """Move the note on a file from its status `before` an append of `appended` bytes to
    its status `after` it: only when the note vouched for `before`, and the file (the same
    inode) grew by exactly those bytes (no other writer came between)."""
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        return
    if after.st_size != before.st_size + appended:
        return
    pairs = _read(note, _status(before))
    if pairs:
        _write(note, _status(after), pairs)


def carry_append(
    path: Path, state_dir: StateDirLike | None, before: os.stat_result | None, appended: int
) -> None:
    """`carry` for memory file `path` in `state_dir` (None: the command line's), after an
    append of `appended` bytes to it under its lock; `before`: its status before (None: it
    did not exist). Files too small for a persistent view have no note to carry."""
    if before is None or before.st_size < MIN_BYTES:
        return
    from memsync.local.statedir import StateDir  # (start-up: small files stop above)

    with contextlib.suppress(OSError):
        carry(StateDir.of(state_dir).view_seen(path), before, os.stat(path), appended)


def _status(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(note: Path, status: tuple[int, ...]) -> list[tuple[int, bytes]]:
    """The (size, digest) pairs of `note` when it is whole and for `status`; else none."""
    try:
        with open(note, "rb") as f:
            blob = f.read(4096)
    except OSError:
        return []
    body, _, check = blob.rpartition(b"\n")
    if not check.isdigit() or zlib.crc32(body) != int(check):
        return []  # half-written or damaged: read the bytes
    fields = body.split(b"\n")
    if len(fields) < 2 or fields[0] != _SEEN:
        return []
    try:
        if tuple(int(v) for v in fields[1].split()) != status:
            return []
        pairs = []
        for field in fields[2:]:
            size, hexed = field.split()
            pairs.append((int(size), bytes.fromhex(hexed.decode("ascii"))))
    except (ValueError, UnicodeDecodeError):
        return []
    return pairs


def _write(note: Path, status: tuple[int, ...], pairs: list[tuple[int, bytes]]) -> None:
    """Write `note` in place, in one `write` (a few hundred bytes): a reader or a second
    writer meeting half of it finds its checksum wrong and reads the bytes, which is only
    slower; no temporary file is left by a process killed meanwhile. Errors are
    swallowed: a note only saves time."""
    lines = [_SEEN, " ".join(map(str, status)).encode()]
    lines += [f"{size} {made.hex()}".encode() for size, made in pairs]
    body = b"\n".join(lines)
    blob = body + b"\n" + str(zlib.crc32(body)).encode()
    with contextlib.suppress(OSError):
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, blob)
            os.ftruncate(fd, len(blob))
        finally:
            os.close(fd)
