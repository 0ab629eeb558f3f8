"""Convergence of one memory through one hub, for `memsync status` and the daemon (issue 21):
the receipts and file sizes last seen (or read now), judged by `memsync.core.convergence`.
"""

from __future__ import annotations

import os
from pathlib import Path

from memsync.core.convergence import Convergence, judge
from memsync.errors import MemsyncError
from memsync.hub.codec import Codec, PlainCodec
from memsync.hub.receipts import receipt_state, refresh
from memsync.hub.state import SyncState
from memsync.hub.transports import Transport
from memsync.local.fileindex import Cursor, cursor_valid
from memsync.local.statedir import StateDir

__all__ = ["convergence", "local_ahead"]


def local_ahead(local: Path, state_dir: StateDir, memory: str, remote: str) -> str | None:
    """What the local file holds past the last push to `remote`, in words, or None (nothing,
    or not known: a file compacted since, whose cursor no longer holds)."""
    saved = SyncState.load(state_dir.sync_state(memory, remote)).pushed
    if saved is None:
        return None
    cursor = Cursor(saved["ino"], saved["offset"], saved["line"], bytes.fromhex(saved["tail"]))
    try:
        size = os.stat(local).st_size
    except OSError:
        return None
    if size <= cursor.offset or not cursor_valid(local, cursor):
        return None
    return f"{size - cursor.offset} bytes written to {local.name} since its last push"


def convergence(
    *,
    memory: str,
    remote: str,
    local: Path,
    replica: str,
    state_dir: StateDir,
    now: int,
    retired: set[str],
    transport: Transport | None = None,
    codec: Codec | None = None,
) -> tuple[Convergence, int | None, str | None]:
    """The convergence of `memory` through `remote`, the time of the listing it is judged
    on, and the error that kept the hub from being read now (then: as last seen).

    With a `transport` (and its `codec`), the hub's folder is listed now and the receipts
    that changed are read (a small read each; see `refresh`); without, the last pass's
    view is used. Our own receipt is the last one this machine published.
    """
    rs = receipt_state(state_dir, memory, remote)
    error = None
    if transport is not None:
        try:
            listing = transport.list_files(memory)
            codec = codec or PlainCodec(remote, memory)
            refresh(transport, codec, memory, rs, listing, replica, now, force=True)
        except MemsyncError as exc:
            error = str(exc)
    verdict = judge(
        replica,
        rs.receipts(replica),
        rs.files,
        now=now,
        retired=retired,
        local_ahead=local_ahead(local, state_dir, memory, remote),
    )
    return verdict, rs.listed_at, error
