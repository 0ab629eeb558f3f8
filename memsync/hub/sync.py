"""One synchronization pass of a memory with a hub: pull, merge, push (DESIGN.md "The hub").

The hub holds one append-only file per replica, `<remote>/<memory>/<replica>.jsonl`; each
replica writes only its own. A pass:

1. **pull**: read each peer file from where it was read last time, after checking that the
   bytes just before that offset are still what was read there and that its header's
   generation token is the same (a file rewritten by its owner's compaction, shorter, equal
   or longer, is read again from the start: dedup makes that harmless); merge the lines
   into the local file (SEMANTICS rule 14). Bad lines are reported, never merged.
2. **push**: append to our own hub file the valid local records the hub does not hold. We
   are its only writer, so the SFTP append flag is not trusted: check the size, the
   tail and the header's generation token, terminate a torn last line, write at that exact offset in chunks split on line
   boundaries, check the size again. Bytes we did not write mean two machines share a
   replica id: stop pushing there and say so.
3. publish a small watermark file saying how far this replica has read each peer's file
   (compaction drops a tombstone only when every replica has read past it).

State (offsets, tails, the digests of what the hub holds) is a cache in the state
directory: deleting it costs a full re-read, never a lost or duplicated record.

Hub lines go through the remote's codec (memsync.hub.codec, issue 12): as they are, or
encrypted with `encrypt = true`. Offsets, tails and generation tokens are about hub bytes;
merging and the digests of what the hub holds are about the plain records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from memsync.core.lines import Header, LineSplitter, SourceLines, classify
from memsync.core.names import valid_replica
from memsync.core.scan import line_digest
from memsync.core.watermarks import (
    WATERMARK_SUFFIX,
    covers,
    marks_of,
    parse_watermarks,
    snapshot_of,
)
from memsync.errors import MemsyncError, TransportError, UnreadableHubFile, UnsupportedFormat
from memsync.hub._pass import (
    HUB_FILE_SUFFIX,
    HUB_TAIL_BYTES,
    MAX_PEER_BYTES,
    PUSH_CHUNK_BYTES,
    READ_BYTES,
    PassContext,
    SyncReport,
    b64,
    header_generation,
    tail_hash,
)
from memsync.hub.codec import Codec
from memsync.hub.push import clash, foreign_lines, publish_watermarks
from memsync.hub.push import push as push_ours
from memsync.hub.receipts import publish_receipt
from memsync.hub.state import (
    SNAPSHOTS,
    PeerState,
    pass_lock,
)
from memsync.hub.transports import RemoteFile, Transport
from memsync.local.drain import recover_after_crash
from memsync.local.fresh import now_us
from memsync.local.merge import merge_chunks
from memsync.local.statedir import StateDir, StateDirLike

__all__ = [
    "HUB_TAIL_BYTES",
    "MAX_PEER_BYTES",
    "PUSH_CHUNK_BYTES",
    "SyncReport",
    "b64",
    "pull",
    "snapshot",
    "sync_once",
]


PULL_BATCH_BYTES = 16 * 1024 * 1024
"""A pull merges the lines of a hub file in batches of about this many bytes: its memory
follows the batch, not the file (issue 14)."""


class _Skipped(Exception):
    """A peer file this memsync cannot read (a newer format): skipped, with the reason."""


def pull(ctx: PassContext) -> None:
    """Step 1 of a pass (module docstring): read each peer's file from where it was read
    last, check it, merge what is new into the local file; read the peers' watermarks."""
    ctx.pending, ctx.pending_bytes = [], 0  # lines read, not merged yet
    files = ctx.listing = ctx.t.list_files(ctx.memory)  # receipts read it (issue 21)
    if ctx.state.own_size is None:
        ctx.hub.clear()  # no record of what the hub holds: learn it again
    files = [f for f in files if _replica_of(f.name) is not None]  # no hidden files
    _refuse_case_twins(ctx, files)
    for f in files:
        if f.name.endswith(WATERMARK_SUFFIX) and f.name != ctx.replica + WATERMARK_SUFFIX:
            _readmarks_of(ctx, f)
        if not f.name.endswith(HUB_FILE_SUFFIX):
            continue
        if f.name == ctx.own:
            ctx.own_listed = f.generation
        if f.name == ctx.own and ctx.state.own_size is not None:
            continue  # we know what our own file holds
        if f.size > MAX_PEER_BYTES:
            raise TransportError(
                f"{ctx.where(f.name)}: {f.size} bytes, over the {MAX_PEER_BYTES} byte "
                "limit for a hub file; refusing to read it"
            )
        try:
            _pull_file(ctx, f)
        except _Skipped as skipped:
            # One peer in a newer format must not stop the others, nor our pushes
            # (issue 13, item 5): skip its file, say so, read it again next time.
            ctx.report.skipped.append(str(skipped))
        except UnreadableHubFile as exc:
            # The same for a peer's file the hub cannot give whole (issue 24, item 8: an
            # S3 file whose segments do not tile). Our own file is no peer's: it fails.
            if f.name == ctx.own:
                raise
            ctx.report.skipped.append(f"{exc}; the other files still sync")
    _merge_pending(ctx)
    known = {r for f in files if (r := _replica_of(f.name)) is not None}
    ctx.report.replicas = {
        name: None if (m := ctx.state.marks.get(name)) is None else m.get("updated_at")
        for name in sorted(known - {ctx.replica})
    }


