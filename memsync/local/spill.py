"""Lines spilled to an anonymous temporary file and read back, so that what a large input
needs held (issue 14: a partition by id, a sorted run, a handoff's chosen lines) waits on
disk rather than in memory. Anonymous (no name in the folder, or unlinked at once): a
killed process leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO

from memsync.local.storage import CHUNK_BYTES, read_chunks_fd

__all__ = ["Spill"]

_FLUSH = 1 << 20
_RUN_READ = 1 << 20


class Spill:
    """Lines written to an anonymous temporary file in `folder`, read back in chunks; the
    owner closes it (in a `finally`)."""

    def __init__(self, folder: Path) -> None:
        # Closed by `close()`, which every owner calls in a `finally`.
        import tempfile  # only for a large input: not on every command's path

        self.file: IO[bytes] = tempfile.TemporaryFile(dir=folder, prefix=".memsync-spill-")  # noqa: SIM115
        self._buffer: list[bytes] = []
        self._size = 0

    def add(self, line: bytes) -> None:
        self._buffer.append(line)
        self._size += len(line) + 1
        if self._size > _FLUSH:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._buffer.append(b"")
            self.file.write(b"\n".join(self._buffer))
            self._buffer, self._size = [], 0
        self.file.flush()

    def chunks(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[list[bytes]]:
        self.flush()
        for chunk in read_chunks_fd(self.file.fileno(), chunk_bytes=chunk_bytes, keep_long=True):
            yield chunk.lines

    def lines(self) -> Iterator[bytes]:
        # Small reads: the heap merge reads every run at once.
        for lines in self.chunks(_RUN_READ):
            yield from lines

    def close(self) -> None:
        self.file.close()
