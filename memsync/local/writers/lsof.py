"""Which processes hold a file open for writing, asked of `lsof -F` (any Unix that has it).

The fallback where neither `/proc` nor libproc answers. `lsof` lists every open file of
the processes we may look at (our own user's at least); its `-F` output is one field a
line: `p` pid, `c` command, `f` fd, `a` access (`r`, `w` or `u`), `D` device (hex),
`i` inode. An `lsof` that fails, times out or prints what we cannot read means "cannot
tell", never "nobody".
"""

from __future__ import annotations

import os
import shutil
import subprocess

from memsync.local.writers.base import Writer

__all__ = ["LSOF_TIMEOUT", "Lsof", "parse"]

LSOF_TIMEOUT = 10.0
"""Seconds before an `lsof` that hangs (a dead network mount) is given up on."""


class Lsof:
    """The `lsof -F` detector."""

    name = "lsof"

    def available(self) -> bool:
        return _program() is not None

    def writers(self, dev: int, ino: int) -> list[Writer] | None:
        program = _program()
        if program is None:
            return None
        try:
            done = subprocess.run(
                # -n -P: no name look-ups; -w: no warnings about what cannot be read
                [program, "-n", "-P", "-w", "-F", "pcfaDi"],
                capture_output=True,
                timeout=LSOF_TIMEOUT,
                check=False,
                env={**os.environ, "LC_ALL": "C"},
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if done.returncode != 0 or not done.stdout:
            return None
        return parse(done.stdout, dev, ino, own=os.getpid())


def parse(output: bytes, dev: int, ino: int, *, own: int) -> list[Writer] | None:
    """The writers of (`dev`, `ino`) in `lsof -F pcfaDi` output, other than `own`; None
    when the output is not what `-F` prints (no process set, or a number that is not)."""
    found: list[Writer] = []
    pid, name = 0, "?"
    fd: int | None = None
    access = ""
    fdev: int | None = None
    fino: int | None = None
    unknown = False  # a descriptor of the file whose access lsof does not show

    def flush() -> None:
        nonlocal unknown
        mine = fd is not None and (fdev, fino) == (dev, ino)
        if mine and fd is not None and pid != own:
            if access in ("w", "u"):
                found.append(Writer(pid, name, fd))
            elif access != "r":
                unknown = True

    for raw in output.split(b"\n"):
        if not raw:
            continue
        field, value = chr(raw[0]), raw[1:].decode("utf-8", errors="replace")
        try:
            if field == "p":
                flush()
                pid, name, fd = int(value), "?", None
            elif field == "c":
                name = value
            elif field == "f":
                flush()
                # cwd, txt, mem...: not a descriptor anyone appends through
                fd, access, fdev, fino = (int(value) if value.isdigit() else None), "", None, None
            elif field == "a":
                access = value.strip()
            elif field == "D":
                fdev = int(value, 16)
            elif field == "i":
                fino = int(value)
        except ValueError:
            return None
    flush()
    return found if pid and not unknown else None


def _program() -> str | None:
    return shutil.which("lsof") or next(
        (p for p in ("/usr/sbin/lsof", "/usr/bin/lsof") if os.access(p, os.X_OK)), None
    )
