"""memsync: keep agent memory files (agent-memory/0.1 JSON Lines) consistent across machines
and agents. Public API only; see README.md.

The package is three rooms (STYLE.md): `memsync.core` (the rules, pure), `memsync.local`
(one memory file on this machine) and `memsync.hub` (between machines). Everything a user
needs is importable from here.
"""

from __future__ import annotations

from memsync.core.handoff import HandoffFilter
from memsync.core.lines import BadLine
from memsync.core.records import Record
from memsync.errors import (
    ConfigError,
    DaemonAlreadyRunning,
    FileReplaced,
    HostKeyError,
    InvalidRecord,
    LockTimeout,
    MemsyncError,
    NotQuiet,
    ReplicaClash,
    SecretRefused,
    TransportError,
    TransportTimeout,
    UnknownId,
    UnsupportedFormat,
    UsageError,
)
from memsync.hub.sync import SyncReport, sync_once
from memsync.hub.transports import RemoteFile, Transport, open_transport
from memsync.local.compaction import CompactionResult, compact_file
from memsync.local.export import export_markdown
from memsync.local.fulltext import RecallHit, recall
from memsync.local.importers import ImportResult, import_mcp_memory
from memsync.local.memory import Memory
from memsync.local.merge import (
    MergeResult,
    PendingMerge,
    apply_merge,
    handoff,
    merge_files,
    plan_file_merge,
)
from memsync.local.reading import CheckReport, MemoryView, SecretFinding, check_files, view_of
from memsync.models import Entry, Tombstone

__version__ = "0.1.0"

__all__ = [
    "BadLine",
    "CheckReport",
    "CompactionResult",
    "ConfigError",
    "DaemonAlreadyRunning",
    "Entry",
    "FileReplaced",
    "HandoffFilter",
    "HostKeyError",
    "ImportResult",
    "InvalidRecord",
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
    "SyncReport",
    "Tombstone",
    "Transport",
    "TransportError",
    "TransportTimeout",
    "UnknownId",
    "UnsupportedFormat",
    "UsageError",
    "__version__",
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
