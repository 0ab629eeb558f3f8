"""The one exception tree of memsync.

A bad *line* is never an exception (SEMANTICS rule 4): it is a `BadLine` value. Exceptions
are for things that stop an operation: a file that cannot be read, a config mistake, a
remote that cannot be reached.

    MemsyncError
     ├── UnsupportedFormat (ValueError)     a header names a format memsync does not read
     ├── ConfigError (ValueError)           a config file mistake: file, key, hint
     ├── InvalidRecord (ValueError)         a record memsync was asked to write is invalid
     ├── SecretRefused (ValueError)         a text to add looks like a credential
     ├── UsageError                         a command line that cannot be carried out
     ├── UnknownId (LookupError)            no record with this id in the file: file, id
     ├── LockTimeout (TimeoutError)         a file's lock could not be taken in time
     ├── NotQuiet                           compaction: the file is busy; try again later
     ├── FileReplaced (OSError)             a merge target kept being replaced: file, during
     ├── ReplicaClash                       our hub file holds bytes we did not write
     ├── DaemonAlreadyRunning               another daemon holds the state directory
     ├── KeyFileError                       a hub key file is missing or holds no key
     ├── HubKeyMismatch                     a hub file is in another mode or under another key
     └── TransportError (OSError)           a remote failed: message, host, path
          ├── TransportTimeout              ... did not answer in time
          ├── UnreadableHubFile             ... one hub file cannot be read as it stands
          └── HostKeyError                  ... its SSH host key is unknown or changed
"""

from __future__ import annotations

__all__ = [
    "SHOWN_CHARS",
    "ConfigError",
    "DaemonAlreadyRunning",
    "FileReplaced",
    "HostKeyError",
    "HubKeyMismatch",
    "InvalidRecord",
    "KeyFileError",
    "LockTimeout",
    "MemsyncError",
    "NotQuiet",
    "ReplicaClash",
    "SecretRefused",
    "TransportError",
    "TransportTimeout",
    "UnknownId",
    "UnreadableHubFile",
    "UnsupportedFormat",
    "UsageError",
    "shown",
]

SHOWN_CHARS = 40
"""How much of an id or a name a message quotes (issue 13, item 21: a 10 kB id typed or
pasted by mistake came back whole, 10 kB of error line)."""


def shown(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text` quoted for a message (its `repr`, so control characters are escaped), cut to
    `limit` characters and "…" when longer. Every message that quotes an id or a name
    from the command line, a config or a hub uses it."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


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


class UsageError(MemsyncError):
    """A command line that cannot be carried out as written (exit status 2)."""


class UnknownId(MemsyncError, LookupError):
    """No record with this id in the file (`forget`), or no live entry (`supersede`)."""

    def __init__(self, file: str, rid: str, live: bool = False) -> None:
        self.file = file
        self.id = rid
        self.live = live
        what = "live entry" if live else "record"
        super().__init__(f"{file}: no {what} with id {shown(rid)}")

    def __reduce__(self) -> tuple[type[UnknownId], tuple[str, str, bool]]:
        return (type(self), (self.file, self.id, self.live))


class FileReplaced(MemsyncError, OSError):
    """The destination of a merge or handoff was replaced (compacted) again and again while
    it was planned; trying again later works."""

    def __init__(self, file: str, during: str = "merge") -> None:
        self.file = file
        self.during = during
        super().__init__(f"{file}: replaced repeatedly during the {during}; try again")

    def __reduce__(self) -> tuple[type[FileReplaced], tuple[str, str]]:
        return (type(self), (self.file, self.during))


class DaemonAlreadyRunning(MemsyncError):
    """Another daemon holds the PID lock of the state directory `state_dir`."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        super().__init__(
            f"another memsync daemon is running for the state directory {state_dir}; "
            "stop it first (one daemon per state directory)"
        )

    def __reduce__(self) -> tuple[type[DaemonAlreadyRunning], tuple[str]]:
        return (type(self), (self.state_dir,))


class LockTimeout(MemsyncError, TimeoutError):
    """A file's `<file>.lock` could not be taken in time."""


class NotQuiet(MemsyncError):
    """Compaction did not start: the file changed recently, is open for writing, or locked."""


class ReplicaClash(MemsyncError):
    """Our own hub file holds bytes this replica did not write: two machines share an id."""

    KIND = "replica-clash"
    """The `error_kind` of a sync report and of the daemon's status for this error: pushes
    are stopped until the user acts, so `memsync status` counts it a problem at once."""


class TransportError(MemsyncError, OSError):
    """A remote could not be read or written. `message` reads well on its own (it names the
    remote and path); `host` (None for a folder) and `path` are there for programs."""

    def __init__(self, message: str, host: str | None = None, path: str | None = None) -> None:
        self.message = message
        self.host = host
        self.path = path
        super().__init__(message)

    def __reduce__(self) -> tuple[type[TransportError], tuple[str, str | None, str | None]]:
        return (type(self), (self.message, self.host, self.path))


class TransportTimeout(TransportError, TimeoutError):
    """A remote did not answer in time."""


class UnreadableHubFile(TransportError):
    """One hub file cannot be read as it stands, whatever the connection does (an S3 file
    whose segments do not tile, a segment shorter than listed or failing its checksum). A
    peer's is skipped and reported while the rest of the memory syncs (issue 24, item 8)."""


class HostKeyError(TransportError):
    """An SSH host key is unknown or changed; the message names the host and fingerprint."""


class KeyFileError(MemsyncError):
    """A hub key file that is missing, unreadable or holds something that is not a key
    (issue 12)."""


class HubKeyMismatch(MemsyncError):
    """A hub file is not in this machine's mode (plain or encrypted), or is encrypted under
    a key this machine lacks (issue 12)."""
