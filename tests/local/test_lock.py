"""The memory file's lock (`memsync.local.lock`): `held` takes filelock's `flock` itself
(issue 20: start-up without importing filelock) and must exclude, and be excluded by,
every filelock holder of the same sidecar, and fall back to filelock where `flock` is
missing."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
import warnings
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from memsync.errors import LockTimeout
from memsync.local.lock import file_lock, held, is_locked, lock_path


def _busy() -> LockTimeout:
    return LockTimeout("busy")


def test_held_and_filelock_exclude_each_other(tmp_path: Path) -> None:
    sidecar = tmp_path / "me.jsonl.lock"
    with held(sidecar, 0, _busy):
        with pytest.raises(Timeout):
            FileLock(sidecar, mode=0o600).acquire(timeout=0)
        assert is_locked(sidecar)
    assert not is_locked(sidecar)
    theirs = FileLock(sidecar, mode=0o600)
    theirs.acquire(timeout=0)
    try:
        with pytest.raises(LockTimeout, match="busy"), held(sidecar, 0, _busy):
            pass  # pragma: no cover - never entered
        with (
            pytest.raises(LockTimeout, match="locked by another process"),
            file_lock(tmp_path / "me.jsonl", timeout=0.1),
        ):
            pass  # pragma: no cover - never entered
    finally:
        theirs.release()
    with held(sidecar, 0, _busy):  # released: taken at once
        pass
    assert sidecar.exists()  # the sidecar stays, as filelock leaves it


def test_held_waits_for_a_holder_to_release(tmp_path: Path) -> None:
    sidecar = tmp_path / "me.jsonl.lock"
    taken = threading.Event()

    def hold() -> None:
        with FileLock(sidecar, mode=0o600):
            taken.set()
            time.sleep(0.3)

    for timeout in (5, -1):  # -1: filelock's "wait for ever"
        taken.clear()
        holder = threading.Thread(target=hold)
        holder.start()
        assert taken.wait(5)
        start = time.monotonic()
        with held(sidecar, timeout, _busy):
            assert 0.1 < time.monotonic() - start < 4
        holder.join()


def test_held_makes_the_sidecar_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)
    try:
        with file_lock(tmp_path / "me.jsonl"):
            pass
    finally:
        os.umask(old)
    assert lock_path(tmp_path / "me.jsonl").stat().st_mode & 0o777 == 0o600


def test_without_flock_filelock_takes_over_and_nothing_is_left_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system without `flock` (ENOSYS): filelock's soft lock, which reads an
    existing sidecar as held, must not find one `held` made and left."""

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    sidecar = tmp_path / "me.jsonl.lock"
    with warnings.catch_warnings():  # filelock says once that it falls back to a soft lock
        warnings.filterwarnings("ignore", "flock not supported", UserWarning)
        with held(sidecar, 0, _busy):
            assert sidecar.exists()  # the soft lock's marker
            with pytest.raises(LockTimeout, match="busy"), held(sidecar, 0, _busy):
                pass  # pragma: no cover - never entered
        assert not sidecar.exists()
        with held(sidecar, 0, _busy):  # and again: nothing left looks held
            pass
