"""One synchronization pass of a memory with a hub: pull, merge, push (DESIGN.md "The hub").

The hub holds one append-only file per replica, `<remote>/<memory>/<replica>.jsonl`; each
replica writes only its own. A pass:

1. **pull**: read each peer file from where it was read last time, after checking that the
   bytes just before that offset are still what was read there and that its header's
   generation token is the same (a file rewritten by its owner's compaction, shorter, equal
   or longer, is read again from the start: dedup makes that harmless); merge the lines
   into the local file (SEMANTICS rule 14). Bad lines are reported, never merged.
2. **push**: append to our own hub file the valid local records the hub does not hold. We
   are its only writer, so the SFTP append flag is not trusted: check the size and the
   tail, terminate a torn last line, write at that exact offset in chunks split on line
   boundaries, check the size again. Bytes we did not write mean two machines share a
   replica id: stop pushing there and say so.
3. publish a small watermark file saying how far this replica has read each peer's file
   (compaction drops a tombstone only when every replica has read past it).

State (offsets, tails, the digests of what the hub holds) is a cache in the state
directory: deleting it costs a full re-read, never a lost or duplicated record.

Hub lines go through the remote's codec (memsync.hubcodec, issue 12): as they are, or
encrypted with `encrypt = true`. Offsets, tails and generation tokens are about hub bytes;
merging and the digests of what the hub holds are about the plain records.
"""

from __future__ import annotations

import base64
import json
import secrets as _random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from memsync.core.lines import Header, classify, split_complete
from memsync.core.merge import line_digest
from memsync.core.records import Record
from memsync.core.timestamps import format_ts
from memsync.core.watermarks import (
    WATERMARK_SUFFIX,
    covers,
    marks_of,
    parse_watermarks,
    snapshot_of,
)
from memsync.errors import MemsyncError, ReplicaClash, TransportError
from memsync.hub.codec import Chunk, PlainCodec
from memsync.hub.state import (
    SNAPSHOTS,
    PeerState,
    SyncState,
    hub_store_path,
    pass_lock,
    state_path,
)
from memsync.hub.transports import RemoteFile, Transport
from memsync.local.fileindex import Cursor, DigestStore, FileIndex, cursor_at, cursor_valid
from memsync.local.fresh import now_us
from memsync.local.merge import index_path, merge_chunks
from memsync.local.storage import read_chunks

__all__ = [
    "HUB_TAIL_BYTES",
    "MAX_PEER_BYTES",
    "PUSH_CHUNK_BYTES",
    "SyncReport",
    "b64",
    "sync_once",
]

MAX_PEER_BYTES = 1 << 30
"""A peer file larger than this is refused: a hub is untrusted input."""

PUSH_CHUNK_BYTES = 256 * 1024
"""Pushes are written in chunks of at most this size, split on line boundaries."""

READ_BYTES = 1 << 20

HUB_TAIL_BYTES = 1024
"""How many bytes before a saved offset in a hub file are checked before reading on (a
peer's file) or writing on (ours). Every pass reads them over the wire, so they are fewer
than for local files; a rewrite by compaction is caught by the generation token anyway."""

_HEAD_BYTES = 512  # enough for a header line: where the generation token is
# Our own file's last bytes, checked before each push: another writer appending changes
# its size, which is checked first; this catches a rewrite, where the last line does.
_OWN_CHECK_BYTES = 64
_SUFFIX = ".jsonl"


@dataclass
class SyncReport:
    """What one pass did for one memory and one remote."""

    memory: str
    remote: str
    pulled_records: int = 0
    pulled_bytes: int = 0
    pushed_records: int = 0
    pushed_bytes: int = 0
    seconds: float = 0.0
    error: str | None = None
    peers: int = 0
    held: list[dict[str, Any]] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)
    twins: int = 0
    replicas: dict[str, int | None] = field(default_factory=dict)
    """Each other replica in the hub, and when its watermarks were last published."""
    holding_back: list[str] = field(default_factory=list)
    """Replicas that have not read everything this one has seen: tombstones stay."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _hash(data: bytes) -> str:
    return xxhash.xxh3_64_hexdigest(data)


def _generation(data: bytes) -> str | None:
    """The generation token of a file's header, from its first bytes (None: no header)."""
    first = data.split(b"\n", 1)[0]
    try:
        parsed = classify(first)
    except MemsyncError:
        return None
    return parsed.generation if isinstance(parsed, Header) else None


