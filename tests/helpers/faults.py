"""Transports that fail on purpose, wrapped around a real one."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from memsync.errors import TransportError
from memsync.hub.transports import RemoteFile, Transport

__all__ = [
    "AckLost",
    "BeforeFirstWrite",
    "CountingReads",
    "KilledAfterReplace",
    "PausedAfterReplace",
]


class AckLost:
    """A `Transport` passing every call to `inner`, except that the write_at calls
    numbered in `lose` (1-based) land and then raise `TransportError`: the connection
    dropped after the server wrote, before memsync heard back."""

    def __init__(self, inner: Transport, lose: set[int]) -> None:
        self.inner = inner
        self.lose = lose
        self.writes = 0

    def list_files(self, folder: str) -> list[RemoteFile]:
        return self.inner.list_files(folder)

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(folder, name)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        return self.inner.read(folder, name, offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        self.writes += 1
        size = self.inner.write_at(folder, name, offset, data)
        if self.writes in self.lose:
            raise TransportError(f"{folder}/{name}: connection lost before the answer")
        return size

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(folder, name, data)

    def close(self) -> None:
        self.inner.close()


class BeforeFirstWrite:
    """A `Transport` passing every call to `inner`, except that `then()` runs once, just
    before the first write_at: something that happens in the middle of a pass, after its
    pull and before its push (a peer's push landing meanwhile)."""

    def __init__(self, inner: Transport, then: Callable[[], None]) -> None:
        self.inner = inner
        self.then: Callable[[], None] | None = then

    def list_files(self, folder: str) -> list[RemoteFile]:
        return self.inner.list_files(folder)

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(folder, name)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        return self.inner.read(folder, name, offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        then, self.then = self.then, None
        if then is not None:
            then()
        return self.inner.write_at(folder, name, offset, data)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(folder, name, data)

    def close(self) -> None:
        self.inner.close()


class KilledAfterReplace:
    """A `Transport` passing every call to `inner` (its optional capabilities too), whose
    process kills itself with SIGKILL right after a `replace` of a file named `name` lands:
    kill -9 between the rename and anything the caller would do next (save its state)."""

    def __init__(self, inner: Transport, name: str) -> None:
        self.inner, self.name = inner, name

    def __getattr__(self, attr: str) -> object:
        return getattr(self.inner, attr)

    def list_files(self, folder: str) -> list[RemoteFile]:
        return self.inner.list_files(folder)

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(folder, name)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        return self.inner.read(folder, name, offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        return self.inner.write_at(folder, name, offset, data)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(folder, name, data)
        if name == self.name:
            os.kill(os.getpid(), signal.SIGKILL)

    def close(self) -> None:
        self.inner.close()


class CountingReads:
    """A `Transport` passing every call to `inner` (its optional capabilities too), that
    records each `read`: the file, the offset and how many bytes came back."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.reads: list[tuple[str, int, int]] = []

    def __getattr__(self, attr: str) -> object:
        return getattr(self.inner, attr)

    def bytes_read(self, name: str) -> int:
        return sum(n for file, _, n in self.reads if file == name)

    def list_files(self, folder: str) -> list[RemoteFile]:
        return self.inner.list_files(folder)

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(folder, name)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        data = self.inner.read(folder, name, offset, limit)
        self.reads.append((name, offset, len(data)))
        return data

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        return self.inner.write_at(folder, name, offset, data)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(folder, name, data)

    def close(self) -> None:
        self.inner.close()


class PausedAfterReplace:
    """A `Transport` passing every call to `inner` (its optional capabilities too), whose
    `replace` lands and then waits until `go` is set: a caller stopped right after the
    rename, still holding whatever it holds (a compaction, the pass lock)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.replaced = threading.Event()
        self.go = threading.Event()

    def __getattr__(self, attr: str) -> object:
        return getattr(self.inner, attr)

    def list_files(self, folder: str) -> list[RemoteFile]:
        return self.inner.list_files(folder)

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(folder, name)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        return self.inner.read(folder, name, offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        return self.inner.write_at(folder, name, offset, data)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(folder, name, data)
        self.replaced.set()
        assert self.go.wait(60), "never told to go on"

    def close(self) -> None:
        self.inner.close()
