"""Reading and replacing a bridged file (issue 22, item 4): never losing a byte someone
else wrote, keeping links, modes and owners.

- `read_bridged` reads the file through any symbolic link (stow, chezmoi and yadm link
  `CLAUDE.md` and `AGENTS.md` into a repository): the bytes, the link's target, its stat.
- `replace_if_unchanged` writes new bytes to the *target* (a temp file in the target's
  folder, swapped with it in one step where the system can, else renamed over it: a
  reader sees the old file or the new one, and a kill -9 leaves it whole; the temp file
  a killed memsync left is removed by the next read) only if the target still holds what
  was read: a person or an agent writing meanwhile keeps their bytes, and the caller
  reads again. A file changed less than `SETTLE_NS` ago is not replaced before it has
  been still that long: an editor or an agent that truncated it may not have written its
  bytes yet, and they would land in the file memsync replaced (so be lost). A write that
  lands between the check and the replace is found after it: swapped, the old file goes
  back as it is (once still: a writer that truncated it writes first), or a file an
  editor renamed in meanwhile; renamed over, what was written is copied back. Written on
  both sides, the old file is kept beside the new one (`<name>.memsync-conflict-<time>`)
  and the log says so. Left open: a writer that saves by a rename in that window where
  the system cannot swap (its file is replaced), and a kill -9 within the replace while
  another program writes. The link stays a link; the mode and the owner are the
  target's. A read-only target (Home Manager links into
  `/nix/store`), a folder memsync cannot write a temp file in, or a hard-linked file (a
  rename would split the links) is refused with the reason (`BridgeRefused`).
- `may_create`: memsync never creates a `CLAUDE.md` or `CLAUDE.local.md` in a project
  that has an `AGENTS.md` (Claude Code reads `AGENTS.md` only where no `CLAUDE.md` is).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import glob
import os
import secrets
import sys
import time
from collections.abc import Callable
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
    """The file at `path`, read through its links (and the temp files a killed memsync
    left beside it removed, `_sweep`: a sync that has nothing to write leaves none).

    Raises:
        BridgeRefused: it is a folder, or its folder does not exist.
        OSError: it cannot be read (naming it).
    """
    target = Path(os.path.realpath(path))
    with contextlib.suppress(OSError):  # (a folder that cannot be listed: nothing to sweep)
        _sweep(target)
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
        if snap.stat.st_nlink > 1:  # (`read_bridged` swept a killed memsync's temp links)
            raise BridgeRefused(
                f"{snap.path}: {target} has {snap.stat.st_nlink} hard links, which a "
                "replace would split; use a symbolic link instead"
            )
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
                if not _replace_held(snap, tmp, old, data):
                    return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(target.parent)
    return True


def _replace_held(snap: Snapshot, tmp: Path, old: BinaryIO, data: bytes) -> bool:
    """Put the temp file `tmp` (holding `data`) in place of the target, which `old` holds
    open and which held `snap.data` just now; False when someone wrote it meanwhile, whose
    bytes are then in place again (or, written on both sides, kept beside it).

    Where the system swaps two files in one step (`_swap`), the old file is swapped out,
    not unlinked: a writer that replaced the target meanwhile gets its file back at once;
    one that wrote in place (or truncated and not yet written) gets its own file back,
    the same inode, once it has been still for `SETTLE_NS`, so it may go on writing to it.
    Elsewhere the old file is renamed over, and what was written to it is copied back."""
    target = snap.target
    if not _swap(tmp, target):
        os.replace(tmp, target)
        late = _settled(old, snap.data)
        if late != snap.data:
            _put_back(snap, late, data)
            return False
        return True
    # `tmp` now names what the target was at the swap.
    held, out = os.fstat(old.fileno()), os.stat(tmp)
    if (out.st_dev, out.st_ino) != (held.st_dev, held.st_ino):
        _swap_back(snap, tmp)  # replaced meanwhile by another writer: its file goes back
        return False
    if _settled(old, snap.data) == snap.data:
        return True  # (`tmp`, the old file, is removed by the caller)
    if read_bridged(snap.path).data == data:
        _swap_back(snap, tmp)  # written in place meanwhile: that file goes back
        return False
    _keep_beside(snap, tmp)  # written on both sides: the old file is kept beside
    return False


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
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno:  # (naming the file, not the temp file)
            raise OSError(exc.errno, exc.strerror, str(snap.path)) from exc
        raise
    return tmp


def _put_back(snap: Snapshot, late: bytes, ours: bytes) -> None:
    """Put `late`, what a writer that had the old file open wrote to it between the check
    and the rename, back in place of `ours`; if the target changed again since (it no
    longer holds `ours`), that newer write stands and `late` is kept beside it."""
    tmp = _write_temp(snap, late)
    try:
        if read_bridged(snap.path).data != ours:
            _keep_beside(snap, tmp)
            return
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
    """Sleep until the file `snap` read has been still for `SETTLE_NS`; a file timed
    ahead of this clock (a network file system's clock, a few milliseconds or an hour
    ahead) is waited for `SETTLE_NS` once: the check after the wait compares its bytes."""
    assert snap.stat is not None
    age = time.time_ns() - snap.stat.st_mtime_ns
    if age < SETTLE_NS:
        time.sleep((SETTLE_NS - max(age, 0)) / 1e9)


def _settled(f: BinaryIO, was: bytes | None) -> bytes:
    """The bytes of the open file `f`: at once when they are still `was`; else once its
    size and modification time have not moved for `SETTLE_NS` (observed here, no clock
    compared: a writer that truncated it may not have written yet), `_SETTLE_TRIES` waits
    at most."""
    f.seek(0)
    data = f.read()
    if data == was:
        return data
    before = os.fstat(f.fileno())
    for _ in range(_SETTLE_TRIES):
        time.sleep(SETTLE_NS / 1e9)
        now = os.fstat(f.fileno())
        if (now.st_size, now.st_mtime_ns) == (before.st_size, before.st_mtime_ns):
            break
        before = now
    f.seek(0)
    return f.read()


_SETTLE_TRIES = 20
"""A file written to without a pause for this many `SETTLE_NS` (6 s) is taken as it is."""


def _swap(a: Path, b: Path) -> bool:
    """Exchange the files named `a` and `b` in one step (Linux `renameat2` with
    RENAME_EXCHANGE, macOS `renamex_np` with RENAME_SWAP); False, nothing done, where the
    system or the file system cannot.

    Raises:
        OSError: the exchange failed otherwise (naming `b`).
    """
    call = _swap_call()
    if call is None:
        return False
    if call(os.fsencode(a), os.fsencode(b)) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # (a file system without it: a network one, an old overlay)
    raise OSError(code, os.strerror(code), str(b))


@functools.cache
def _swap_call() -> Callable[[bytes, bytes], int] | None:
    """The C call that exchanges two paths, or None on a system without one."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        renamex = libc.renamex_np
        renamex.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint)
        return lambda a, b: int(renamex(a, b, _RENAME_SWAP))
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):  # glibc 2.28 on
        renameat2 = libc.renameat2
        renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)
        renameat2.argtypes += (ctypes.c_uint,)
        return lambda a, b: int(renameat2(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE))
    return None


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # <linux/fs.h>
_RENAME_SWAP = 2  # <stdio.h> on macOS


def _swap_back(snap: Snapshot, tmp: Path) -> None:
    """Swap the file at `tmp` (someone's, swapped out) back in place of ours; should that
    fail, it is kept beside the target rather than removed with the temp file."""
    try:
        if _swap(tmp, snap.target):
            return
        raise OSError(errno.ENOTSUP, "the file system no longer swaps files", str(snap.path))
    except OSError:
        _keep_beside(snap, tmp)
        raise


def _keep_beside(snap: Snapshot, tmp: Path) -> None:
    """Keep the old file `tmp`, written to while memsync replaced it and then the new one
    written too, beside the target as `<name>.memsync-conflict-<time>` (never a silent
    drop), and say so in the log."""
    from memsync.local.logs import get_logger

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    kept = snap.target.with_name(f"{snap.target.name}.memsync-conflict-{stamp}")
    os.replace(tmp, kept)
    get_logger("memsync").warning(
        "%s: written by another program on both sides of memsync's replace: its earlier "
        "bytes are kept in %s",
        snap.path,
        kept,
    )


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