def _refuse_case_twins(ctx: PassContext, files: list[RemoteFile]) -> None:
    """Refuse a hub holding a file of a replica whose id differs from ours only in
    case (issue 23, item 2): on a case-insensitive file system (macOS's APFS, an SMB
    share, an exFAT stick) `Laptop.jsonl` and `laptop.jsonl` are one file, which two
    machines would then write, one adopting the other's records as its own."""
    own = ctx.replica.casefold()
    for f in files:
        other = _replica_of(f.name)
        if other is not None and other != ctx.replica and other.casefold() == own:
            raise TransportError(
                f"{ctx.where(f.name)}: replica {other!r} differs from this machine's id "
                f"{ctx.replica!r} only in case, and on a case-insensitive file system "
                "(macOS, SMB, exFAT) they are one file; give one machine another "
                "replica id (replica = ... in its config)"
            )


def _pull_file(ctx: PassContext, f: RemoteFile) -> None:
    """Read one hub file from where it was read last, and queue its new lines for the
    merge, which runs whenever the queue holds `PULL_BATCH_BYTES` (memory bounded by
    the batch, issue 14) and at the end of the pull. Usually one merge takes every
    file's new lines: judged together, a record and the one that beats it arriving in
    two files are not appended apart (rule 14 would then repeat the winner)."""
    peer, where = f.name[: -len(HUB_FILE_SUFFIX)], ctx.where(f.name)
    own = f.name == ctx.own
    prior = ctx.state.peers.get(peer)
    state = _checked(ctx, f, prior)
    reread = prior is not None and prior.offset > 0 and state.offset == 0
    first_batch = True

    def consume(lines: list[bytes], first_line: int) -> None:
        nonlocal first_batch
        if first_batch:  # a header is only ever in the first batch
            first_batch = False
            refused = _unsupported(lines, where, first_line)
            if refused is not None and not own:
                raise _Skipped(refused)
            if own and first_line == 1:
                _check_adoption(ctx, lines, ctx.codec.plain_lines(lines))
        # issue 12: decrypted (checked: mode, key, authentication) before any merge
        decoded = ctx.codec.decode(where, first_line, lines, ctx.report.bad)
        _queue(ctx, _unseen(ctx, decoded) if reread else decoded)

    state = _read_new(ctx, f.name, f.size, state, consume)
    if own:
        ctx.own_read = state.offset
    else:
        ctx.report.peers += 1
        state.seen = (f.size, f.mtime)
        state.hub_generation = f.generation
        ctx.state.peers[peer] = state


