"""`memsync diff`: the entries that differ between this machine's view and another
replica's (issue 21), without fetching that replica's view.

1. Its receipt (a small read) gives the digest of each bucket of ids in its view; this
   machine's view gives its own. Only the buckets that differ are looked at.
2. Its view of those buckets is rebuilt from what this machine holds: the local file's
   records in those buckets, less those the hub does not hold (ours, unpushed) and less
   those in the stretches of hub files it has not read yet, plus those in the stretches it
   has read and this machine has not (its read offsets in the receipt against ours). Only
   those stretches are read from the hub: kilobytes when the replicas are close.
3. The rebuilt view of each bucket is checked against the digest in its receipt. A bucket
   that does not match (it holds records it never pushed, or its view is wrong: diverged)
   is named as such, with the entries here that fall in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from memsync.core.lines import split_complete
from memsync.core.receipts import RECEIPT_SUFFIX, Receipt
from memsync.core.records import Record
from memsync.core.scan import line_digest
from memsync.core.viewdiff import (
    Difference,
    bucket_digests,
    bucket_view,
    differences,
    relevant_records,
)
from memsync.errors import MemsyncError
from memsync.hub._pass import HUB_FILE_SUFFIX
from memsync.hub.codec import Codec
from memsync.hub.receipts import local_receipt, read_receipt
from memsync.hub.state import SyncState
from memsync.hub.transports import Transport
from memsync.local.fileindex import DigestStore
from memsync.local.statedir import StateDir
from memsync.local.storage import read_chunks
from memsync.local.viewstore import ViewStore

__all__ = ["DiffReport", "diff_replica"]


@dataclass
class DiffReport:
    """What `memsync diff` found."""

    peer: Receipt
    buckets: list[int] = field(default_factory=list)
    """The buckets whose digests differ."""
    differences: list[Difference] = field(default_factory=list)
    unresolved: list[int] = field(default_factory=list)
    """Differing buckets whose view there could not be rebuilt from the hub."""
    hub_bytes: int = 0
    """Bytes read from the hub (the receipt and the stretches of files)."""


def _local_lines(local: Path) -> list[bytes]:
    if not local.exists():
        return []
    return [raw for chunk in read_chunks(local) for raw in chunk.lines]


class _Rebuild:
    """The records of the peer's view of the differing buckets, from ours and the hub."""

    def __init__(
        self, t: Transport, codec: Codec, memory: str, buckets: set[int], peer: Receipt
    ) -> None:
        self.t, self.codec, self.memory, self.buckets, self.peer = t, codec, memory, buckets, peer
        self.added: list[Record] = []
        self.removed: set[int] = set()
        self.exact = True  # False: a generation differs, the stretches are not known
        self.bytes = 0

    def stretch(self, name: str, start: int, end: int) -> list[Record]:
        """The relevant records of hub file `name` between two line boundaries."""
        if end <= start:
            return []
        data = self.t.read(self.memory, name, start, end - start)
        self.bytes += len(data)
        lines, _ = split_complete(data, at_start=start == 0)
        return list(relevant_records(self.codec.plain_lines(lines), self.buckets))

    def file(self, name: str, ours: tuple[int, str | None] | None) -> None:
        """Take in one hub file: what the peer read of it against what we read."""
        owner = name[: -len(HUB_FILE_SUFFIX)]
        theirs = self.peer.own if owner == self.peer.replica else self.peer.read.get(name)
        mine = ours or (0, None)
        if theirs is None:
            theirs = (0, mine[1])
        if theirs[1] != mine[1] and theirs[0] and mine[0]:
            self.exact = False  # read in another generation: stretches not comparable
            return
        if theirs[0] < mine[0]:  # we read more: the peer has not seen those records yet
            seen_here = self.stretch(name, theirs[0], mine[0])
            self.removed |= {line_digest(r.raw) for r in seen_here}
        elif theirs[0] > mine[0]:  # the peer read (or wrote) more than we did
            self.added += self.stretch(name, mine[0], theirs[0])


def diff_replica(
    *,
    memory: str,
    remote: str,
    local: Path,
    replica: str,
    peer: str,
    state_dir: StateDir,
    transport: Transport,
    codec: Codec,
    now: int,
) -> DiffReport:
    """Compare this machine's view of `memory` with replica `peer`'s, through `remote`.

    Raises:
        MemsyncError: the hub holds no readable receipt of `peer` for this memory.
    """
    where = f"{remote}:{memory}/{peer}{RECEIPT_SUFFIX}"
    listing = {f.name: f for f in transport.list_files(memory)}
    f = listing.get(peer + RECEIPT_SUFFIX)
    if f is None:
        raise MemsyncError(
            f"{where}: no receipt (has {peer} synced with a memsync that writes them?)"
        )
    theirs = read_receipt(transport, codec, memory, f)
    if theirs is None:
        raise MemsyncError(f"{where}: not a receipt this machine can read (another key?)")
    report = DiffReport(theirs, hub_bytes=f.size)
    mine = local_receipt(local, replica, now, None, {}, None, ViewStore(state_dir))
    report.buckets = [
        b
        for b, (x, y) in enumerate(zip(mine.view.buckets, theirs.view.buckets, strict=True))
        if x != y
    ]
    if not report.buckets:
        return report
    buckets = set(report.buckets)
    ours = list(relevant_records(_local_lines(local), buckets))
    rebuild = _Rebuild(transport, codec, memory, buckets, theirs)
    state = SyncState.load(state_dir.sync_state(memory, remote))
    for name in sorted(n for n in listing if n.endswith(HUB_FILE_SUFFIX) and not n.startswith(".")):
        if name == replica + HUB_FILE_SUFFIX:
            pos = None if state.own_size is None else (state.own_size, state.own_generation)
        else:
            p = state.peers.get(name[: -len(HUB_FILE_SUFFIX)])
            pos = None if p is None else (p.offset, p.generation)
        rebuild.file(name, pos)
    report.hub_bytes += rebuild.bytes
    hub = DigestStore(state_dir.hub_index(memory, remote))
    try:
        held = hub.intersection([line_digest(r.raw) for r in ours])
    finally:
        hub.close()
    base = [
        r for r in ours if (d := line_digest(r.raw)) in held and d not in rebuild.removed
    ] + rebuild.added
    here = bucket_view(ours, buckets, now)
    there = bucket_view(base, buckets, theirs.time)
    rebuilt = bucket_digests(there)
    report.unresolved = [
        b
        for b in report.buckets
        if not rebuild.exact or rebuilt.get(b, 0) != theirs.view.buckets[b]
    ]
    report.differences = differences(here, there)
    return report
