"""Compaction's side of the hub (SEMANTICS rule 15): which tombstones every replica has
read (`acknowledged_for`), and the compaction of this replica's own hub file."""

from __future__ import annotations

import base64
import secrets as _random
from collections.abc import Callable
from pathlib import Path

from memsync.core.compaction import compact_lines
from memsync.core.records import Record
from memsync.hub import acknowledgement, covered_snapshot, marks_of, retired, snapshot_of
from memsync.hubcodec import PlainCodec  # issue 12
from memsync.index import DigestStore
from memsync.memfile import now_us
from memsync.sync import HUB_TAIL_BYTES, READ_BYTES, b64, complete_lines
from memsync.syncstate import SyncState, hub_store_path, pass_lock, state_path
from memsync.transports import Transport

__all__ = ["acknowledged_for", "compact_own_hub_file"]


def acknowledged_for(
    state_dir: Path, memory: str, remotes: list[str], replica: str
) -> Callable[[Record], bool] | None:
    """Compaction's predicate for a local file synced with `remotes` (rule 15): a tombstone
    may go only when, in every hub, it was seen no later than a snapshot every other
    replica (retired ones aside) has read past. None for a file with no remote."""
    if not remotes:
        return None
    gone = retired(state_dir)
    checks: list[Callable[[Record], bool]] = []
    for remote in remotes:
        state = SyncState.load(state_path(state_dir, memory, remote))
        others = {
            name: marks_of(name, state.marks.get(name))
            # Every replica known in the hub: one with a file, or only watermarks (a
            # replica that has read but never written).
            for name in state.peers.keys() | state.marks.keys()
            if name != replica and name not in gone
        }
        covered = covered_snapshot([snapshot_of(d) for d in state.snapshots], others)
        store = DigestStore(hub_store_path(state_dir, memory, remote))
        checks.append(acknowledgement(store.seen_at, covered))

    def acknowledged(rec: Record) -> bool:
        return all(check(rec) for check in checks)

    return acknowledged


def compact_own_hub_file(
    *,
    memory: str,
    remote: str,
    transport: Transport,
    replica: str,
    state_dir: Path,
    horizon: int,
    acknowledged: Callable[[Record], bool] | None,
    now: int | None = None,
    codec: PlainCodec | None = None,
) -> tuple[int, int] | None:
    """Compact this replica's own file in the hub the same way as a local file (rules 15
    and 16): only we write it, so under the pass lock no line can arrive meanwhile; the new
    content replaces it atomically (posix-rename over SSH) with a new generation token in
    its header, so that peers notice and read it again. Returns the sizes before and after,
    or None when there was nothing to compact or the file is not as we left it.
    `codec` (issue 12) is the remote's: an encrypted file is compacted as its plain records
    and written back encrypted under the current key."""
    codec = codec if codec is not None else PlainCodec(remote, memory)
    at = now_us() if now is None else now
    own = replica + ".jsonl"
    with pass_lock(state_dir, memory, remote):
        state = SyncState.load(state_path(state_dir, memory, remote))
        size = transport.size(memory, own)
        if not size or size != state.own_size:
            return None  # unknown to us: the next pass checks it first
        data = b""
        while len(data) < size:
            block = transport.read(memory, own, len(data), min(READ_BYTES, size - len(data)))
            if not block:
                break
            data += block
        tail = base64.b64decode(state.own_tail)
        if not data.endswith(tail):
            return None
        lines, _ = complete_lines(data)
        lines = codec.plain_lines(lines)  # issue 12: compacted as records, not ciphertext
        plan, bad = compact_lines(lines, now=at, horizon=horizon, acknowledged=acknowledged)
        if bad:
            # Only we write this file, and only whole valid records: a bad line here is the
            # rest of a write cut short, whose record was pushed again whole. Keep them.
            return None
        generation = _random.token_hex(8)
        new = codec.header(at, generation) + b"".join(  # issue 12
            codec.encode_line(r.raw) + b"\n" for r in plan.keep
        )
        if len(new) >= size:
            return None
        transport.replace(memory, own, new)
        state.own_size, state.own_tail = len(new), b64(new[-HUB_TAIL_BYTES:])
        state.own_generation = generation
        state.save(state_path(state_dir, memory, remote))
        return size, len(new)