def _queue(ctx: PassContext, chunks: list[SourceLines]) -> None:
    ctx.pending += chunks
    ctx.pending_bytes += sum(len(raw) + 1 for _, _, lines in chunks for raw in lines)
    if ctx.pending_bytes >= PULL_BATCH_BYTES:
        _merge_pending(ctx)


def _merge_pending(ctx: PassContext) -> None:
    """Merge the queued hub lines into the local file (rule 14), and record that the
    hub holds them."""
    chunks, ctx.pending, ctx.pending_bytes = ctx.pending, [], 0
    if not any(lines for _, _, lines in chunks):
        return
    result = merge_chunks(ctx.index, chunks, now=ctx.now)
    ctx.report.pulled_records += result.appended
    ctx.report.held = result.held  # every call offers the held ones again
    ctx.report.withheld += result.withheld
    ctx.report.bad += result.bad
    ctx.report.twins += len(result.twins)
    ctx.hub.add((line_digest(raw) for _, _, lines in chunks for raw in lines), ctx.now)


def _check_adoption(ctx: PassContext, lines: list[bytes], plain: list[bytes]) -> None:
    """Before a pass without saved state takes our replica id's hub file as ours (its
    `lines` from the start, and as `plain` lines) and merges it (issue 13, item 11).

    Ours for sure when its header carries our installation's token. Otherwise (a lost
    state directory, a file from an older memsync, or another machine's) the records
    tell: a machine that lost its state directory still has its records, bar those its
    own compaction dropped since; a second machine configured with the same replica id
    has none of them. So: stop, before anything is merged or appended, when the file
    holds records and not one of them is ours.
    """
    if not lines:
        return
    try:
        head = classify(lines[0])
    except MemsyncError:
        head = None
    if isinstance(head, Header) and head.install == ctx.install:
        return
    foreign, mine = foreign_lines(ctx, plain)
    if foreign and not mine:
        raise clash(
            ctx,
            f"{foreign} record(s) this machine never had, written by another memsync installation",
            stopped="Syncing with",
        )


def _unseen(ctx: PassContext, chunks: list[SourceLines]) -> list[SourceLines]:
    """A peer file read again from its start (rewritten by its owner's compaction, or
    a listing that went stale), less the lines this replica has met in the hub before.

    Those were merged when first read; what local compaction has dropped of them since
    was dead and acknowledged by every replica (rule 15), so merging it again would
    bring a deleted entry back: the owner's compaction keeps an entry whose tombstone
    sits in another replica's hub file. A known line becomes a blank line (rule 3), so
    the line numbers of bad lines stay right. (A replica that lost its state directory
    has no such record: DESIGN's recovery re-reads everything.)
    """
    out: list[SourceLines] = []
    for where, first, lines in chunks:
        digests = list(map(line_digest, lines))
        seen = ctx.hub.intersection(digests)
        if seen:
            lines = [b"" if d in seen else raw for raw, d in zip(lines, digests, strict=True)]
        out.append((where, first, lines))
    return out


def _checked(ctx: PassContext, f: RemoteFile, state: PeerState | None) -> PeerState:
    """The saved read position of a peer file, or a fresh one if the file is not what
    was read: shorter, other bytes before the offset, or another generation."""
    name, size = f.name, f.size
    ctx.last_tail = b""
    if state is None or state.offset == 0:
        return PeerState()
    if size < state.offset:
        return PeerState()
    if state.seen is not None and list(state.seen) == [size, f.mtime]:
        # Same size and modification time as when last checked: nothing to read and
        # nothing to check (the steady state costs nothing on the wire but a listing).
        return state
    if f.generation is not None and f.generation == state.hub_generation:
        # Only appended to since we read it (an S3 hub's segments are immutable): the
        # bytes before the offset are the ones read, and cost no request to check.
        return state
    begin = max(0, state.offset - (state.tail_len or HUB_TAIL_BYTES))
    tail = ctx.t.read(ctx.memory, name, begin, state.offset - begin)
    ctx.report.pulled_bytes += len(tail)
    if tail_hash(tail) != state.tail:
        return PeerState()
    ctx.last_tail = tail
    if begin > 0 and ctx.read_generation(name) != state.generation:
        return PeerState()
    return state


