"""memsync: keep agent memory files (agent-memory/0.1 JSON Lines) consistent across machines
and agents. Public API only; see README.md."""

from __future__ import annotations

from memsync.core.lines import BadLine
from memsync.core.records import Record
from memsync.errors import (
    ConfigError,
    HostKeyError,
    InvalidRecord,
    LockTimeout,
    MemsyncError,
    NotQuiet,
    ReplicaClash,
    SecretRefused,
    TransportError,
    TransportTimeout,
    UnsupportedFormat,
)
from memsync.export import export_markdown
from memsync.fulltext import RecallHit, recall
from memsync.importers import ImportResult, import_mcp_memory
from memsync.memfile import CheckReport, Memory, MemoryView
from memsync.models import Entry, Tombstone

__version__ = "0.1.0"

__all__ = [
    "BadLine",
    "CheckReport",
    "ConfigError",
    "Entry",
    "HostKeyError",
    "ImportResult",
    "InvalidRecord",
    "LockTimeout",
    "Memory",
    "MemoryView",
    "MemsyncError",
    "NotQuiet",
    "RecallHit",
    "Record",
    "ReplicaClash",
    "SecretRefused",
    "Tombstone",
    "TransportError",
    "TransportTimeout",
    "UnsupportedFormat",
    "__version__",
    "export_markdown",
    "import_mcp_memory",
    "recall",
]
