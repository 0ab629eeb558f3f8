"""Local file I/O for memory files (SEMANTICS rules 1, 13 and 16): streaming reads from an
offset, appends of whole lines with one `write()` under `O_APPEND`, and atomic replace.

No rule lives here: what a line means is `memsync.core`'s business.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from memsync.core.lines import LineSplitter
from memsync.errors import MemsyncError

__all__ = [
    "CHUNK_BYTES",
    "Chunk",
    "append_bytes",
    "atomic_replace",
    "errors_named",
    "file_size",
    "fsync_dir",
    "full_fsync",
    "is_regular",
    "open_for_reading",
    "private_dirs",
    "read_chunks",
    "read_chunks_fd",
    "read_from",
    "read_tail",
    "require_file",
    "utf8_text",
    "write_all",
]

CHUNK_BYTES = 8 * 1024 * 1024
"""How much a streaming read takes at a time: large enough for throughput, small enough
that reading a 300 MB file never holds more than a few chunks."""

FILE_MODE = 0o600


class Chunk(msgspec.Struct, frozen=True):
    """Complete lines read from a file.

    Attributes:
        lines: the lines, without their "\\n".
        first_line: the 1-based line number of `lines[0]`.
        start: the byte offset of `lines[0]`.
        end: the byte offset just past the last "\\n" read.
        data: the bytes from `start` to `end`, as read (but for a line over the limit of
            rule 4, cut, unless read with `keep_long`).
    """

    lines: list[bytes]
    first_line: int
    start: int
    end: int
    data: bytes

    def starts(self) -> list[int]:
        """The byte offset in the file of each of `lines`. Only the first line can have
        been cut short (a line over rule 4's limit, `LineSplitter`), so the others are
        counted back from `end`."""
        lines = self.lines
        if len(lines) < 2:
            return [self.start] * len(lines)
        second = self.end - sum(map(len, lines[1:])) - (len(lines) - 1)
        rest = itertools.accumulate((len(raw) + 1 for raw in lines[1:-1]), initial=second)
        return [self.start, *rest]


def read_chunks(
    path: Path,
    start: int = 0,
    first_line: int = 1,
    chunk_bytes: int = CHUNK_BYTES,
    *,
    keep_long: bool = False,
    stop: int | None = None,
) -> Iterator[Chunk]:
    """Yield the complete lines of `path` from byte `start` (up to `stop`, default: the
    end), a chunk at a time (rule 1).

    A torn last line (no final "\\n") is not yielded: the last chunk's `end` stops before
    it, so a reader that saves `end` reads it once it is complete. A line over the limit
    of rule 4 is yielded cut (see `LineSplitter`), unless `keep_long`.

    Raises:
        OSError: naming `path` (a folder is `IsADirectoryError`), never a bare errno.
    """
    fd = open_for_reading(path)
    try:
        with errors_named(path):
            yield from read_chunks_fd(
                fd, start, first_line, stop, chunk_bytes=chunk_bytes, keep_long=keep_long
            )
    finally:
        os.close(fd)


def open_for_reading(path: Path) -> int:
    """A read-only descriptor of the file `path`. Raises OSError naming `path`; a folder is
    `IsADirectoryError` (open() takes one, read() would not)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def errors_named(path: Path) -> Iterator[None]:
    """Re-raise an OSError that names no file (pread's: EIO, say) as one naming `path`:
    "[Errno 5] ..." alone would not say which file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:  # named already, or memsync's own
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def read_chunks_fd(
    fd: int,
    start: int = 0,
    first_line: int = 1,
    stop: int | None = None,
    *,
    chunk_bytes: int = CHUNK_BYTES,
    keep_long: bool = False,
) -> Iterator[Chunk]:
    """`read_chunks` on an open file descriptor, from `start` up to `stop` (default: the
    end), with `pread`: the descriptor's own offset is left alone.

    Read from the start, a byte order mark at the start of the file is not part of line 1
    (rule 1): the first chunk then starts at byte 3, and its `data` and line go without.

    Memory is bounded by `chunk_bytes`, whatever the lines (issue 13, item 4): a line over
    the limit is yielded cut to `LONG_LINE_KEPT` bytes, still a bad line, and `data` is
    then not the bytes read; `keep_long` keeps such lines whole (and `data` exact).
    """
    splitter = LineSplitter(keep_long=keep_long, at_start=start == 0)
    offset, line_no, pos = start, first_line, start
    while stop is None or pos < stop:
        size = chunk_bytes if stop is None else min(chunk_bytes, stop - pos)
        block = os.pread(fd, size, pos)
        if not block:
            return
        pos += len(block)
        lines, data = splitter.feed(block)
        if not lines:
            continue
        end = pos - splitter.pending
        if offset == 0 and splitter.bom:  # rule 1: the BOM is before line 1, not in it
            offset, data = splitter.bom, data[splitter.bom :]
        yield Chunk(lines, line_no, offset, end, data)
        offset = end
        line_no += len(lines)


def read_from(path: Path, offset: int = 0) -> tuple[list[bytes], int]:
    """The complete lines of `path` from byte `offset`, and the offset to read from next.

    The incremental read (rule 1): a torn last line is left for the next call.
    """
    lines: list[bytes] = []
    end = offset
    for chunk in read_chunks(path, offset):
        lines.extend(chunk.lines)
        end = chunk.end
    return lines, end


def read_tail(path: Path, end: int, size: int) -> bytes:
    """The `size` bytes that end at offset `end` (fewer at the start of the file)."""
    begin = max(0, end - size)
    with open(path, "rb") as f:
        f.seek(begin)
        return f.read(end - begin)


def append_bytes(path: Path, data: bytes, *, header: bytes | None = None) -> int:
    """Append whole lines to `path` with one `write()` under `O_APPEND` (rule 13).

    If the file does not end in "\\n" (a torn last line from a crashed writer), a "\\n" is
    written first so that the torn line stays its own bad line instead of swallowing the
    first new record. A missing file is created with mode 0600 and `header` first.
    The caller holds the file's lock. Returns the file's size after the write.

    A write that fails part-way (a full disk, a file size limit) is taken back: the file is
    cut to its old size, so no partial record stays to become a bad line, and the OSError
    names `path`. Only if a lock-free writer appended meanwhile is the file left longer,
    with the partial line terminated (a bad line, rule 4, never a record glued to another).
    """
    if not data.endswith(b"\n"):
        raise ValueError("append_bytes takes whole lines ending in \\n")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, FILE_MODE)
    try:
        size = os.fstat(fd).st_size
        prefix = b""
        if size == 0 and header is not None:
            prefix = header
        elif size > 0 and _torn(fd, size):
            prefix = b"\n"
        payload = prefix + data
        try:
            written = os.write(fd, payload)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        if written != len(payload):
            _take_back(fd, size, written)
            raise OSError(
                errno.ENOSPC, f"short write ({written} of {len(payload)} bytes)", str(path)
            )
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _take_back(fd: int, size: int, written: int) -> None:
    """Undo a partial append of `written` bytes at `size`, or terminate it if others wrote."""
    with contextlib.suppress(OSError):
        if os.fstat(fd).st_size == size + written:
            os.ftruncate(fd, size)
        else:
            os.write(fd, b"\n")


def _torn(fd: int, size: int) -> bool:
    """Whether the file ends in a torn line (a writer that died mid-line).

    A size read while another process's O_APPEND write is under way can stop at a page
    boundary inside its line (the kernel grows the size page by page), which looks torn
    for an instant. So a missing final "\n" counts only once the size has stayed the same
    for a moment; a false alarm would cost a blank line (harmless, rule 3), never a record.
    """
    for _ in range(5):
        if os.pread(fd, 1, size - 1) == b"\n":
            return False
        time.sleep(0.002)
        now = os.fstat(fd).st_size
        if now == size:
            return True
        size = now
    return os.pread(fd, 1, size - 1) != b"\n"


def full_fsync(fd: int) -> None:
    """Flush `fd` to stable storage (rule 16): `fsync`, or where the platform has it
    (macOS) `F_FULLFSYNC`, since macOS's fsync stops at the drive's cache, which a power
    loss empties. A file system that refuses F_FULLFSYNC (some network and FUSE mounts)
    gets a plain fsync."""
    full = getattr(fcntl, "F_FULLFSYNC", None)
    if full is not None:
        try:
            fcntl.fcntl(fd, full)
        except OSError:
            pass
        else:
            return
    os.fsync(fd)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so that a rename in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        full_fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_replace(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: temp file in the same folder, fsync, rename, fsync of the
    folder (rule 16). The new file keeps mode 0600. Readers see the old or the new file,
    never a mix.

    Safe from several threads at once (the daemon's main loop and its heartbeat both write
    the status): each call writes its own temp file, so the last rename wins whole. A
    failed write (a full disk) removes its temp file and raises, naming `path`.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            write_all(fd, data)
            full_fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.filename is None or str(exc.filename) == str(tmp):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    fsync_dir(path.parent)


def private_dirs(folder: Path) -> None:
    """Create `folder` and every missing folder above it with mode 0700 (a state
    directory, a new memory file's folder): `Path.mkdir(parents=True, mode=...)` gives the
    mode to the last one only, the others get 0755 (issue 13, item 20).

    Raises:
        NotADirectoryError: naming the first existing path on the way that is no folder.
    """
    missing: list[Path] = []
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():  # a file where a folder belongs: say so, not "file exists"
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(p))
            break
        missing.append(p)
    for p in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            p.mkdir(mode=0o700)


def file_size(path: Path) -> int:
    """The size of `path`, 0 when it cannot be looked at (missing: the reading says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def require_file(path: Path) -> None:
    """Raise unless `path` is a file (or a symlink to one): `FileNotFoundError` or
    `IsADirectoryError`, naming `path`, so that a folder is never "no such file"."""
    if path.is_file():
        return
    code = errno.EISDIR if path.is_dir() else errno.ENOENT
    raise OSError(code, os.strerror(code), str(path))


def is_regular(path: Path) -> bool:
    """Whether `path` exists and is a regular file (not a symlink, not a folder)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def utf8_text(data: bytes, path: Path) -> str:
    """`data`, the bytes of the text file `path` (a vendor's Markdown), decoded as UTF-8.

    Raises:
        MemsyncError: it is not UTF-8, naming the file, the line and the byte.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise MemsyncError(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x})") from None
