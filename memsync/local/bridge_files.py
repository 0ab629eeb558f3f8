"""Reading and replacing a bridged file (issue 22, item 4): never losing a byte someone
else wrote, keeping links, modes and owners.

- `read_bridged` reads the file through any symbolic link (stow, chezmoi and yadm link
  `CLAUDE.md` and `AGENTS.md` into a repository): the bytes, the link's target, its stat.
- `replace_if_unchanged` writes new bytes to the *target* (a temp file in the target's
  folder, renamed over it, so a reader sees the old file or the new one, and a kill -9
  leaves it whole; the temp file a killed memsync left is removed by the next write) only
  if the target still holds what was read: a person or an agent writing meanwhile keeps
  their bytes, and the caller reads again. A file changed less than `SETTLE_NS` ago is not
  replaced before it has been still that long: an editor or an agent that truncated it
  may not have written its bytes yet, and they would land in the file memsync replaced
  (so be lost). A write that lands on the old file between the check and the rename is
  found after it, and the writer's bytes are put back. The link stays a link; the mode
  and the owner are the target's. A read-only target (Home Manager links into
  `/nix/store`), a folder memsync cannot write a temp file in, or a hard-linked file (a
  rename would split the links) is refused with the reason (`BridgeRefused`).
- `may_create`: memsync never creates a `CLAUDE.md` or `CLAUDE.local.md` in a project
  that has an `AGENTS.md` (Claude Code reads `AGENTS.md` only where no `CLAUDE.md` is).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from memsync.errors import MemsyncError
from memsync.local.storage import fsync_dir, write_all

__all__ = ["BridgeRefused", "Snapshot", "may_create", "read_bridged", "replace_if_unchanged"]

_CLAUDE_NAMES = ("CLAUDE.md", "CLAUDE.local.md")

SETTLE_NS = 300_000_000
"""How long a bridged file must have been still (its mtime that far in the past) before
memsync replaces it: a write in place truncates first (the mtime now) and writes after."""


class BridgeRefused(MemsyncError):
    """memsync will not write this bridged file: the message says why."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A bridged file as read: its configured `path`, the `target` written (the path
    itself, or where its links lead), its bytes (None: it does not exist yet) and the
    target's stat."""

    path: Path
    target: Path
    data: bytes | None
    stat: os.stat_result | None


