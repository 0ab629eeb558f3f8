"""InMemoryTransport: a dict-backed hub for fast tests of sync logic (httpx's MockTransport).

It keeps the same contract as the real transports (the contract suite runs on all of them)
and lets a test inject failures:

    hub = InMemoryTransport()
    hub.fail_next = TransportError("hub: connection dropped")   # the next call raises it
    hub.tear_next_write = 10   # the next write_at lands 10 bytes, then raises TransportError
    hub.root_present = False   # the hub root is gone, like an unmounted share
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from memsync.errors import TransportError
from memsync.hub.transports.base import RemoteFile, check_name, validate_name

if TYPE_CHECKING:
    from memsync.hub.transports.base import Transport

__all__ = ["InMemoryTransport"]


class InMemoryTransport:
    """A `Transport` over `files[(folder, name)]`; `calls` counts the calls made."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytearray] = {}
        self.mtimes: dict[tuple[str, str], float] = {}
        self.root_present = True
        self.fail_next: Exception | None = None
        self.tear_next_write: int | None = None
        self.calls = 0

    def __repr__(self) -> str:
        return f"InMemoryTransport({len(self.files)} files)"

    def _enter(self, *names: str) -> None:
        self.calls += 1
        check_name("memory:", *names)
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        if not self.root_present:
            raise TransportError(
                "hub folder missing or unreadable: memory: (is the share mounted?)"
            )

    def list_files(self, folder: str) -> list[RemoteFile]:
        self._enter(folder)
        files = [
            RemoteFile(name, len(data), self.mtimes[(f, name)])
            for (f, name), data in self.files.items()
            if f == folder and validate_name(name)
        ]
        return sorted(files, key=lambda f: f.name)

    def size(self, folder: str, name: str) -> int | None:
        self._enter(folder, name)
        data = self.files.get((folder, name))
        return None if data is None else len(data)

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        self._enter(folder, name)
        data = self.files.get((folder, name))
        if data is None:
            raise TransportError(f"memory:{folder}/{name}: No such file or directory")
        return bytes(data[offset : offset + max(limit, 0)])

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        self._enter(folder, name)
        key = (folder, name)
        current = self.files.get(key)
        if current is None and offset == 0:
            current = self.files[key] = bytearray()
        if current is None or not 0 <= offset <= len(current):
            size = "missing" if current is None else len(current)
            raise TransportError(f"memory:{folder}/{name}: cannot write at {offset} ({size})")
        torn = self.tear_next_write
        self.tear_next_write = None
        landed = data if torn is None else data[:torn]
        current[offset : offset + len(landed)] = landed
        self.mtimes[key] = time.time()
        if torn is not None:
            raise TransportError(f"memory:{folder}/{name}: connection dropped mid-write")
        return len(current)

    def truncate(self, folder: str, name: str, size: int) -> None:
        self._enter(folder, name)
        del self.files[(folder, name)][size:]
        self.mtimes[(folder, name)] = time.time()

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self._enter(folder, name)
        self.files[(folder, name)] = bytearray(data)
        self.mtimes[(folder, name)] = time.time()

    def close(self) -> None:
        """Nothing to release."""


if TYPE_CHECKING:

    def _conforms(t: InMemoryTransport) -> Transport:
        return t