class _Pass:
    """One pass for one memory and one remote (see the module docstring)."""

    def __init__(
        self,
        *,
        memory: str,
        local: Path,
        remote: str,
        transport: Transport,
        replica: str,
        state_dir: Path,
        now: int,
        codec: PlainCodec | None = None,
    ) -> None:
        self.memory, self.local, self.remote = memory, local, remote
        # issue 12: hub lines <-> local lines (memsync.hubcodec); plain unless encrypt = true
        self.codec = codec if codec is not None else PlainCodec(remote, memory)
        self.t, self.replica, self.now = transport, replica, now
        self.state_path = state_path(state_dir, memory, remote)
        self.state = SyncState.load(self.state_path)
        if self.state.replica != replica:
            # Another replica id than last time (the fix a clash message asks for): our hub
            # file is another file, and what we knew of the old one says nothing about it.
            st = self.state
            st.own_size, st.own_tail, st.own_generation, st.pushed = None, "", None, None
            st.own_hub_generation = None
            st.replica = replica
        self.hub = DigestStore(hub_store_path(state_dir, memory, remote))
        self.index = FileIndex(local, index_path(state_dir, local))
        self.own = replica + _SUFFIX
        self.report = SyncReport(memory, remote)
        self._last_tail = b""
        self._own_listed: str | None = None  # our file's generation in this pass's listing
        self._own_read = 0  # how far the pull read our own hub file (when it had to)

    def close(self) -> None:
        self.hub.close()
        self.index.close()

    def where(self, name: str = "") -> str:
        return f"{self.remote}:{self.memory}/{name}"

    # Pull

    def pull(self) -> None:
        files = self.t.list_files(self.memory)
        if self.state.own_size is None:
            self.hub.clear()  # no record of what the hub holds: learn it again
        merged: dict[str, PeerState] = {}
        chunks: list[tuple[str, int, list[bytes]]] = []
        for f in files:
            if f.name.endswith(WATERMARK_SUFFIX) and f.name != self.replica + WATERMARK_SUFFIX:
                self._readmarks_of(f)
            if not f.name.endswith(_SUFFIX) or f.name.startswith("."):
                continue
            peer = f.name[: -len(_SUFFIX)]
            if f.name == self.own:
                self._own_listed = f.generation
            if f.name == self.own and self.state.own_size is not None:
                continue  # we know what our own file holds
            if f.size > MAX_PEER_BYTES:
                raise TransportError(
                    f"{self.where(f.name)}: {f.size} bytes, over the {MAX_PEER_BYTES} byte "
                    "limit for a hub file; refusing to read it"
                )
            prior = self.state.peers.get(peer)
            state = self._checked(f, prior)
            reread = prior is not None and prior.offset > 0 and state.offset == 0
            lines, state = self._read_new(f.name, f.size, state)
            if f.name == self.own:
                self._own_read = state.offset
            self.report.peers += f.name != self.own
            if lines:
                # issue 12: decrypted (checked: mode, key, authentication) before any merge
                where = self.where(f.name)
                decoded = self.codec.decode(where, state.line - len(lines), lines, self.report.bad)
                chunks += self._unseen(decoded) if reread else decoded
            state.seen = (f.size, f.mtime)
            state.hub_generation = f.generation
            merged[peer] = state
        known = {f.name[: -len(_SUFFIX)] for f in files if f.name.endswith(_SUFFIX)}
        known |= {
            f.name[: -len(WATERMARK_SUFFIX)] for f in files if f.name.endswith(WATERMARK_SUFFIX)
        }
        self.report.replicas = {
            name: None if (m := self.state.marks.get(name)) is None else m.get("updated_at")
            for name in sorted(known - {self.replica})
        }
        if chunks:
            result = merge_chunks(self.index, chunks, now=self.now)
            self.report.pulled_records += result.appended
            self.report.held = result.held
            self.report.bad += result.bad
            self.report.twins = len(result.twins)
            self.hub.add((line_digest(raw) for _, _, lines in chunks for raw in lines), self.now)
        for peer, state in merged.items():
            if peer == self.replica:
                continue
            self.state.peers[peer] = state

    def _unseen(self, chunks: list[Chunk]) -> list[Chunk]:
        """A peer file read again from its start (rewritten by its owner's compaction, or
        a listing that went stale), less the lines this replica has met in the hub before.

        Those were merged when first read; what local compaction has dropped of them since
        was dead and acknowledged by every replica (rule 15), so merging it again would
        bring a deleted entry back: the owner's compaction keeps an entry whose tombstone
        sits in another replica's hub file. A known line becomes a blank line (rule 3), so
        the line numbers of bad lines stay right. (A replica that lost its state directory
        has no such record: DESIGN's recovery re-reads everything.)
        """
        out: list[Chunk] = []
        for where, first, lines in chunks:
            digests = list(map(line_digest, lines))
            seen = self.hub.intersection(digests)
            if seen:
                lines = [b"" if d in seen else raw for raw, d in zip(lines, digests, strict=True)]
            out.append((where, first, lines))
        return out

    def _checked(self, f: RemoteFile, state: PeerState | None) -> PeerState:
        """The saved read position of a peer file, or a fresh one if the file is not what
        was read: shorter, other bytes before the offset, or another generation."""
        name, size = f.name, f.size
        self._last_tail = b""
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
        tail = self.t.read(self.memory, name, begin, state.offset - begin)
        self.report.pulled_bytes += len(tail)
        if _hash(tail) != state.tail:
            return PeerState()
        self._last_tail = tail
        if begin > 0 and self._read_generation(name) != state.generation:
            return PeerState()
        return state

    def _read_generation(self, name: str) -> str | None:
        head = self.t.read(self.memory, name, 0, _HEAD_BYTES)
        if b"\n" not in head and len(head) == _HEAD_BYTES:  # a long header: read it whole
            head = self.t.read(self.memory, name, 0, 64 * 1024)
        self.report.pulled_bytes += len(head)
        return _generation(head)

    def _read_new(self, name: str, size: int, state: PeerState) -> tuple[list[bytes], PeerState]:
        """The complete lines past `state.offset`, and the state after them."""
        lines: list[bytes] = []
        offset, pending = state.offset, b""
        generation = state.generation
        window = self._last_tail  # the bytes just before `offset`, as far as known
        while offset < size:
            data = self.t.read(self.memory, name, offset, min(READ_BYTES, size - offset))
            if not data:
                break
            self.report.pulled_bytes += len(data)
            if offset == 0:
                generation, window = _generation(data), b""
            offset += len(data)
            block, end = split_complete(pending + data)
            lines += block
            pending = (pending + data)[end:]
            window = (window + data)[-(HUB_TAIL_BYTES + len(pending)) :]
        done = offset - len(pending)
        if done == state.offset:
            return [], state
        tail = window[: len(window) - len(pending)][-HUB_TAIL_BYTES:]
        # Not enough seen: read it, unless the hub vouches for the bytes before (S3): then
        # the bytes at hand (a whole line at least) will do for a later check.
        if len(tail) < min(HUB_TAIL_BYTES, done) and not (tail and state.hub_generation):
            begin = max(0, done - HUB_TAIL_BYTES)
            tail = self.t.read(self.memory, name, begin, done - begin)
            self.report.pulled_bytes += len(tail)
        return lines, PeerState(
            done, state.line + len(lines), _hash(tail), generation, tail_len=len(tail)
        )

    def _readmarks_of(self, f: RemoteFile) -> None:
        """Read a peer's watermark file when it changed (untrusted: parsed defensively)."""
        replica = f.name[: -len(WATERMARK_SUFFIX)]
        cached = self.state.marks.get(replica)
        if cached is not None and cached.get("size") == f.size and cached.get("mtime") == f.mtime:
            return
        data = self.t.read(self.memory, f.name, 0, min(f.size, 1 << 20))
        marks = parse_watermarks(replica, data)
        self.state.marks[replica] = {
            "size": f.size,
            "mtime": f.mtime,
            "read": None if marks is None else {k: list(v) for k, v in marks.read.items()},
            "updated_at": None if marks is None else marks.updated_at,
        }

    def snapshot(self) -> None:
        """Record how far every hub file has been read now (see `memsync.core.watermarks`), and which
        replicas have not read that far yet."""
        sizes = {peer + _SUFFIX: [p.offset, p.generation] for peer, p in self.state.peers.items()}
        if self.state.own_size:
            sizes[self.own] = [self.state.own_size, self.state.own_generation]
        snaps = self.state.snapshots
        if not snaps or snaps[-1]["sizes"] != sizes:
            snaps.append({"time": self.now, "sizes": sizes})
            del snaps[:-SNAPSHOTS]
        latest = snapshot_of(snaps[-1])
        self.report.holding_back = sorted(
            name
            for name in self.report.replicas
            if (m := marks_of(name, self.state.marks.get(name))) is None or not covers(m, latest)
        )

    # Push

    def push(self) -> None:
        size = self.t.size(self.memory, self.own) or 0
        expected = self._verified_size(size)
        if size > expected:
            # A torn last line, ours, from a write cut short: terminate it so that it stays
            # its own bad line (rule 1); its record is pushed again whole below.
            torn = self.t.read(self.memory, self.own, expected, size - expected)
            self.state.own_size, self.state.own_tail = (
                size,
                b64((base64.b64decode(self.state.own_tail) + torn)[-HUB_TAIL_BYTES:]),
            )
            expected = self._write(size, b"\n")
            # Now a complete line of the hub: when the cut fell just before its "\n" it is
            # a whole record, and pushing that record again would duplicate it.
            self.hub.add(map(line_digest, self.codec.plain_lines([torn])), self.now)  # issue 12
        data, count, cursor = self._outgoing()
        header = b""
        if data and expected == 0:
            gen = _random.token_hex(8)
            header = self.codec.header(self.now, gen)  # issue 12: names scheme and key id
            self.state.own_generation = gen
        # The codec encrypts (or not) and splits on line boundaries (issue 12); a transport
        # may ask for larger writes (S3: one object per write, so fewer).
        limit = int(getattr(self.t, "push_chunk_bytes", PUSH_CHUNK_BYTES))
        for chunk, plain in self.codec.chunks(header, data, limit):
            expected = self._write(expected, chunk, plain)
        self.report.pushed_records += count
        if cursor is not None:
            self.state.pushed = asdict(cursor) | {"tail": cursor.tail.hex()}

    def _verified_size(self, size: int) -> int:
        """Where our next write goes, after checking our hub file holds only our bytes."""
        st = self.state
        if st.own_size is None:
            # Nothing known (a new state directory): what is there is ours, and was read
            # by the pull like any peer file, up to the size its listing gave. A listing
            # can be older than the file (an attribute cache): the hub holds the rest too.
            st.own_size, st.own_tail = self._adopt(0, size)
            self._learn_own(self._own_read, st.own_size)
            return st.own_size
        if size == 0 and st.own_size > 0:
            raise TransportError(
                f"{self.where(self.own)}: our hub file is gone (it held {st.own_size} bytes): "
                "the hub is new or not mounted. Mount the share if it is not; if the hub "
                f"moved to a new empty folder, delete {self.state_path} to push everything "
                "again",
                None,
                self.where(self.own),
            )
        if size < st.own_size:
            return self._rewritten(size, f"it shrank from {st.own_size} to {size} bytes")
        tail = base64.b64decode(st.own_tail)
        check = tail[-_OWN_CHECK_BYTES:]
        begin = st.own_size - len(check)
        # An S3 hub's file in the generation we checked last time was only appended to.
        vouched = self._own_listed is not None and self._own_listed == st.own_hub_generation
        if check and not vouched and self.t.read(self.memory, self.own, begin, len(check)) != check:
            return self._rewritten(size, "its bytes before our last write changed")
        st.own_hub_generation = self._own_listed
        if size > st.own_size:
            # More than we know of: our own write whose answer was lost (every line is one
            # of our local records), or someone else's (a clash).
            extra = self.t.read(self.memory, self.own, st.own_size, size - st.own_size)
            lines, end = split_complete(extra)
            lines = self.codec.plain_lines(lines)  # issue 12: judged as records, not ciphertext
            # Only valid records tell whose bytes these are: a header is not one, nor is a
            # torn line of ours that a pass whose answer was lost terminated. A record went
            # out without the "\r" of a CRLF local line: either form is ours.
            records = [raw for raw in lines if _is_record(raw)]
            mine = self.index.intersection(
                [d for raw in records for d in (line_digest(raw), line_digest(raw + b"\r"))]
            )
            if any(
                line_digest(raw) not in mine and line_digest(raw + b"\r") not in mine
                for raw in records
            ):
                raise self._clash(f"{size - st.own_size} bytes appeared that we did not write")
            self.hub.add(map(line_digest, lines), self.now)
            st.own_size, st.own_tail = (
                st.own_size + end,
                b64((tail + extra[:end])[-HUB_TAIL_BYTES:]),
            )
        return st.own_size

    def _rewritten(self, size: int, what: str) -> int:
        """Our hub file is not as we left it. If every record in it is one of our local
        records, it is our own rewrite whose end we did not see (a crash or a lost reply
        right after the replace of its compaction, issue 13 item 9): take it as it is.
        Otherwise another machine writes it: a clash."""
        data = b""
        while len(data) < size:
            block = self.t.read(self.memory, self.own, len(data), min(READ_BYTES, size - len(data)))
            if not block:
                break
            data += block
        lines, _ = split_complete(data)
        lines = self.codec.plain_lines(lines)
        records = [raw for raw in lines if _is_record(raw)]
        mine = self.index.intersection(
            [d for raw in records for d in (line_digest(raw), line_digest(raw + b"\r"))]
        )
        if any(
            line_digest(raw) not in mine and line_digest(raw + b"\r") not in mine for raw in records
        ):
            raise self._clash(what)
        st = self.state
        st.own_size, st.own_tail = self._adopt(0, size)
        st.own_hub_generation = self._own_listed
        self.hub.add(map(line_digest, lines), self.now)
        return st.own_size

    def _learn_own(self, begin: int, end: int) -> None:
        """Record that the hub holds the complete lines of our file in [begin, end)."""
        pending = b""
        while begin < end:
            data = self.t.read(self.memory, self.own, begin, min(READ_BYTES, end - begin))
            if not data:
                break
            begin += len(data)
            lines, cut = split_complete(pending + data)
            # The store holds plain lines' digests (issue 12: decrypted when encrypted).
            self.hub.add(map(line_digest, self.codec.plain_lines(lines)), self.now)
            pending = (pending + data)[cut:]

    def _adopt(self, begin: int, size: int) -> tuple[int, str]:
        """Take our hub file as it is (complete lines); return its size and tail."""
        if size == 0:
            return 0, ""
        data = self.t.read(self.memory, self.own, max(0, size - HUB_TAIL_BYTES), HUB_TAIL_BYTES)
        end = data.rfind(b"\n") + 1
        cut = size - len(data) + end
        self.state.own_generation = self._read_generation(self.own)
        return cut, b64(data[:end][-HUB_TAIL_BYTES:])

    def _clash(self, what: str) -> ReplicaClash:
        return ReplicaClash(
            f"{self.where(self.own)}: our hub file holds bytes this machine did not write "
            f"({what}): another machine uses the replica id {self.replica!r} (a cloned VM or "
            "a copied home directory?). Give this machine a new id (a new id for the other "
            'one would not clear this): set replica = "<new name>" in its config, or delete '
            "the file 'replica' in its state directory; then sync again. Pushing to this "
            "remote is stopped until then."
        )

    def _write(self, offset: int, chunk: bytes, plain: list[bytes] | None = None) -> int:
        """Write whole lines at exactly `offset` of our hub file; record that they are
        ours and that the hub holds them (`plain`: their local lines, when they differ
        from the hub's) before anything else can fail."""
        new_size = self.t.write_at(self.memory, self.own, offset, chunk)
        if new_size != offset + len(chunk):
            raise TransportError(
                f"{self.where(self.own)}: wrote {len(chunk)} bytes at {offset} but the file "
                f"is {new_size} bytes; it will be checked again on the next pass"
            )
        lines = chunk.split(b"\n")[:-1] if plain is None else plain  # issue 12
        self.hub.add(map(line_digest, lines), self.now)
        tail = base64.b64decode(self.state.own_tail) + chunk
        self.state.own_size, self.state.own_tail = new_size, b64(tail[-HUB_TAIL_BYTES:])
        self.state.save(self.state_path)  # a crash now must not forget these bytes are ours
        self.report.pushed_bytes += len(chunk)
        return new_size

    def _outgoing(self) -> tuple[bytes, int, Cursor | None]:
        """The valid local records after the pushed cursor that the hub does not hold."""
        self.index.refresh()
        saved = self.state.pushed
        cursor = None
        if saved is not None:
            cursor = Cursor(
                saved["ino"], saved["offset"], saved["line"], bytes.fromhex(saved["tail"])
            )
            if not cursor_valid(self.local, cursor):
                cursor = None
        if not self.local.exists():
            return b"", 0, None
        offset, line = (cursor.offset, cursor.line) if cursor else (0, 1)
        out: list[bytes] = []
        seen: set[int] = set()
        for chunk in read_chunks(self.local, offset, line):
            # A CRLF line goes out without its "\r": judge that form against the hub.
            lines = [raw.rstrip(b"\r") if raw.endswith(b"\r") else raw for raw in chunk.lines]
            digests = list(map(line_digest, lines))
            known = self.hub.intersection(digests)
            for raw, digest in zip(lines, digests, strict=True):
                if digest in known or digest in seen:
                    continue
                if type(classify(raw)) is Record:  # bad lines never spread (rule 4)
                    seen.add(digest)
                    out.append(raw)
            offset, line = chunk.end, chunk.first_line + len(chunk.lines)
        data = b"".join(raw + b"\n" for raw in out)
        return data, len(out), cursor_at(self.local, offset, line)

    # Watermarks

    def publish_watermarks(self) -> None:
        doc = {
            "replica": self.replica,
            "read": {
                peer + _SUFFIX: {"offset": p.offset, "generation": p.generation}
                for peer, p in sorted(self.state.peers.items())
            },
        }
        text = json.dumps(doc, sort_keys=True)
        if text == self.state.watermarks:
            return
        doc["updated_at"] = format_ts(self.now)
        self.t.replace(self.memory, self.replica + WATERMARK_SUFFIX, json.dumps(doc).encode())
        self.state.watermarks = text


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _is_record(raw: bytes) -> bool:
    try:
        return type(classify(raw)) is Record
    except MemsyncError:  # a header of a format memsync does not read
        return False