def _read_new(
    ctx: PassContext,
    name: str,
    size: int,
    state: PeerState,
    consume: Callable[[list[bytes], int], None],
) -> PeerState:
    """Hand the complete lines past `state.offset` to `consume` (lines, number of the
    first), in batches of about `PULL_BATCH_BYTES`; return the state after them.

    Streamed: a line over the limit of rule 4 (say 200 MB from a hostile peer) is kept
    cut, still a bad line to report, so time and memory follow the limit and the batch,
    not the line or the file (issue 13, item 4; issue 14)."""
    batch: list[bytes] = []
    batch_bytes = 0
    line_no = state.line
    splitter = LineSplitter(at_start=state.offset == 0)  # a BOM is no line (rule 1)
    offset = state.offset
    generation = state.generation
    recent = ctx.last_tail  # the last bytes read (or known) before `offset`
    tail = recent  # the last bytes before the end of the last complete line
    while offset < size:
        data = ctx.t.read(ctx.memory, name, offset, min(READ_BYTES, size - offset))
        if not data:
            break
        ctx.report.pulled_bytes += len(data)
        if offset == 0:
            generation, recent, tail = header_generation(data), b"", b""
        offset += len(data)
        block, _ = splitter.feed(data)
        if block:
            batch += block
            batch_bytes += len(data)
            cut = len(data) - splitter.pending
            tail = (recent + data[:cut])[-HUB_TAIL_BYTES:]
            if batch_bytes >= PULL_BATCH_BYTES:
                consume(batch, line_no)
                line_no += len(batch)
                batch, batch_bytes = [], 0
        recent = (recent + data)[-HUB_TAIL_BYTES:]
    if batch:
        consume(batch, line_no)
        line_no += len(batch)
    done = offset - splitter.pending
    if done == state.offset:
        return state
    # Not enough seen: read it, unless the hub vouches for the bytes before (S3): then
    # the bytes at hand (a whole line at least) will do for a later check.
    if len(tail) < min(HUB_TAIL_BYTES, done) and not (tail and state.hub_generation):
        begin = max(0, done - HUB_TAIL_BYTES)
        tail = ctx.t.read(ctx.memory, name, begin, done - begin)
        ctx.report.pulled_bytes += len(tail)
    return PeerState(done, line_no, tail_hash(tail), generation, tail_len=len(tail))


def _readmarks_of(ctx: PassContext, f: RemoteFile) -> None:
    """Read a peer's watermark file when it changed (untrusted: parsed defensively)."""
    replica = f.name[: -len(WATERMARK_SUFFIX)]
    cached = ctx.state.marks.get(replica)
    if cached is not None and cached.get("size") == f.size and cached.get("mtime") == f.mtime:
        return
    data = ctx.t.read(ctx.memory, f.name, 0, min(f.size, 1 << 20))
    marks = parse_watermarks(replica, data)
    ctx.state.marks[replica] = {
        "size": f.size,
        "mtime": f.mtime,
        "read": None if marks is None else {k: list(v) for k, v in marks.read.items()},
        "updated_at": None if marks is None else marks.updated_at,
        "weighed": None
        if marks is None or marks.weighed is None
        else {k: list(v) for k, v in marks.weighed.items()},
    }


