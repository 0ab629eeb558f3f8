"""The `Transport` protocol: what sync needs from a hub, and nothing more.

A hub is a directory, local or over SSH, laid out as `<root>/<folder>/<name>` where the folder
is a memory name and the names are replica files (`<replica-id>.jsonl`) and their small
sidecars (DESIGN.md, "The hub"). Each replica writes only its own files, so the protocol has
no append and no locks: the one writer of a file says where its bytes go (`write_at`), and
checks the outcome itself (`size`) after an error.

Names are data from other machines. Every folder and name that goes in or comes out is
checked with `validate_name`; symlinks are never followed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memsync.core.names import valid_name
from memsync.errors import MemsyncError, TransportError, TransportTimeout, shown

__all__ = [
    "Fragments",
    "PushChunks",
    "RemoteFile",
    "Transport",
    "Truncates",
    "WriteMode",
    "check_name",
    "is_leftover_temp",
    "is_timeout",
    "map_errors",
    "temp_name",
    "validate_name",
]


def temp_name(name: str) -> str:
    """A fresh name for `replace`'s temp file of `name`: `.<name>.tmp-<12 hex digits>`,
    hidden (a dot-file is no replica to a pass)."""
    return f".{name}.tmp-{secrets.token_hex(6)}"


def is_leftover_temp(found: str, name: str) -> bool:
    """Whether `found` is a temp file of `name` (`temp_name`): left by a `replace` cut off
    between its write and its rename (a dropped connection, a killed process)."""
    prefix = f".{name}.tmp-"
    rest = found[len(prefix) :]
    return (
        found.startswith(prefix) and len(rest) == 12 and all(c in "0123456789abcdef" for c in rest)
    )


def validate_name(name: str) -> bool:
    """Whether `name` may be a memory folder or a file name on a hub.

    `[A-Za-z0-9._-]{1,64}`, and neither "." nor "..": no separators, no traversal.
    """
    return valid_name(name)


def check_name(where: str, *names: str) -> None:
    """Raise `TransportError` naming `where` unless every one of `names` is valid."""
    for name in names:
        if not validate_name(name):
            raise TransportError(f"{where}: invalid name {shown(name)}")


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A regular file directly inside a hub folder (never a symlink)."""

    name: str
    size: int
    mtime: float
    generation: str | None = None
    """Set by hubs whose files change only by appends within one generation (S3): while a
    file's generation is the one seen when it was last read, the bytes already read are
    unchanged, and need no check. None: no such promise (a folder, SSH)."""


class Transport(Protocol):
    """A hub seen from one replica. Implementations raise only `TransportError` subclasses."""

    def list_files(self, folder: str) -> list[RemoteFile]:
        """Regular files with valid names directly in `folder`; symlinks and others are skipped.

        A missing folder is `[]`; a missing hub root is a `TransportError`, so that an
        unmounted share never looks like an empty memory.
        """
        ...

    def size(self, folder: str, name: str) -> int | None:
        """The size of a regular file, or None when it does not exist."""
        ...

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        """Up to `limit` bytes from `offset` (fewer at the end). Refuses symlinks."""
        ...

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        """Write `data` at exactly `offset`, flush it, and return the file's size afterwards.

        `offset == 0` creates a missing folder (0700) and file (0600); an offset past the end
        is refused. Never an append-mode write: the caller is the file's only writer. After an
        error the outcome is unknown: call `size` before writing again.
        """
        ...

    def replace(self, folder: str, name: str, data: bytes) -> None:
        """Atomically make `data` the whole content of the file (temp file, fsync, rename)."""
        ...

    def close(self) -> None:
        """Release connections; the transport may be used again afterwards (it reconnects)."""
        ...


# Optional capabilities: a pass asks `isinstance(transport, Truncates)` and so on, and mypy
# checks what it then calls. A transport has them by having the members (no registration).


@runtime_checkable
class Truncates(Protocol):
    """A hub that can cut a file back (a folder, SSH, the in-memory hub): a torn write of
    ours is taken back (issue 13, item 14) instead of being ended with a newline."""

    def truncate(self, folder: str, name: str, size: int) -> None:
        """Cut the file to `size` bytes (never longer than it is)."""
        ...


@runtime_checkable
class PushChunks(Protocol):
    """A hub that asks for pushes in chunks of another size than `PUSH_CHUNK_BYTES` (S3:
    one object per write, so fewer and larger)."""

    push_chunk_bytes: int


@runtime_checkable
class Fragments(Protocol):
    """A hub whose files are made of segments (S3): whether one is in many small ones,
    worth rewriting as one (our own hub file's compaction)."""

    def fragmented(self, folder: str, name: str) -> bool:
        """Whether `name` is in more segments than it is worth keeping."""
        ...


@runtime_checkable
class WriteMode(Protocol):
    """A hub with more than one way to write safely (S3: conditional PUTs, or plain ones
    where the store ignores conditions); `memsync status` shows which (None: not known
    yet)."""

    mode: str | None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror  # "[Errno 2] No such file or directory: '/x'" without the repr
    return text.rstrip(" :.") or type(exc).__name__


def is_timeout(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it was raised from, is a timeout."""
    # paramiko raises SSHException from a socket.timeout (banner, channel), so look at the chain.
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError since 3.10
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _translate(
    where: str, exc: BaseException, host: str | None, path: str | None
) -> TransportError:
    detail = _one_line(exc)
    if is_timeout(exc):
        quiet = detail in ("TimeoutError", "timeout", "timed out")
        message = f"{where}: timed out" + ("" if quiet else f" ({detail})")
        return TransportTimeout(message, host, path)
    return TransportError(f"{where}: {detail}", host, path)


@contextmanager
def map_errors(where: str, *, host: str | None = None, path: str | None = None) -> Iterator[None]:
    """Translate OSError, EOFError and paramiko errors into `TransportError` naming `where`.

    `where` is the remote and path, e.g. `ssh://me@host:22/hub/notes/a.jsonl`, for the
    message; `host` (None for a folder) and `path` (default: `where`) become the error's
    fields, also of a `TransportError` raised inside without them. Other errors that
    are already memsync's pass through untouched. paramiko is not imported here: its
    exceptions are recognised by module name, so that `import memsync` stays light.
    """
    try:
        yield
    except TransportError as exc:  # ours, raised inside: give it the fields it lacks
        if exc.host is None:
            exc.host = host
        if exc.path is None:
            exc.path = where if path is None else path
        raise
    except MemsyncError:
        raise
    except (OSError, EOFError) as exc:
        raise _translate(where, exc, host, where if path is None else path) from exc
    except Exception as exc:
        if not type(exc).__module__.startswith("paramiko"):
            raise
        raise _translate(where, exc, host, where if path is None else path) from exc
