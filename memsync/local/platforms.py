"""Where memsync runs (issue 23): Linux and macOS natively, Windows only through WSL2.

Native Windows lacks what the storage layer relies on (`os.pread`, `O_CLOEXEC`, directory
fsync, a replace over an open file, atomic `O_APPEND` through the C runtime, signals, mode
bits for the key file): rather than fail half-way, the command line and the daemon refuse
to start there with one line pointing to WSL2. The platform is read at each call, so that
a test can fake it.
"""

from __future__ import annotations

import os
import sys

from memsync.errors import MemsyncError

__all__ = ["NATIVE_WINDOWS", "native_windows", "refuse_native_windows"]

NATIVE_WINDOWS = (
    "memsync does not run on native Windows; run it inside WSL2 (wsl --install), with the "
    "memory files on WSL's own file system: see the README, section Platforms"
)


def native_windows() -> bool:
    """Whether this is Windows itself (not WSL, which is Linux to Python)."""
    return sys.platform == "win32" or os.name == "nt"


def refuse_native_windows() -> None:
    """Raise MemsyncError (`NATIVE_WINDOWS`) on native Windows; nothing elsewhere."""
    if native_windows():
        raise MemsyncError(NATIVE_WINDOWS)
