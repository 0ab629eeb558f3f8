"""A hub seen through a case-insensitive, case-preserving file system (macOS's APFS, an SMB
share, an exFAT stick), on Linux: a name is looked up casefolded, and a new file or folder
keeps the case it was created with (issue 23, item 2). Wraps any transport (the folder
one, the in-memory one).

A file's name is matched against the inner transport's `list_files(folder)`. A transport
lists no folders, so a folder's case is the one it was first written with through the
wrapper, or first found holding files."""

from __future__ import annotations

from typing import Protocol

from memsync.hub.transports.base import RemoteFile, Transport, Truncates

__all__ = ["CaseFolding"]


class Hub(Transport, Truncates, Protocol):
    """What the wrapper passes through (the folder and in-memory transports have it)."""


class CaseFolding:
    """`inner` with names matched as a case-insensitive, case-preserving file system does."""

    def __init__(self, inner: Hub) -> None:
        self.inner = inner
        self._folders: dict[str, str] = {}  # casefolded -> as created

    def _folder(self, folder: str) -> str:
        return self._folders.get(folder.casefold(), folder)

    def _path(self, folder: str, name: str) -> tuple[str, str]:
        real = self._folder(folder)
        files = self.inner.list_files(real)
        match = next((f.name for f in files if f.name.casefold() == name.casefold()), name)
        return real, match

    def _created(self, folder: str, name: str) -> tuple[str, str]:
        real, match = self._path(folder, name)
        self._folders.setdefault(folder.casefold(), real)
        return real, match

    def list_files(self, folder: str) -> list[RemoteFile]:
        real = self._folder(folder)
        files = self.inner.list_files(real)
        if files:
            self._folders.setdefault(folder.casefold(), real)
        return files

    def size(self, folder: str, name: str) -> int | None:
        return self.inner.size(*self._path(folder, name))

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        return self.inner.read(*self._path(folder, name), offset, limit)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        return self.inner.write_at(*self._created(folder, name), offset, data)

    def truncate(self, folder: str, name: str, size: int) -> None:
        self.inner.truncate(*self._path(folder, name), size)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        self.inner.replace(*self._created(folder, name), data)

    def close(self) -> None:
        self.inner.close()
