"""Compaction's side of the hub (SEMANTICS rule 15): which tombstones every replica has
read (`acknowledged_for`), the compaction of this replica's own hub file, and
`compact_memory`, the one compaction sequence (`memsync compact` and the daemon's
scheduled job both call it)."""

from __future__ import annotations

import base64
import secrets as _random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from memsync.core.compaction import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_QUIET_SECONDS,
    Survey,
    plan_compaction,
)
from memsync.core.lines import split_complete
from memsync.core.records import Record
from memsync.core.scan import line_digest
from memsync.core.timestamps import SECOND
from memsync.core.watermarks import (
    Snapshot,
    acknowledged,
    covered_snapshot,
    marks_of,
    snapshot_of,
)
from memsync.errors import MemsyncError
from memsync.hub._pass import HUB_TAIL_BYTES, READ_BYTES, b64
from memsync.hub.codec import Codec, PlainCodec
from memsync.hub.state import (
    SyncState,
    install_token,
    pass_lock,
    replace_done,
    retired,
    save_replace_intent,
)
from memsync.hub.transports import Fragments, Transport
from memsync.local.acknowledgements import ALL, Acknowledgements, acknowledged_lines
from memsync.local.compaction import CompactionResult, compact_file
from memsync.local.fileindex import DigestStore
from memsync.local.fresh import now_us
from memsync.local.progress import Progress
from memsync.local.quiet import check_quiet
from memsync.local.statedir import StateDir
from memsync.local.storage import read_chunks
from memsync.local.viewstore import ViewStore

__all__ = ["MemoryCompaction", "acknowledged_for", "compact_memory", "compact_own_hub_file"]


def acknowledged_for(
    state_dir: StateDir, memory: str, remotes: Sequence[str], replica: str
) -> Callable[[Record], bool] | None:
    """Compaction's predicate for a local file synced with `remotes` (rule 15): a tombstone
    may go only when, in every hub, it was seen no later than a snapshot every other
    replica (retired ones aside) has read past, and no later than our own hub file's last
    compaction against the local file (`compact_own_hub_file` with `local`, issue 24). None for a file with no remote: no hub has
    a word on it (compaction then keeps every tombstone unless told `ALL`, as
    `compact_memory` tells it for such a file). Its digest stores stay open for the
    predicate's life; `_acknowledgements` closes them."""
    return _acknowledged(state_dir, memory, remotes, replica, ExitStack(), weighed=True)


@contextmanager
def _acknowledgements(
    state_dir: StateDir, memory: str, remotes: Sequence[str], replica: str, *, weighed: bool
) -> Iterator[Callable[[Record], bool] | None]:
    """`acknowledged_for`, with its digest stores closed at the end of the block; without
    `weighed`, for our own hub files (whatever a tombstone there deletes goes with it)."""
    with ExitStack() as stores:
        yield _acknowledged(state_dir, memory, remotes, replica, stores, weighed=weighed)


def _acknowledged(
    state_dir: StateDir,
    memory: str,
    remotes: Sequence[str],
    replica: str,
    stores: ExitStack,
    *,
    weighed: bool,
) -> Callable[[Record], bool] | None:
    if not remotes:
        return None
    gone = retired(state_dir)
    checks: list[Callable[[Record], bool]] = []
    for remote in remotes:
        state = SyncState.load(state_dir.sync_state(memory, remote))
        others = {
            # A peer's own hub file may hold what a tombstone deletes until that peer has
            # compacted it against a local file holding the tombstone (issue 24): its
            # "weighed" positions, when it publishes them.
            name: None if (m := marks_of(name, state.marks.get(name))) is None else m.as_weighed()
            # Every replica known in the hub: one with a file, or only watermarks (a
            # replica that has read but never written).
            for name in state.peers.keys() | state.marks.keys()
            if name != replica and name not in gone
        }
        covered = covered_snapshot([snapshot_of(d) for d in state.snapshots], others)
        store = stores.enter_context(DigestStore(state_dir.hub_index(memory, remote)))
        checks.append(_check(store, covered, state.own_compacted_at if weighed else None, weighed))

    def by_every_hub(rec: Record) -> bool:
        return all(check(rec) for check in checks)

    return by_every_hub


def _check(
    store: DigestStore, covered: Snapshot | None, weighed: int | None, weigh: bool
) -> Callable[[Record], bool]:
    """One hub's word on a tombstone: when the store saw it, judged by the core; and, with
    `weigh`, our own hub file compacted since (at `weighed`, by `compact_own_hub_file`
    with the local file),
    so that it holds nothing the tombstone deletes (issue 24, residual (b)): dropped from
    the local file first, the tombstone would leave such an entry alive in our hub file
    for any replica that reads it from the start (a lost state directory, a new one)."""

    def check(rec: Record) -> bool:
        seen = store.seen_at(rec.raw)
        if weigh and (seen is None or weighed is None or seen > weighed):
            return False
        return acknowledged(seen, covered)

    return check


