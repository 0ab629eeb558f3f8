"""Rule 16's hard part: after compaction renames the new file into place, copy what writers
still appended to the old inode (the drain), set the old file aside so that an interrupted
compaction can be finished, and clean up what a killed one left. Also the side file of
rejected bad lines (rule 4)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import msgspec

from memsync.core.compaction_limits import (
    Rejected,
)
from memsync.core.timestamps import format_ts
from memsync.errors import NotQuiet
from memsync.local.asides import asides_of
from memsync.local.fresh import header_line, now_us
from memsync.local.lock import held, lock_path
from memsync.local.logs import get_logger
from memsync.local.storage import CHUNK_BYTES, append_bytes, full_fsync
from memsync.local.writers import Writer, find_writers, who

__all__ = [
    "Drained",
    "clean_up",
    "drain",
    "finish_drain",
    "recover_after_crash",
    "recover_all",
    "rejected_path",
    "set_aside",
    "unlink",
    "write_rejected",
]

logger = get_logger(__name__)

_SETTLE = 0.05
"""Drain at least this long: a writer may have resolved the path before the rename and not
yet installed its fd where /proc shows it."""

_POLL = 0.02

_STALE_AFTER = 60.0


def rejected_path(path: Path) -> Path:
    """The side file of a memory file's bad lines: `<file>.rejected` (rule 4)."""
    return path.with_name(path.name + ".rejected")


@dataclass(frozen=True, slots=True)
class Drained:
    """What `drain` did.

    Attributes:
        lines, size: the complete lines copied, and their size in bytes.
        offset: where the copy stopped in the old inode (after its last complete line).
        torn: an unterminated last line left after `offset` (b"" when none).
        holders: processes that still held the old inode open for writing at the end.
        unknown: no detector could tell who held it at the end (`holders` is then empty,
            which does not mean nobody does).
    """

    lines: int
    size: int
    offset: int
    torn: bytes
    holders: tuple[Writer, ...]
    unknown: bool = False


def drain(old_fd: int, offset: int, path: Path, until: float) -> Drained:
    """Copy to `path` the complete lines that reach the old inode `old_fd` from `offset` on.

    Runs until no other process holds the old inode open for writing (but at least
    `_SETTLE` seconds), or until the monotonic clock passes `until`; where no detector of
    `memsync.local.writers` can tell who holds it, until `until`. Appends go to `path` as
    whole lines with one write each (rule 13); the caller holds the file's lock, so `path`
    is the new inode.
    """
    st = os.fstat(old_fd)
    can_tell = False
    settle = time.monotonic() + min(_SETTLE, max(0.0, until - time.monotonic()))
    lines = copied = 0
    pending = b""
    holders: tuple[Writer, ...] = ()
    while True:
        chunk = _pread_all(old_fd, offset + len(pending))
        data = pending + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            append_bytes(path, data[:cut])
            lines += data.count(b"\n", 0, cut)
            copied += cut
            offset += cut
        pending = data[cut:]
        now = time.monotonic()
        if now >= until or now >= settle:
            found = find_writers(st.st_dev, st.st_ino)
            can_tell, holders = found is not None, tuple(found or ())
            if can_tell and not holders and _pread_all(old_fd, offset + len(pending)):
                continue  # a last write landed between the read and the check
            if now >= until or (can_tell and not holders):
                break
        time.sleep(_POLL)
    if lines:
        logger.info("%s: copied %d line(s) that reached the old file late", path, lines)
    return Drained(lines, copied, offset, pending, holders, unknown=not can_tell)


def finish_drain(path: Path, aside: Path | None, drained: Drained, now: int) -> int:
    """After a drain: while some process still holds the old inode open for writing, or
    none can be told (`Drained.unknown`: "cannot tell" is not "nobody"), keep its aside
    link, renamed for the offset reached, so that the next compaction copies what it
    writes later; else the link goes and an unterminated last line goes to the side
    file. Returns how many lines went there."""
    if drained.holders or drained.unknown:
        holder = who(drained.holders) if drained.holders else "a process (cannot tell)"
        if aside is not None:
            keep = aside.with_name(_ASIDE.sub(f".old-{os.getpid()}-{drained.offset}", aside.name))
            os.replace(aside, keep)
            logger.warning(
                "%s: %s may still hold the old file open; the next compaction copies what it "
                "writes there",
                path,
                holder,
            )
            return 0
        logger.warning(
            "%s: %s may still hold the old file open; what it writes is lost", path, holder
        )
    if aside is not None:
        unlink(aside)
    if drained.torn:
        write_rejected(path, [Rejected(0, drained.torn, "unterminated last line")], now)
        return 1
    return 0


