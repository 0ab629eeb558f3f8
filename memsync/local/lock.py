"""The lock of a memory file: `<file>.lock`, a filelock sidecar (never the data file itself,
which compaction renames). memsync's writers hold it for the short time of a write; agents
that append without memsync never take it, which is why appends are `O_APPEND` writes of
whole lines (SEMANTICS rule 13) and compaction copies late bytes (rule 16)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from filelock import FileLock
from filelock import Timeout as _FileLockTimeout

from memsync.errors import LockTimeout, MemsyncError
from memsync.local.storage import private_dirs

__all__ = ["DEFAULT_TIMEOUT", "file_lock", "held", "is_locked", "lock_path"]

DEFAULT_TIMEOUT = 30.0


def lock_path(path: Path) -> Path:
    """The lock file of a memory file: beside the file itself, symbolic links followed, so
    that a writer through a link and one through the real path take the same lock."""
    real = Path(os.path.realpath(path))
    return real.with_name(real.name + ".lock")


@contextmanager
def held(lock_file: Path, timeout: float, busy: Callable[[], MemsyncError]) -> Iterator[None]:
    """Hold the filelock `lock_file` (created 0600) for the `with` block: the one lock
    helper (memory files, sync passes, the daemon's PID lock, compaction).

    Raises:
        busy(): another process held it for longer than `timeout` seconds (0: try once).
    """
    private_dirs(lock_file.parent)  # before filelock makes them 0755 (issue 13, item 20)
    lock = FileLock(lock_file, mode=0o600)
    try:
        lock.acquire(timeout=timeout)
    except _FileLockTimeout:
        raise busy() from None
    try:
        yield
    finally:
        lock.release()


def is_locked(lock_file: Path) -> bool:
    """Whether another process holds the filelock `lock_file` right now."""
    private_dirs(lock_file.parent)  # before filelock makes them 0755 (issue 13, item 20)
    lock = FileLock(lock_file, mode=0o600)
    try:
        lock.acquire(timeout=0)
    except _FileLockTimeout:
        return True
    lock.release()
    return False


def file_lock(path: Path, timeout: float = DEFAULT_TIMEOUT) -> AbstractContextManager[None]:
    """Hold the lock of memory file `path` (created 0600) for the `with` block.

    Raises:
        LockTimeout: another process held it for longer than `timeout` seconds
            (0 means try once).
    """
    return held(
        lock_path(path),
        timeout,
        lambda: LockTimeout(f"{path}: locked by another process (waited {timeout:g} s)"),
    )
