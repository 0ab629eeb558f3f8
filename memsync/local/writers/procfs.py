"""Which processes hold a file open for writing, read from Linux's `/proc`.

`PROC` is looked up at each call (not bound at definition), so that a test can point it
at a folder that does not exist and see what a system without `/proc` sees.
"""

from __future__ import annotations

import os
from pathlib import Path

from memsync.local.writers.base import Writer

__all__ = ["PROC", "ProcFs", "available", "writers"]

PROC = Path("/proc")

_ACCMODE = os.O_ACCMODE if hasattr(os, "O_ACCMODE") else 3


def available(proc: Path | None = None) -> bool:
    """Whether `/proc/<pid>/fd` can be read on this system."""
    return ((PROC if proc is None else proc) / "self" / "fd").is_dir()


def writers(dev: int, ino: int, *, proc: Path | None = None) -> list[Writer] | None:
    """The other processes holding the file (`dev`, `ino`) open for writing; None when
    `/proc` cannot be read at all.

    Our own process is skipped, and so are processes whose fds we may not read (another
    user's, under a hardened /proc): an agent writing the file runs as its owner.
    """
    root = PROC if proc is None else proc
    if not available(root):
        return None
    own = os.getpid()
    found: list[Writer] = []
    try:
        entries = os.listdir(root)
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        fd_dir = f"{root}/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or not ours to read
        for fd in fds:
            link = f"{fd_dir}/{fd}"
            try:
                if not os.readlink(link).startswith("/"):
                    continue  # a socket, a pipe, an anon inode
                st = os.stat(link)
            except OSError:
                continue
            if st.st_ino != ino or st.st_dev != dev:
                continue
            writable = _writable(root, entry, fd)
            if writable is None:
                return None  # it holds the file, how is not shown: cannot tell
            if writable:
                found.append(Writer(int(entry), _name(root, entry), int(fd)))
    return found


class ProcFs:
    """The `/proc` detector (Linux)."""

    name = "procfs"

    def available(self) -> bool:
        return available()

    def writers(self, dev: int, ino: int) -> list[Writer] | None:
        return writers(dev, ino)


def _writable(proc: Path, pid: str, fd: str) -> bool | None:
    """Whether fd `fd` of `pid` (which holds the file) is open for writing: the octal
    `flags:` of its fdinfo. False when the descriptor is gone meanwhile; None when how it
    was opened cannot be read (no fdinfo, as under WSL1 or gVisor; no `flags:` line):
    "cannot tell", never "nobody" (issue 23, item 1)."""
    try:
        text = Path(f"{proc}/{pid}/fdinfo/{fd}").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        gone = os.path.isdir(f"{proc}/{pid}/fdinfo") or not os.path.lexists(f"{proc}/{pid}/fd/{fd}")
        return False if gone else None
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags:"):
            flags = int(line.split()[1], 8)
            return (flags & _ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    return None


def _name(proc: Path, pid: str) -> str:
    try:
        return Path(f"{proc}/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "?"