@dataclass
class MemoryCompaction:
    """What compacting one memory did: its local file, then our own file in each hub."""

    local: CompactionResult
    hub_files: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    """Per remote: the hub file's sizes before and after, or None (nothing to do)."""
    hub_errors: dict[str, MemsyncError] = field(default_factory=dict)
    """Per remote: why its hub file was not compacted (the others still were)."""


def compact_memory(
    path: Path,
    *,
    memory: str = "",
    remotes: Sequence[str] = (),
    replica: str = "",
    state_dir: StateDir | None = None,
    transports: Mapping[str, Transport] | None = None,
    codecs: Mapping[str, Codec] | None = None,
    now: int | None = None,
    horizon_days: float = DEFAULT_HORIZON_DAYS,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    store: ViewStore | None = None,
) -> MemoryCompaction:
    """Compact one memory (rules 15 and 16): this replica's own file in each hub whose
    transport is given (`transports`: the daemon's open connections; the command line
    passes none), weighed against the local file while it still holds every tombstone;
    then the local file `path`, keeping every tombstone some replica of `remotes` has not
    read yet, or that was seen since our own hub file was last weighed (`_check`: the
    command line's compaction keeps it for the daemon's). `codecs` are the remotes' hub
    codecs (issue 12: an encrypted hub file is compacted as records, written back
    encrypted); a remote without one is plain. `force`: do not wait for the local file's
    quiet period (`compact_file`; the daemon, after too many postponements). `store`: the
    persistent views to leave the compacted local file's in (`compact_file`, issue 20).

    Raises:
        NotQuiet: the local file is busy (nothing was done; try again later).
        MemsyncError, OSError: the local file could not be compacted.
    """
    if remotes and state_dir is None:
        raise ValueError("compact_memory: remotes need the state directory")
    hub_files: dict[str, tuple[int, int] | None] = {}
    hub_errors: dict[str, MemsyncError] = {}
    with _acknowledgements(
        state_dir or StateDir(Path()), memory, remotes, replica, weighed=False
    ) as hubs:
        # A file no hub shares: every old tombstone may go (no replica can hold it back).
        ack: Acknowledgements = hubs if remotes else ALL
        ours = [(name, t) for name in remotes if (t := (transports or {}).get(name)) is not None]
        if ours and state_dir is not None and not dry_run:
            if not force:  # a busy file postpones it all, as before (no hub work per retry)
                check_quiet(path, path.stat(), quiet_seconds)
            # Our hub files first, weighed against the local file's records while it still
            # holds the tombstones its compaction is about to drop (issue 24, residual (b)).
            horizon = round(horizon_days * 86_400 * SECOND)
            for name, transport in ours:
                try:
                    hub_files[name] = compact_own_hub_file(
                        memory=memory,
                        remote=name,
                        transport=transport,
                        replica=replica,
                        state_dir=state_dir,
                        horizon=horizon,
                        acknowledged=ack,
                        now=now,
                        codec=(codecs or {}).get(name),
                        local=path,
                    )
                except MemsyncError as exc:
                    hub_errors[name] = exc
    # The local file's word: the hub compactions above may have just weighed our hub files.
    with _acknowledgements(
        state_dir or StateDir(Path()), memory, remotes, replica, weighed=True
    ) as hubs:
        local = compact_file(
            path,
            now=now,
            horizon_days=horizon_days,
            quiet_seconds=quiet_seconds,
            grace_seconds=grace_seconds,
            dry_run=dry_run,
            acknowledged=hubs if remotes else ALL,
            force=force,
            progress=progress,
            store=store,
        )
    return MemoryCompaction(local, hub_files, hub_errors)


