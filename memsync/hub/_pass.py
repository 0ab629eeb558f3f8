"""What a sync pass holds (`memsync.hub.sync`): its settings, its saved state, the digests
of what the hub holds, the local file's index, its report; and the sizes it works in.

The pass is functions of one `PassContext`, by direction (issue 19, item 4: no class
chain): `memsync.hub.sync.pull` reads the peers' files, `memsync.hub.push.push` writes our
own hub file, and `memsync.hub.sync.sync_once` makes the context and runs them in turn.
"""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import xxhash

from memsync.core.lines import Header, SourceLines, classify, without_bom
from memsync.core.records import Record
from memsync.errors import MemsyncError
from memsync.hub.codec import Codec, PlainCodec
from memsync.hub.state import SyncState, install_token
from memsync.hub.transports import RemoteFile, Transport
from memsync.local.fileindex import DigestStore, FileIndex
from memsync.local.statedir import StateDir

__all__ = [
    "HUB_FILE_SUFFIX",
    "HUB_TAIL_BYTES",
    "MAX_PEER_BYTES",
    "OWN_CHECK_BYTES",
    "PUSH_CHUNK_BYTES",
    "READ_BYTES",
    "PassContext",
    "SyncReport",
    "b64",
    "header_generation",
    "is_record_line",
    "tail_hash",
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
# its size, which is checked first; this catches a rewrite, where the last line does, and
# the header's generation token a replace that kept the size and the last line.
OWN_CHECK_BYTES = 64
HUB_FILE_SUFFIX = ".jsonl"
"""A replica's hub file is `<replica>.jsonl` in the memory's folder."""


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
    error_kind: str | None = None
    """What kind of failure `error` is: `ReplicaClash.KIND` (another machine uses our
    replica id: pushes are stopped until the user acts), or None (one that may pass by
    itself)."""
    peers: int = 0
    held: list[dict[str, Any]] = field(default_factory=list)
    withheld: list[dict[str, Any]] = field(default_factory=list)
    """Records neither merged nor pushed because they look like they hold a credential
    (issue 13, item 6): where each is, its id and what it looks like."""
    bad: list[dict[str, Any]] = field(default_factory=list)
    twins: int = 0
    replicas: dict[str, int | None] = field(default_factory=dict)
    """Each other replica in the hub, and when its watermarks were last published."""
    holding_back: list[str] = field(default_factory=list)
    """Replicas that have not read everything this one has seen: tombstones stay."""
    skipped: list[str] = field(default_factory=list)
    """Peer files not read, and why (a format this memsync does not read, rule 2): the
    rest of the hub syncs on."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def tail_hash(data: bytes) -> str:
    """The hash of the bytes before a saved offset, checked before reading or writing on."""
    return xxhash.xxh3_64_hexdigest(data)


def header_generation(data: bytes) -> str | None:
    """The generation token of a file's header, from its first bytes (None: no header)."""
    first = without_bom(data.split(b"\n", 1)[0])  # rule 1
    try:
        parsed = classify(first)
    except MemsyncError:
        return None
    return parsed.generation if isinstance(parsed, Header) else None


class PassContext:
    """What one pass for one memory and one remote holds (see `memsync.hub.sync`): its
    settings, its saved state, the digests of what the hub holds, the local file's index,
    its report, and what the pull tells the push. `memsync.hub.sync.pull` and
    `memsync.hub.push.push` take it; `sync_once` makes it, runs them, and closes it."""

    def __init__(
        self,
        *,
        memory: str,
        local: Path,
        remote: str,
        transport: Transport,
        replica: str,
        state_dir: StateDir,
        now: int,
        codec: Codec | None = None,
    ) -> None:
        self.memory, self.local, self.remote = memory, local, remote
        # issue 12: hub lines <-> local lines (memsync.hub.codec); plain unless encrypt = true
        self.codec = codec if codec is not None else PlainCodec(remote, memory)
        self.t, self.replica, self.now = transport, replica, now
        self.state_dir = state_dir
        self.state_path = state_dir.sync_state(memory, remote)
        self.load_state()
        self.hub = DigestStore(state_dir.hub_index(memory, remote))
        self.index = FileIndex(local, state_dir.merge_index(local))
        self.own = replica + HUB_FILE_SUFFIX
        self.install = install_token(state_dir)  # written in our hub file's header
        self.report = SyncReport(memory, remote)
        self.last_tail = b""  # the last bytes read (or known) before the offset read from
        self.own_listed: str | None = None  # our file's generation in this pass's listing
        self.own_read = 0  # how far the pull read our own hub file (when it had to)
        self.listing: list[RemoteFile] = []  # the pull's listing of the hub (receipts read it)
        self.pending: list[SourceLines] = []  # lines the pull read, not merged yet
        self.pending_bytes = 0

    def load_state(self) -> None:
        """Read the saved state; call it again once the pass lock is held: a compaction of
        our hub file may have saved a new one while this pass waited for the lock (the
        daemon runs them in different workers), and the state read before would take our
        compacted file for another machine's (issue 24)."""
        self.state = SyncState.load(self.state_path)
        if self.state.replica != self.replica:
            # Another replica id than last time (the fix a clash message asks for): our hub
            # file is another file, and what we knew of the old one says nothing about it.
            st = self.state
            st.own_size, st.own_tail, st.own_generation, st.pushed = None, "", None, None
            st.own_hub_generation = None
            st.replica = self.replica

    def close(self) -> None:
        self.hub.close()
        self.index.close()

    def where(self, name: str = "") -> str:
        return f"{self.remote}:{self.memory}/{name}"

    # Pull

    def read_generation(self, name: str, *, count: bool = True) -> str | None:
        """The generation token in a hub file's header (`count`: as pulled bytes)."""
        head = self.t.read(self.memory, name, 0, _HEAD_BYTES)
        if b"\n" not in head and len(head) == _HEAD_BYTES:  # a long header: read it whole
            head = self.t.read(self.memory, name, 0, 64 * 1024)
        if count:
            self.report.pulled_bytes += len(head)
        return header_generation(head)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def is_record_line(raw: bytes) -> bool:
    """Whether a hub line is a record (not a header, a blank or a bad line)."""
    try:
        return type(classify(raw)) is Record
    except MemsyncError:  # a header of a format memsync does not read
        return False
