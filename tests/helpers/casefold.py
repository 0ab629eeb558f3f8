"""A folder hub seen through a case-insensitive, case-preserving file system (macOS's APFS,
an SMB share, an exFAT stick), on Linux: a name is looked up casefolded, and a new file or
folder keeps the case it was created with (issue 23, item 2)."""

from __future__ import annotations

import os
from pathlib import Path

from memsync.hub.transports.base import RemoteFile
from memsync.hub.transports.localdir import LocalDirTransport

__all__ = ["CaseFoldingDir"]


class CaseFoldingDir:
    """`LocalDirTransport` under `root`, with names matched as such a file system does."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.inner = LocalDirTransport(root)

    @staticmethod
    def _match(folder: Path, name: str) -> str:
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return name
        return next((n for n in names if n.casefold() == name.casefold()), name)

    def _folder(self, folder: str) -> str:
        return self._match(self.root, folder)

    def _path(self, folder: str, name: str) -> tuple[str, str]:
        real = self._folder(folder)
        return real, self._match(self.root / real, name)

    def list_files(self, folder: str) -> list[RemoteFile]:
        return self.inner.list_files(self._folder(folder))

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(*self._path(folder, name))

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        return self.inner.read(*self._path(folder, name), offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        return self.inner.write_at(*self._path(folder, name), offset, data)

    def truncate(self, folder: str, name: str, size: int) -> None:
        self.inner.truncate(*self._path(folder, name), size)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(*self._path(folder, name), data)

    def close(self) -> None:
        self.inner.close()