def compact_own_hub_file(
    *,
    memory: str,
    remote: str,
    transport: Transport,
    replica: str,
    state_dir: StateDir,
    horizon: int,
    acknowledged: Acknowledgements,
    now: int | None = None,
    codec: Codec | None = None,
    local: Path | None = None,
) -> tuple[int, int] | None:
    """Compact this replica's own file in the hub the same way as a local file (rules 15
    and 16): only we write it, so under the pass lock no line can arrive meanwhile; the new
    content replaces it atomically (posix-rename over SSH) with a new generation token in
    its header, so that peers notice and read it again. Returns the sizes before and after,
    or None when there was nothing to compact or the file is not as we left it.
    `codec` (issue 12) is the remote's: an encrypted file is compacted as its plain records
    and written back encrypted under the current key.

    `local`: the memory's local file. Its records that the hub holds (in any replica's
    file) are weighed with ours, and only our file's lines are written back: an entry of
    ours whose tombstone sits in another replica's hub file goes from ours too, while the
    local file still holds that tombstone (issue 24, residual (b)). Kept, it outlived the
    tombstone, and a replica that read our file from the start (a lost state directory,
    a new machine) brought it back to life. Only what the hub holds weighs: a local record
    not pushed yet (or withheld, a secret) must not empty our file of what it replaces."""
    codec = codec if codec is not None else PlainCodec(remote, memory)
    at = now_us() if now is None else now
    own = replica + ".jsonl"
    with pass_lock(state_dir, memory, remote):
        state = SyncState.load(state_dir.sync_state(memory, remote))
        size = transport.size(memory, own)
        if not size and not state.own_size and local is not None:
            _weighed(state, state_dir, memory, remote, at)  # no file of ours: nothing in it
        if not size or size != state.own_size:
            return None  # unknown to us: the next pass checks it first
        blocks: list[bytes] = []
        done = 0
        while done < size:  # a list joined once: `data += block` is quadratic in the size
            block = transport.read(memory, own, done, min(READ_BYTES, size - done))
            if not block:
                break
            blocks.append(block)
            done += len(block)
        data = b"".join(blocks)
        tail = base64.b64decode(state.own_tail)
        if not data.endswith(tail):
            return None
        lines, _ = split_complete(data, at_start=True)
        lines = codec.plain_lines(lines)  # issue 12: compacted as records, not ciphertext
        where = f"{remote}:{memory}/{own}"  # how messages name a hub file (rule 2's error)
        survey = Survey()
        survey.fold(lines, source=where)
        if local is not None:
            _fold_held(survey, local, state_dir.hub_index(memory, remote))
        acked = acknowledged_lines(survey, at, horizon, acknowledged)
        plan = plan_compaction(survey, now=at, horizon=horizon, acknowledged=acked)
        bad = plan.account(lines, source=where)
        # Whether our file holds a record the plan drops for good (not a copy of one kept).
        killed = bool(set(plan.dropped) - {"header", "blank", "duplicate"})
        if bad:
            # Only we write this file, and only whole valid records: a bad line here is the
            # rest of a write cut short, whose record was pushed again whole. Keep them.
            if local is not None and not killed:  # it holds nothing the local file deletes
                _weighed(state, state_dir, memory, remote, at)
            return None
        generation = _random.token_hex(8)
        ours = set(lines)
        new = codec.header(at, generation, install_token(state_dir)) + b"".join(
            codec.encode_line(r.raw) + b"\n" for r in plan.keep if r.raw in ours
        )
        if len(new) >= size:
            if local is not None and not killed:  # it holds nothing the local file deletes
                _weighed(state, state_dir, memory, remote, at)
            if not isinstance(transport, Fragments) or not transport.fragmented(memory, own):
                return None
            # Nothing to drop, but many small S3 segments: the same bytes as one segment.
            # Peers keep their offsets (same header token, same bytes before them).
            save_replace_intent(state_dir, memory, remote, data)
            transport.replace(memory, own, data)
            replace_done(state_dir, memory, remote)
            return size, size
        # Crash-safe by construction (issue 24): a kill or a lost reply after the replace,
        # before the state below is saved, leaves a file the next pass knows is ours.
        save_replace_intent(state_dir, memory, remote, new)
        transport.replace(memory, own, new)
        state.own_size, state.own_tail = len(new), b64(new[-HUB_TAIL_BYTES:])
        state.own_generation = generation
        state.save(state_dir.sync_state(memory, remote))
        if local is not None:
            _weighed(state, state_dir, memory, remote, at)
        replace_done(state_dir, memory, remote)
        return size, len(new)


def _fold_held(survey: Survey, local: Path, hub_index: Path) -> None:
    """Fold into `survey` the records of `local` that the hub holds (as pushed: without a
    CRLF line's "\\r"), a chunk at a time. A missing local file adds nothing."""
    with DigestStore(hub_index) as store:
        try:
            for chunk in read_chunks(local):
                held = [raw[:-1] if raw.endswith(b"\r") else raw for raw in chunk.lines]
                known = store.intersection([line_digest(raw) for raw in held])
                survey.fold((raw for raw in held if line_digest(raw) in known), source=str(local))
        except FileNotFoundError:
            return


def _weighed(state: SyncState, state_dir: StateDir, memory: str, remote: str, at: int) -> None:
    """Record that our own hub file, as it is, was compacted against the local file at
    `at`: the local file's tombstones seen by then may go (`_check`)."""
    state.own_compacted_at = at
    state.weighed = {peer + ".jsonl": [p.offset, p.generation] for peer, p in state.peers.items()}
    state.save(state_dir.sync_state(memory, remote))