def read_bridged(path: Path) -> Snapshot:
    """The file at `path`, read through its links.

    Raises:
        BridgeRefused: it is a folder, or its folder does not exist.
        OSError: it cannot be read (naming it).
    """
    target = Path(os.path.realpath(path))
    try:
        with open(target, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise BridgeRefused(f"{path}: its folder {target.parent} does not exist") from None
        return Snapshot(path, target, None, None)
    except IsADirectoryError:
        raise BridgeRefused(f"{path}: is a folder, not a file") from None
    return Snapshot(path, target, data, st)


def may_create(path: Path, home: Path | None = None) -> str | None:
    """Why memsync must not create the missing file `path`, or None when it may.

    A `CLAUDE.md` or `CLAUDE.local.md` of a project (`<dir>/` or `<dir>/.claude/`) is
    never created when an `AGENTS.md` is in `<dir>` or a folder above it: Claude Code
    would stop reading that `AGENTS.md`. The user's own `~/.claude/CLAUDE.md` does not
    hide it and may be created."""
    if path.name not in _CLAUDE_NAMES:
        return None
    home = Path.home() if home is None else home
    folder = Path(os.path.abspath(path)).parent
    if folder == home / ".claude":
        return None
    project = folder.parent if folder.name == ".claude" else folder
    for d in (project, *project.parents):
        if (d / "AGENTS.md").exists():
            return (
                f"{path}: not created: {d / 'AGENTS.md'} exists, and Claude Code stops "
                f"reading AGENTS.md where a {path.name} is; bridge AGENTS.md instead"
            )
    return None


def replace_if_unchanged(snap: Snapshot, data: bytes) -> bool:
    """Write `data` as the file `snap` read, if it still holds what was read; False when
    it changed (or appeared) meanwhile: nothing is written then. A new file is made 0600.

    Raises:
        BridgeRefused: the target is read-only, has other hard links, or its folder takes
            no temp file (the reason named).
        OSError: a write failed (nothing is left half written).
    """
    target = snap.target
    if snap.stat is not None:
        if not os.access(target, os.W_OK):
            raise BridgeRefused(
                f"{snap.path}: {target} is read-only (a link into read-only storage?); "
                "point the bridge at a writable file"
            )
        if snap.stat.st_nlink > 1:
            raise BridgeRefused(
                f"{snap.path}: {target} has {snap.stat.st_nlink} hard links, which a "
                "replace would split; use a symbolic link instead"
            )
    _sweep(target)
    if snap.stat is not None:
        _wait_until_still(snap)
    tmp = _write_temp(snap, data)
    try:
        if snap.stat is None:
            try:
                os.link(tmp, target)  # fails if the file appeared meanwhile: no replace
            except FileExistsError:
                return False
        else:
            old = _open_unchanged(snap)
            if old is None:
                return False
            with old:
                os.replace(tmp, target)
                old.seek(0)
                late = old.read()
            if late != snap.data:
                _put_back(snap, late, data)
                return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(target.parent)
    return True


def _write_temp(snap: Snapshot, data: bytes) -> Path:
    """A temp file beside the target holding `data`, synced, with the target's mode and
    owner (0600 for a new file).

    Raises:
        BridgeRefused: the folder takes no temp file, or the owner cannot be kept.
        OSError: the write failed (the temp file removed).
    """
    target = snap.target
    tmp = _temp_beside(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except PermissionError:
        raise BridgeRefused(
            f"{snap.path}: cannot write a temp file in {target.parent} (read-only folder)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.EROFS:
            raise BridgeRefused(f"{snap.path}: {target} is on a read-only file system") from None
        raise OSError(exc.errno, exc.strerror, str(snap.path)) from exc
    try:
        try:
            write_all(fd, data)
            if snap.stat is not None:
                os.fchmod(fd, snap.stat.st_mode & 0o7777)
                _keep_owner(fd, snap)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _put_back(snap: Snapshot, late: bytes, ours: bytes) -> None:
    """Put `late`, what a writer that had the old file open wrote to it between the check
    and the rename, back in place of `ours`; if the target changed again since (it no
    longer holds `ours`), that newer write stands."""
    if read_bridged(snap.path).data != ours:
        return
    tmp = _write_temp(snap, late)
    try:
        os.replace(tmp, snap.target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(snap.target.parent)


def _temp_beside(target: Path) -> Path:
    """A fresh temp file's name beside `target`, naming this process (`_sweep`)."""
    return target.with_name(f".{target.name}.memsync-{os.getpid()}-{secrets.token_hex(4)}")


def _sweep(target: Path) -> None:
    """Remove the temp files a memsync killed mid-write left beside `target` (its pid in
    the name is no running process): they sit in the person's folder otherwise."""
    for tmp in target.parent.glob(f".{glob.escape(target.name)}.memsync-*"):
        pid = tmp.name.rsplit(".memsync-", 1)[1].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        except PermissionError:
            pass  # another user's process: alive


def _keep_owner(fd: int, snap: Snapshot) -> None:
    """The target's owner and group on the new file (a file of another owner that this
    user may write: root's, or a shared group's)."""
    assert snap.stat is not None
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) == (snap.stat.st_uid, snap.stat.st_gid):
        return
    try:
        os.fchown(fd, snap.stat.st_uid, snap.stat.st_gid)
    except PermissionError:
        raise BridgeRefused(
            f"{snap.path}: {snap.target} belongs to uid {snap.stat.st_uid} gid "
            f"{snap.stat.st_gid}, which a replaced file could not keep"
        ) from None


def _wait_until_still(snap: Snapshot) -> None:
    """Sleep until the file `snap` read has been still for `SETTLE_NS` (a clock that puts
    its times in the future, a network file system's, is not waited for)."""
    assert snap.stat is not None
    age = time.time_ns() - snap.stat.st_mtime_ns
    if 0 <= age < SETTLE_NS:
        time.sleep((SETTLE_NS - age) / 1e9)


def _open_unchanged(snap: Snapshot) -> BinaryIO | None:
    """The target, open, if it still holds the bytes `snap` read (same file, same bytes);
    None when it does not."""
    try:
        f = open(snap.target, "rb")  # noqa: SIM115 (the caller closes it)
    except FileNotFoundError:
        return None
    assert snap.stat is not None
    st = os.fstat(f.fileno())
    if (st.st_dev, st.st_ino) == (snap.stat.st_dev, snap.stat.st_ino) and f.read() == snap.data:
        return f
    f.close()
    return None