def sync_once(
    *,
    memory: str,
    local: Path,
    remote: str,
    transport: Transport,
    replica: str,
    state_dir: Path,
    now: int | None = None,
    push: bool = True,
    codec: PlainCodec | None = None,
) -> SyncReport:
    """One pass of pull, merge and push for one memory and one remote.

    Never raises for a remote's failure: the report's `error` says what went wrong (the
    pull's progress is kept; the push is not attempted after a failed pull).
    """
    started = time.monotonic()
    p = _Pass(
        memory=memory,
        local=local,
        remote=remote,
        transport=transport,
        replica=replica,
        state_dir=state_dir,
        now=now_us() if now is None else now,
        codec=codec,
    )
    try:
        with pass_lock(state_dir, memory, remote):
            p.codec.prepare(p.t, memory, p.own, p.state, state_dir)  # issue 12: mode/key change
            p.pull()
            p.state.save(p.state_path)
            if push:
                p.push()
                p.publish_watermarks()
            p.snapshot()
            p.state.save(p.state_path)
    except MemsyncError as exc:
        p.report.error = str(exc)
    except OSError as exc:  # the local file or the state directory
        p.report.error = f"{exc.filename or local}: {exc.strerror or exc}"
    finally:
        p.close()
        p.report.seconds = round(time.monotonic() - started, 4)
    return p.report
