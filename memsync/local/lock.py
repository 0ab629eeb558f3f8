"""The lock of a memory file: `<file>.lock`, a filelock sidecar (never the data file itself,
which compaction renames). memsync's writers hold it for the short time of a write; agents
that append without memsync never take it, which is why appends are `O_APPEND` writes of
whole lines (SEMANTICS rule 13) and compaction copies late bytes (rule 16).

The lock is filelock's `FileLock`: an `flock` on the sidecar, which stays in place. `held`
takes that same `flock` itself when it can (a regular file of this account, on a file
system with `flock`), because importing filelock costs `memsync add` about 13 ms of its
start-up (issue 20); anything else (no `flock`, a file of another account, an error) goes
through filelock, soft-lock fallback included, as before.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

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
    fd = _flock(lock_file, timeout, busy)
    if fd is None:
        with _filelock_held(lock_file, timeout, busy):
            yield
        return
    try:
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


_POLL_SECONDS = 0.05
"""How often a waiting writer tries again (filelock's default poll interval)."""
_BUSY = frozenset({errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK})
"""What `flock` says when another holds the lock (some file systems say EACCES)."""
_OPEN = os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC  # filelock's flags


def _flock(lock_file: Path, timeout: float, busy: Callable[[], MemsyncError]) -> int | None:
    """The descriptor of `lock_file` under an exclusive `flock`, as filelock takes it (the
    file created 0600 when missing, never through a symbolic link); None when filelock
    must decide (a negative `timeout`, no `flock` here, a lock file of another account or
    not a regular file, an error opening it), having left nothing behind that a soft lock
    would read as held.

    Raises:
        busy(): another process held it for longer than `timeout` seconds.
    """
    if timeout < 0:
        return None  # filelock's "wait for ever", with its check for a deadlock in-process
    deadline = time.monotonic() + timeout
    while True:
        created = True
        try:
            fd = os.open(lock_file, _OPEN | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            created = False
            try:
                fd = os.open(lock_file, _OPEN)
            except OSError:
                return None  # gone since, a link, no access, leased: filelock's cases
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if created and exc.errno not in _BUSY:
                _unlink_if_same(lock_file, fd)  # a soft lock must not find it held
            os.close(fd)
            if exc.errno not in _BUSY:
                return None  # ENOSYS (no flock on this file system) and the like
            left = deadline - time.monotonic()
            if left <= 0:
                raise busy() from None
            time.sleep(min(_POLL_SECONDS, left))
            continue
        st = os.fstat(fd)
        if st.st_nlink == 0:  # a peer unlinked it before we locked it: lock what is there
            os.close(fd)
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            os.close(fd)  # another account's lock file: filelock's checks decide
            return None
        if created:
            os.fchmod(fd, 0o600)  # the mode filelock sets, whatever the umask
        return fd


def _unlink_if_same(lock_file: Path, fd: int) -> None:
    try:
        if os.path.samestat(os.lstat(lock_file), os.fstat(fd)):
            os.unlink(lock_file)
    except OSError:
        pass


@contextmanager
def _filelock_held(
    lock_file: Path, timeout: float, busy: Callable[[], MemsyncError]
) -> Iterator[None]:
    from filelock import FileLock
    from filelock import Timeout as FileLockTimeout

    lock = FileLock(lock_file, mode=0o600)
    try:
        lock.acquire(timeout=timeout)
    except FileLockTimeout:
        raise busy() from None
    try:
        yield
    finally:
        lock.release()


def is_locked(lock_file: Path) -> bool:
    """Whether another process holds the filelock `lock_file` right now."""
    from filelock import FileLock
    from filelock import Timeout as FileLockTimeout

    private_dirs(lock_file.parent)  # before filelock makes them 0755 (issue 13, item 20)
    lock = FileLock(lock_file, mode=0o600)
    try:
        lock.acquire(timeout=0)
    except FileLockTimeout:
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
