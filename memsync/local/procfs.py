"""Which processes hold a file open for writing (Linux `/proc`), for compaction's quiet check.

An agent with a long-lived append handle would go on writing into the renamed-away inode
after a compaction (the logrotate problem), so compaction does not start while another
process holds the file open with `O_WRONLY` or `O_RDWR`, and keeps draining the old inode
until no process holds it. Without `/proc` (macOS, BSD) the check finds nothing; the
shell then drains for its whole grace period instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROC", "Writer", "available", "writers"]

PROC = Path("/proc")

_ACCMODE = os.O_ACCMODE if hasattr(os, "O_ACCMODE") else 3


@dataclass(frozen=True, slots=True)
class Writer:
    """A process holding the file open for writing: its pid, command name and fd."""

    pid: int
    name: str
    fd: int

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.name})"


def available(proc: Path = PROC) -> bool:
    """Whether `/proc/<pid>/fd` can be read on this system."""
    return (proc / "self" / "fd").is_dir()


def writers(dev: int, ino: int, *, proc: Path = PROC) -> list[Writer]:
    """The other processes holding the file (`dev`, `ino`) open for writing.

    Our own process is skipped, and so are processes whose fds we may not read (another
    user's, under a hardened /proc): a check that can see nothing finds nothing.
    """
    own = os.getpid()
    found: list[Writer] = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        fd_dir = f"{proc}/{entry}/fd"
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
            if _writable(proc, entry, fd):
                found.append(Writer(int(entry), _name(proc, entry), int(fd)))
    return found


def _writable(proc: Path, pid: str, fd: str) -> bool:
    """Whether fd `fd` of `pid` is open for writing: the octal `flags:` of its fdinfo."""
    try:
        text = Path(f"{proc}/{pid}/fdinfo/{fd}").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags:"):
            flags = int(line.split()[1], 8)
            return (flags & _ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    return False


def _name(proc: Path, pid: str) -> str:
    try:
        return Path(f"{proc}/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "?"