def _pread_all(fd: int, offset: int) -> bytes:
    parts: list[bytes] = []
    while True:
        block = os.pread(fd, CHUNK_BYTES, offset)
        if not block:
            return b"".join(parts)
        parts.append(block)
        offset += len(block)


def write_rejected(path: Path, bad: list[Rejected], now: int) -> None:
    """Append bad lines, byte for byte, to `<file>.rejected` (0600) and fsync it.

    Each is preceded by a note naming where it came from. The note is a header line (rule
    2: a header anywhere else is skipped), so `memsync check` on the side file lists
    exactly the bad lines."""
    side = rejected_path(path)
    parts: list[bytes] = []
    for item in bad:
        note: dict[str, object] = {
            "format": "agent-memory/0.1",
            "created_at": format_ts(now),
            "rejected_from": path.name,
            "reason": item.reason,
        }
        if item.line:
            note["line"] = item.line
        parts.append(msgspec.json.encode(note) + b"\n" + item.raw + b"\n")
    append_bytes(side, b"".join(parts), header=header_line(now))
    fd = os.open(side, os.O_RDONLY | os.O_CLOEXEC)
    try:
        full_fsync(fd)
    finally:
        os.close(fd)


def set_aside(path: Path, offset: int) -> Path | None:
    """Hard-link the old inode as `.<name>.old-<pid>-<offset>`: if this process is killed
    after the rename, the next compaction drains it from `offset` (see `clean_up`). Where
    the filesystem has no hard links, compaction goes on without."""
    aside = path.with_name(f".{path.name}.old-{os.getpid()}-{offset}")
    try:
        os.link(path, aside)
    except OSError as exc:
        logger.debug("%s: no hard link for the old file (%s)", path, exc)
        return None
    return aside


_TMP = re.compile(r"\.tmp-(?:compact-)?(\d+)\Z")
_ASIDE = re.compile(r"\.old-(\d+)-(\d+)\Z")


def clean_up(path: Path, now: int) -> None:
    """Under the lock, deal with what a killed compaction left (rule 16).

    - `.<name>.tmp-*` temp files whose process is dead, or older than a minute, are
      removed (a compaction's own temp file is only ever written under the lock, so any
      found here is stale).
    - `.<name>.old-<pid>-<offset>` links to an old inode: if it is still the file, the kill
      came before the rename and the link goes; otherwise the complete lines after
      `offset` are copied into the file (a kill during the drain) before it goes.
    """
    prefix = f".{path.name}."
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        rest = name[len(prefix) - 1 :]
        leftover = path.parent / name
        if rest.startswith(".tmp-"):
            m = _TMP.match(rest)
            if (m and rest.startswith(".tmp-compact-")) or _stale(leftover, m):
                logger.info("%s: removing a stale temp file", leftover)
                unlink(leftover)
        elif (m := _ASIDE.match(rest)) is not None:
            _recover(path, leftover, int(m.group(2)), now)


def recover_after_crash(path: Path) -> None:
    """What a compaction killed right after its rename left beside `path` (an aside link
    to the old inode holding lines a lock-free writer appended meanwhile), copied into the
    file now, at the start of any command or pass that touches it, not at the next
    compaction a day later (issue 13, item 8; rule 16).

    Costs one directory listing when nothing is left. Under the file's lock, taken once
    without waiting: a busy file is left for the next command. A compaction still alive
    (its pid in the link's name) is left to finish its own drain.
    """
    names = asides_of(path)
    if not names:
        return
    for name in names:
        m = _ASIDE.match(name[len(path.name) + 1 :])
        if m is not None and _alive(int(m.group(1))):
            return
    try:
        with held(lock_path(path), 0, lambda: NotQuiet(f"{path}: locked")):
            clean_up(path, now_us())
    except NotQuiet:
        return


def recover_all(paths: Iterable[Path]) -> None:
    """`recover_after_crash` for each of `paths` (a merge's destination and sources)."""
    for path in paths:
        recover_after_crash(path)


def _stale(leftover: Path, m: re.Match[str] | None) -> bool:
    try:
        age = time.time() - os.lstat(leftover).st_mtime
    except OSError:
        return False
    if age > _STALE_AFTER:
        return True
    return m is not None and not _alive(int(m.group(1)))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recover(path: Path, aside: Path, offset: int, now: int) -> None:
    try:
        fd = os.open(aside, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        old, cur = os.fstat(fd), os.stat(path)
        if (old.st_dev, old.st_ino) == (cur.st_dev, cur.st_ino):
            unlink(aside)  # killed before its rename: the file is the old one
            return
        drained = drain(fd, offset, path, time.monotonic())
        finish_drain(path, aside, drained, now)
    finally:
        os.close(fd)
    if drained.lines:
        logger.warning(
            "%s: copied %d line(s) that reached the file replaced by an earlier compaction",
            path,
            drained.lines,
        )


def unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)