def snapshot(ctx: PassContext) -> None:
    """Record how far every hub file has been read now (see `memsync.core.watermarks`), and which
    replicas have not read that far yet."""
    sizes = {
        peer + HUB_FILE_SUFFIX: [p.offset, p.generation] for peer, p in ctx.state.peers.items()
    }
    if ctx.state.own_size:
        sizes[ctx.own] = [ctx.state.own_size, ctx.state.own_generation]
    snaps = ctx.state.snapshots
    if not snaps or snaps[-1]["sizes"] != sizes:
        snaps.append({"time": ctx.now, "sizes": sizes})
        del snaps[:-SNAPSHOTS]
    latest = snapshot_of(snaps[-1])
    ctx.report.holding_back = sorted(
        name
        for name in ctx.report.replicas
        if (m := marks_of(name, ctx.state.marks.get(name))) is None or not covers(m, latest)
    )


def _message(exc: MemsyncError | OSError, local: Path) -> str:
    """A pass's error in one line; an OSError that is not memsync's own (a transport's
    errors are OSErrors too, and name their remote) is the local file's or the state
    directory's, and names its file."""
    if isinstance(exc, MemsyncError):
        return str(exc)
    return f"{exc.filename or local}: {exc.strerror or exc}"


def _unsupported(lines: list[bytes], where: str, first_line: int) -> str | None:
    """Why a hub file's lines cannot be read (a header naming a format other than
    agent-memory/0.x, rule 2), or None. Only lines holding `"format"` are classified
    (a search in C, no copy): a header may put its keys in any order."""
    for n, raw in enumerate(lines, first_line):
        if raw.find(b'"format"') >= 0:
            try:
                classify(raw, source=where, line_no=n)
            except UnsupportedFormat as exc:
                return f"{exc}; this file is skipped until memsync is upgraded here"
    return None


def _replica_of(name: str) -> str | None:
    """The replica a hub file belongs to (`<replica>.jsonl` or its watermark file), or None
    for any other file, a hidden one (`._laptop.jsonl`) or a name no replica can have."""
    for suffix in (HUB_FILE_SUFFIX, WATERMARK_SUFFIX):
        if name.endswith(suffix):
            replica = name[: -len(suffix)]
            return replica if valid_replica(replica) else None
    return None


def sync_once(
    *,
    memory: str,
    local: Path,
    remote: str,
    transport: Transport,
    replica: str,
    state_dir: StateDirLike,
    now: int | None = None,
    push: bool = True,
    codec: Codec | None = None,
) -> SyncReport:
    """One pass of pull, merge and push for one memory and one remote.

    `state_dir` is this machine's state directory (a `StateDir` or its path): what the
    pass remembers of the hub, kept between passes.

    Never raises for a remote's failure: the report's `error` says what went wrong (the
    pull's progress is kept; the push is not attempted after a failed pull).
    """
    started = time.monotonic()
    state = StateDir.of(state_dir)
    try:
        recover_after_crash(local)  # lines a killed compaction left aside (rule 16)
        p = PassContext(  # opens the state directory's indexes: a full disk fails here
            memory=memory,
            local=local,
            remote=remote,
            transport=transport,
            replica=replica,
            state_dir=state,
            now=now_us() if now is None else now,
            codec=codec,
        )
    except (MemsyncError, OSError) as exc:
        report = SyncReport(memory, remote, error=_message(exc, local))
        report.seconds = round(time.monotonic() - started, 4)
        return report
    try:
        with pass_lock(state, memory, remote):
            p.load_state()  # as saved by whoever held the lock last (a hub compaction)
            # issue 12: a change of mode or key rewrites our hub file, but only once the
            # adoption check says it is ours (issue 24)
            adopt: Callable[[list[bytes], list[bytes]], None] = partial(_check_adoption, p)
            p.codec.prepare(p.t, memory, p.own, p.state, state, adopt)
            pull(p)
            p.state.save(p.state_path)
            if push:
                push_ours(p)  # `push` is this function's flag
                publish_watermarks(p)
            snapshot(p)
            p.state.save(p.state_path)
            if push:
                publish_receipt(p)  # issue 21: after the state is saved, never before
    except (MemsyncError, OSError) as exc:
        p.report.error = _message(exc, local)
    finally:
        p.close()
        p.report.seconds = round(time.monotonic() - started, 4)
    return p.report
