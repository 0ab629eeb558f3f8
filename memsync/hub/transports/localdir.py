"""A hub in a local or mounted directory (NFS, SMB, a Syncthing folder, a USB stick).

Plain `os` calls relative to directory file descriptors opened with `O_NOFOLLOW`, so that a
symlink another machine planted in the hub is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.errors import TransportError
from memsync.hub.transports.base import (
    RemoteFile,
    check_name,
    is_leftover_temp,
    map_errors,
    temp_name,
    validate_name,
)
from memsync.local.storage import full_fsync, write_all

if TYPE_CHECKING:
    from memsync.hub.transports.base import Transport

__all__ = ["LocalDirTransport"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: never hang on a FIFO


class LocalDirTransport:
    """The `Transport` for a directory `root` reachable through the file system."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"LocalDirTransport({str(self.root)!r})"

    def _where(self, *parts: str) -> str:
        return str(self.root.joinpath(*parts))

    @contextmanager
    def _folder(self, folder: str, *, create: bool = False) -> Iterator[int | None]:
        """Yield a descriptor of `<root>/<folder>`, or None when only the folder is missing."""
        try:
            root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            # Never made here, not even when the parent exists: an unmounted share's mount
            # point is such a parent, and pushing into it would hide the real hub.
            raise TransportError(
                f"hub folder missing or unreadable: {self.root} (is the share mounted? a new "
                f"hub's folder must be made first: mkdir -m 700 -p {self.root})"
            ) from exc
        except OSError as exc:
            raise TransportError(
                f"hub folder missing or unreadable: {self.root}: "
                f"{(exc.strerror or str(exc)).lower()} (is the share mounted?)"
            ) from exc
        try:
            with map_errors(self._where(folder)):
                fd = self._open_folder(root_fd, folder, create)
        finally:
            os.close(root_fd)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _open_folder(self, root_fd: int, folder: str, create: bool) -> int | None:
        try:
            return os.open(folder, _DIR_FLAGS, dir_fd=root_fd)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise TransportError(
                    f"{self._where(folder)}: not a directory (symlinks are not followed)"
                ) from exc
            raise
        with suppress(FileExistsError):  # made meanwhile by another of our processes
            os.mkdir(folder, 0o700, dir_fd=root_fd)
        fd = os.open(folder, _DIR_FLAGS, dir_fd=root_fd)
        full_fsync(root_fd)
        return fd

    def _open(self, dir_fd: int, folder: str, name: str, flags: int, mode: int = 0o600) -> int:
        try:
            fd = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TransportError(
                    f"{self._where(folder, name)}: is a symlink; refusing to follow it"
                ) from exc
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise TransportError(f"{self._where(folder, name)}: not a regular file")
        return fd

    def list_files(self, folder: str) -> list[RemoteFile]:
        check_name(str(self.root), folder)
        with self._folder(folder) as dir_fd:
            if dir_fd is None:
                return []
            with map_errors(self._where(folder)), os.scandir(dir_fd) as entries:
                files = []
                for entry in entries:
                    if not validate_name(entry.name):
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed since the listing (a temp file renamed away)
                    if stat.S_ISREG(st.st_mode):
                        files.append(RemoteFile(entry.name, st.st_size, st.st_mtime))
        return sorted(files, key=lambda f: f.name)

    def size(self, folder: str, name: str) -> int | None:
        check_name(str(self.root), folder, name)
        with self._folder(folder) as dir_fd:
            if dir_fd is None:
                return None
            with map_errors(self._where(folder, name)):
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    return None
                if not stat.S_ISREG(st.st_mode):
                    raise TransportError(f"{self._where(folder, name)}: not a regular file")
                return st.st_size

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        check_name(str(self.root), folder, name)
        with self._folder(folder) as dir_fd, map_errors(self._where(folder, name)):
            if dir_fd is None:
                raise FileNotFoundError(errno.ENOENT, "No such file or directory")
            fd = self._open(dir_fd, folder, name, os.O_RDONLY)
            try:
                chunks = []
                while limit > 0:
                    chunk = os.pread(fd, min(limit, 1 << 20), offset)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    offset += len(chunk)
                    limit -= len(chunk)
                return b"".join(chunks)
            finally:
                os.close(fd)

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        check_name(str(self.root), folder, name)
        where = self._where(folder, name)
        if offset < 0:
            raise TransportError(f"{where}: negative offset {offset}")
        with self._folder(folder, create=offset == 0) as dir_fd, map_errors(where):
            if dir_fd is None:
                raise TransportError(f"{where}: does not exist; cannot write at {offset}")
            created = False
            try:
                fd = self._open(dir_fd, folder, name, os.O_WRONLY)
            except FileNotFoundError:
                if offset != 0:
                    raise TransportError(
                        f"{where}: does not exist; cannot write at {offset}"
                    ) from None
                fd = self._open(dir_fd, folder, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                created = True
            try:
                size = os.fstat(fd).st_size
                if offset > size:
                    raise TransportError(f"{where}: cannot write at {offset}, past the end {size}")
                start, view = offset, memoryview(data)
                try:
                    while view:
                        written = os.pwrite(fd, view, offset)
                        view = view[written:]
                        offset += written
                    full_fsync(fd)
                except OSError:
                    # A full disk or a quota: take the partial write back, so that no torn
                    # line stays in the hub (issue 13, item 14); the error names the file.
                    if start == size:
                        with suppress(OSError):
                            os.ftruncate(fd, size)
                    raise
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if created:
                full_fsync(dir_fd)
            return size

    def truncate(self, folder: str, name: str, size: int) -> None:
        """Cut our own file back to `size` bytes: a torn write of ours, after a failure
        that could not take it back itself (see `memsync.hub.push`)."""
        check_name(str(self.root), folder, name)
        where = self._where(folder, name)
        with self._folder(folder, create=False) as dir_fd, map_errors(where):
            if dir_fd is None:
                raise TransportError(f"{where}: does not exist; cannot cut it to {size}")
            fd = self._open(dir_fd, folder, name, os.O_WRONLY)
            try:
                os.ftruncate(fd, size)
                full_fsync(fd)
            finally:
                os.close(fd)

    def replace(self, folder: str, name: str, data: bytes) -> None:
        check_name(str(self.root), folder, name)
        with self._folder(folder, create=True) as dir_fd, map_errors(self._where(folder, name)):
            assert dir_fd is not None  # create=True
            # A replace cut off before its rename (a killed process) left its temp file:
            # only this replica replaces its files, one pass at a time, so it is a leftover.
            for found in os.listdir(dir_fd):
                if is_leftover_temp(found, name):
                    with suppress(FileNotFoundError):
                        os.unlink(found, dir_fd=dir_fd)
            tmp = temp_name(name)
            fd = self._open(dir_fd, folder, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                try:
                    write_all(fd, data)
                    full_fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with suppress(OSError):  # best effort: the first error is the one to report
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            full_fsync(dir_fd)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own descriptors."""


if TYPE_CHECKING:

    def _conforms(t: LocalDirTransport) -> Transport:
        return t
