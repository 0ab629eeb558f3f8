"""memsync: keep agent memory files (agent-memory/0.1 JSON Lines) consistent across machines
and agents. Public API only; see README.md.

The package is three rooms (STYLE.md): `memsync.core` (the rules, pure), `memsync.local`
(one memory file on this machine) and `memsync.hub` (between machines). Everything a user
needs is importable from here.
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
import typing as _typing


def _import_msgspec_without_typing_extensions() -> None:
    """Import msgspec once, before any memsync module does, without `typing_extensions`.

    msgspec's `_utils` takes `get_type_hints`, `Required` and `NotRequired` from
    `typing_extensions` when it is installed (pydantic brings it), and that module imports
    `inspect`, `ast`, `dis` and `tokenize`: about 10 ms of every command's start-up, a sixth
    of issue 20's 3x budget. On Python 3.11 msgspec falls back to `typing`'s own, which
    resolve memsync's annotations the same way (they use nothing from typing_extensions).
    A `None` in `sys.modules` makes that one import fail; the entry is removed at once, so
    pydantic and anything else import typing_extensions as usual afterwards. Nothing to do
    when either module is already loaded (an MCP server that imported pydantic first), nor
    when other threads run: one of them could import typing_extensions in that moment (a
    program importing memsync late; every memsync command starts with one thread)."""
    if "msgspec" in _sys.modules or "typing_extensions" in _sys.modules:
        return
    threading = _sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    _sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec  # noqa: F401
    finally:
        del _sys.modules["typing_extensions"]


_import_msgspec_without_typing_extensions()

from memsync.errors import (
    ConfigError,
    DaemonAlreadyRunning,
    FileReplaced,
    HostKeyError,
    HubKeyMismatch,
    InvalidRecord,
    KeyFileError,
    LockTimeout,
    MemsyncError,
    NotQuiet,
    ReplicaClash,
    SecretRefused,
    TransportError,
    TransportTimeout,
    UnknownId,
    UnreadableHubFile,
    UnsupportedFormat,
    UsageError,
)

if _typing.TYPE_CHECKING:
    from memsync.core.handoff import HandoffFilter
    from memsync.core.lines import BadLine
    from memsync.core.records import Record
    from memsync.hub.compaction import acknowledged_for
    from memsync.hub.sync import SyncReport, sync_once
    from memsync.hub.transports import RemoteFile, Transport, open_transport
    from memsync.hub.transports.memory import InMemoryTransport
    from memsync.local.acknowledgements import ALL
    from memsync.local.compaction import CompactionResult, compact_file
    from memsync.local.export import export_markdown
    from memsync.local.fulltext import RecallHit, recall
    from memsync.local.handoff import handoff
    from memsync.local.importers import ImportResult, import_mcp_memory
    from memsync.local.located import check_files
    from memsync.local.memory import Memory
    from memsync.local.merge import (
        MergeResult,
        PendingMerge,
        apply_merge,
        merge_files,
        plan_file_merge,
    )
    from memsync.local.reading import CheckReport, MemoryView, SecretFinding, view_of
    from memsync.local.statedir import StateDir
    from memsync.models import Entry, Tombstone

# Everything but the errors is imported on first use (PEP 562): `import memsync` (and so
# every `memsync ...` command, whose package this is) must not pay for pydantic, SQLite
# or the hub when a command needs none of them (issue 14: start-up time).
_LAZY = {
    "ALL": "memsync.local.acknowledgements",
    "BadLine": "memsync.core.lines",
    "CheckReport": "memsync.local.reading",
    "CompactionResult": "memsync.local.compaction",
    "Entry": "memsync.models",
    "HandoffFilter": "memsync.core.handoff",
    "ImportResult": "memsync.local.importers",
    "InMemoryTransport": "memsync.hub.transports.memory",
    "Memory": "memsync.local.memory",
    "MemoryView": "memsync.local.reading",
    "MergeResult": "memsync.local.merge",
    "PendingMerge": "memsync.local.merge",
    "RecallHit": "memsync.local.fulltext",
    "Record": "memsync.core.records",
    "RemoteFile": "memsync.hub.transports",
    "SecretFinding": "memsync.local.reading",
    "StateDir": "memsync.local.statedir",
    "SyncReport": "memsync.hub.sync",
    "Tombstone": "memsync.models",
    "Transport": "memsync.hub.transports",
    "acknowledged_for": "memsync.hub.compaction",
    "apply_merge": "memsync.local.merge",
    "check_files": "memsync.local.located",
    "compact_file": "memsync.local.compaction",
    "export_markdown": "memsync.local.export",
    "handoff": "memsync.local.handoff",
    "import_mcp_memory": "memsync.local.importers",
    "merge_files": "memsync.local.merge",
    "open_transport": "memsync.hub.transports",
    "plan_file_merge": "memsync.local.merge",
    "recall": "memsync.local.fulltext",
    "sync_once": "memsync.hub.sync",
    "view_of": "memsync.local.reading",
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memsync' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


from memsync.core.version import __version__

__all__ = [
    "ALL",
    "BadLine",
    "CheckReport",
    "CompactionResult",
    "ConfigError",
    "DaemonAlreadyRunning",
    "Entry",
    "FileReplaced",
    "HandoffFilter",
    "HostKeyError",
    "HubKeyMismatch",
    "ImportResult",
    "InMemoryTransport",
    "InvalidRecord",
    "KeyFileError",
    "LockTimeout",
    "Memory",
    "MemoryView",
    "MemsyncError",
    "MergeResult",
    "NotQuiet",
    "PendingMerge",
    "RecallHit",
    "Record",
    "RemoteFile",
    "ReplicaClash",
    "SecretFinding",
    "SecretRefused",
    "StateDir",
    "SyncReport",
    "Tombstone",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "UnknownId",
    "UnreadableHubFile",
    "UnsupportedFormat",
    "UsageError",
    "__version__",
    "acknowledged_for",
    "apply_merge",
    "check_files",
    "compact_file",
    "export_markdown",
    "handoff",
    "import_mcp_memory",
    "merge_files",
    "open_transport",
    "plan_file_merge",
    "recall",
    "sync_once",
    "view_of",
]
