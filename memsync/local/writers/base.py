"""What a writer detector answers, shared by the detectors of `memsync.local.writers`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Detector", "Writer"]


@dataclass(frozen=True, slots=True)
class Writer:
    """A process holding the file open for writing: its pid, command name and fd."""

    pid: int
    name: str
    fd: int

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.name})"


class Detector(Protocol):
    """One way of listing the processes that hold a file open for writing.

    `available()` says whether it can run on this system at all; `writers(dev, ino)`
    returns the other processes holding the file (`dev`, `ino`) open for writing, or None
    when it cannot tell this time. An empty list means "nobody"; None never does.
    """

    name: str

    def available(self) -> bool: ...

    def writers(self, dev: int, ino: int) -> list[Writer] | None: ...
