"""The one exception tree of memsync.

A bad *line* is never an exception (SEMANTICS rule 4): it is a `BadLine` value. Exceptions
are for things that stop an operation: a file that cannot be read, a config mistake, a
remote that cannot be reached.

    MemsyncError
     ├── UnsupportedFormat (ValueError)     a header names a format memsync does not read
     ├── ConfigError (ValueError)           a config file mistake: file, key, hint
     ├── InvalidRecord (ValueError)         a record memsync was asked to write is invalid
     ├── SecretRefused (ValueError)         a text to add looks like a credential
     ├── LockTimeout (TimeoutError)         a file's lock could not be taken in time
     ├── NotQuiet                           compaction: the file is busy; try again later
     ├── ReplicaClash                       our hub file holds bytes we did not write
     └── TransportError (OSError)           a remote failed
          ├── TransportTimeout              ... did not answer in time
          └── HostKeyError                  ... its SSH host key is unknown or changed
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "HostKeyError",
    "InvalidRecord",
    "LockTimeout",
    "MemsyncError",
    "NotQuiet",
    "ReplicaClash",
    "SecretRefused",
    "TransportError",
    "TransportTimeout",
    "UnsupportedFormat",
]


class MemsyncError(Exception):
    """Base of every error memsync raises on purpose. `str()` reads well on its own."""


class UnsupportedFormat(MemsyncError, ValueError):
    """A header names a format other than agent-memory/0.x (SEMANTICS rule 2)."""

    def __init__(self, file: str, fmt: str) -> None:
        self.file = file
        self.fmt = fmt
        super().__init__(f"{file}: unsupported format {fmt!r}; memsync reads agent-memory/0.x only")

    def __reduce__(self) -> tuple[type[UnsupportedFormat], tuple[str, str]]:
        return (type(self), (self.file, self.fmt))


class ConfigError(MemsyncError, ValueError):
    """A mistake in a config file, naming the file and the key."""

    def __init__(self, file: str, key: str, message: str) -> None:
        self.file = file
        self.key = key
        self.message = message
        where = f"{file}: {key}: " if key else f"{file}: "
        super().__init__(where + message)

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str, str]]:
        return (type(self), (self.file, self.key, self.message))


class InvalidRecord(MemsyncError, ValueError):
    """A record memsync was asked to write does not satisfy SEMANTICS rule 3."""


class SecretRefused(MemsyncError, ValueError):
    """A text to add looks like a credential; the spec says never store secrets."""


class LockTimeout(MemsyncError, TimeoutError):
    """A file's `<file>.lock` could not be taken in time."""


class NotQuiet(MemsyncError):
    """Compaction did not start: the file changed recently, is open for writing, or locked."""


class ReplicaClash(MemsyncError):
    """Our own hub file holds bytes this replica did not write: two machines share an id."""


class TransportError(MemsyncError, OSError):
    """A remote could not be read or written."""


class TransportTimeout(TransportError, TimeoutError):
    """A remote did not answer in time."""


class HostKeyError(TransportError):
    """An SSH host key is unknown or changed; the message names the host and fingerprint."""
