"""What this machine makes fresh for a write: the time now, a new record id, the header of a
new file (with a new generation token)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import msgspec

from memsync.core.timestamps import format_ts, from_datetime

__all__ = ["header_line", "new_id", "now_us"]


def now_us() -> int:
    """The local clock, in microseconds since the epoch."""
    return from_datetime(datetime.now(UTC))


def new_id() -> str:
    """A new record id: 12 random lowercase hex digits."""
    # `secrets.token_hex(6)` is this; the `secrets` module costs `add` ~4 ms to import.
    return os.urandom(6).hex()


def header_line(now: int, generation: str | None = None, install: str | None = None) -> bytes:
    """A header line for a new file (rule 2), with a generation token (new at each rewrite)
    and, for a hub file, the token of the installation that writes it (issue 13, item 11)."""
    obj = {
        "format": "agent-memory/0.1",
        "created_at": format_ts(now),
        "generation": generation or os.urandom(8).hex(),
    }
    if install is not None:
        obj["install"] = install
    return msgspec.json.encode(obj) + b"\n"
