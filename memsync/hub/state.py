"""What a machine remembers of its passes with a hub, in its state directory: its replica
id, and per memory and remote how far each peer's file was read, what our own hub file
holds, and the peers' watermarks. A cache: deleting it costs a full re-read, never a lost
or duplicated record (DESIGN.md)."""

from __future__ import annotations

import hashlib
import json
import secrets as _random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memsync.core.names import valid_replica, windows_problem
from memsync.core.watermarks import MarksDoc, Position, SnapshotDoc
from memsync.errors import LockTimeout, MemsyncError
from memsync.local.lock import held
from memsync.local.statedir import StateDir
from memsync.local.storage import atomic_replace, private_dirs

__all__ = [
    "PeerState",
    "ReplaceIntent",
    "SyncState",
    "install_token",
    "matching_intent",
    "pass_lock",
    "replace_done",
    "replace_intents",
    "resolve_replica",
    "retired",
    "save_replace_intent",
    "set_retired",
]

SNAPSHOTS = 64
"""How many snapshots (see `memsync.core.watermarks`) a state keeps."""


def _hostname_id(hostname: str | None = None) -> str:
    """A new replica id: the host name, made a valid name, and a random suffix; prefixed
    when Windows could not hold it as a file name (`aux.local-1a2b3c`, issue 23)."""
    host = "".join(
        c if c.isascii() and (c.isalnum() or c in "._-") else "-"
        for c in (socket.gethostname() if hostname is None else hostname)
    )
    new = f"{host.strip('.-')[:32] or 'replica'}-{_random.token_hex(3)}"
    return new if windows_problem(new) is None else f"host-{new}"


def resolve_replica(configured: str | None, state_dir: StateDir) -> str:
    """This machine's replica id: the configured one, else the one kept in the state
    directory, else a new one (host name plus a random suffix), saved there."""
    if configured:
        return configured
    path = state_dir.replica_id
    try:
        saved = path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        pass
    else:
        if valid_replica(saved):
            return saved
        # Loudly (issue 13, item 20): a new random id would make this machine another
        # replica in every hub, and leave its old file holding tombstones back for good.
        raise MemsyncError(
            f"{path}: {saved[:80]!r} is not a replica id; write this machine's id there "
            "(1 to 64 of A-Z a-z 0-9 . _ -), or delete the file to have a new one made"
        )
    new = _hostname_id()
    atomic_replace(state_dir.prepared(path), (new + "\n").encode())
    return new


def install_token(state_dir: StateDir) -> str:
    """This installation's token, kept in the state directory (made on first use).

    Written in the header of every hub file this machine writes (issue 13, item 11): a
    machine that finds its replica id's hub file under another token, with records it
    never had, knows another machine writes it (two machines configured with one id)
    before it merges or appends anything. A state directory lost and made again gets a
    new token; the records then tell (see `memsync.hub.sync`).
    """
    path = state_dir.install_token
    try:
        saved = path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        saved = ""
    if len(saved) == 16 and all(c in "0123456789abcdef" for c in saved):
        return saved
    new = _random.token_hex(8)  # missing or damaged: only a hint, so a new one will do
    atomic_replace(state_dir.prepared(path), (new + "\n").encode())
    return new


@dataclass
class PeerState:
    offset: int = 0
    line: int = 1
    tail: str = ""  # hex hash of the HUB_TAIL_BYTES before offset
    generation: str | None = None
    seen: tuple[int, float] | list[float] | None = None  # (size, mtime) when last checked
    hub_generation: str | None = None  # RemoteFile.generation when last read (S3)
    tail_len: int | None = None  # bytes `tail` hashes (None: HUB_TAIL_BYTES, or fewer at 0)


@dataclass
class SyncState:
    own_size: int | None = None  # our hub file's size as we last left it (None: unknown)
    own_tail: str = ""  # base64 of its last HUB_TAIL_BYTES, to check and to extend the hash
    own_generation: str | None = None
    own_hub_generation: str | None = None  # RemoteFile.generation of our file, as checked
    pushed: dict[str, Any] | None = None  # the local file's cursor pushed through
    peers: dict[str, PeerState] = field(default_factory=dict)
    watermarks: str = ""  # the last watermark document published
    snapshots: list[SnapshotDoc] = field(default_factory=list)  # see memsync.core.watermarks
    marks: dict[str, MarksDoc] = field(default_factory=dict)  # peers' watermarks
    replica: str | None = None  # the replica id, so the file, the own_* fields are about
    # When our own hub file was last compacted against the local file (None: not since
    # this state was made): the local file's tombstones seen before may go (issue 24).
    own_compacted_at: int | None = None
    # How far every peer's file was read (merged) at that compaction: published in our
    # watermarks as "weighed" (`memsync.core.watermarks.Watermarks.weighed`).
    weighed: dict[str, Position] | None = None

    @classmethod
    def load(cls, path: Path) -> SyncState:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            peers = {k: PeerState(**v) for k, v in doc.pop("peers", {}).items()}
            return cls(peers=peers, **doc)
        except (FileNotFoundError, ValueError, TypeError):
            return cls()  # a missing or unreadable cache: start over (a full re-read)

    def save(self, path: Path) -> None:
        private_dirs(path.parent)
        atomic_replace(path, json.dumps(asdict(self), indent=1).encode())


@contextmanager
def pass_lock(state_dir: StateDir, memory: str, remote: str) -> Iterator[None]:
    """One pass at a time for a memory and a remote, across processes (the daemon and a
    `memsync sync` run at once must not both write our hub file)."""
    path = state_dir.prepared(state_dir.sync_lock(memory, remote))
    busy = f"{path}: another memsync process is syncing {memory} with {remote}"
    with held(path, 60, lambda: LockTimeout(busy)):
        yield


def retired(state_dir: StateDir) -> set[str]:
    """Replicas this machine was told to forget (`memsync forget-replica`)."""
    try:
        names = json.loads(state_dir.retired.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return set()
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def set_retired(state_dir: StateDir, names: set[str]) -> None:
    """Record the replicas to forget (`memsync forget-replica`, and `--undo`)."""
    atomic_replace(state_dir.prepared(state_dir.retired), json.dumps(sorted(names)).encode())


# Replaces of our own hub file (issue 24, "the wedge")

_INTENTS_KEPT = 8


@dataclass(frozen=True)
class ReplaceIntent:
    """What a replace of our own hub file leaves there: its size and the SHA-256 of its
    bytes. Saved before the replace (hub compaction, a change of key or mode), forgotten
    once the pass's state records the new file."""

    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> ReplaceIntent:
        return cls(len(data), hashlib.sha256(data).hexdigest())


def replace_intents(state_dir: StateDir, memory: str, remote: str) -> list[ReplaceIntent]:
    """The replaces of our own hub file begun and not yet recorded, newest first."""
    try:
        doc = json.loads(state_dir.replace_intents(memory, remote).read_text(encoding="utf-8"))
        return [ReplaceIntent(int(d["size"]), str(d["sha256"])) for d in doc][::-1]
    except (FileNotFoundError, ValueError, TypeError, KeyError):
        return []


def save_replace_intent(state_dir: StateDir, memory: str, remote: str, data: bytes) -> None:
    """Record, durably, that our own hub file is about to become `data`: a crash (or a lost
    reply) after the replace and before the state is saved then leaves a file that is known
    to be ours, whatever the local file holds by the next pass. Call it under the pass lock,
    before the replace."""
    kept = replace_intents(state_dir, memory, remote)[::-1][-(_INTENTS_KEPT - 1) :]
    doc = [asdict(i) for i in [*kept, ReplaceIntent.of(data)]]
    path = state_dir.prepared(state_dir.replace_intents(memory, remote))
    atomic_replace(path, json.dumps(doc).encode())


def replace_done(state_dir: StateDir, memory: str, remote: str) -> None:
    """The pass's state now records our hub file as it is: the intents are spent. Call it
    only after that state is saved."""
    state_dir.replace_intents(memory, remote).unlink(missing_ok=True)


def matching_intent(intents: list[ReplaceIntent], data: bytes) -> ReplaceIntent | None:
    """The intent whose bytes `data` (our hub file, read whole) begins with, or None: then
    no replace of ours wrote it. Longer than the intent: appended to since (checked apart)."""
    for intent in intents:
        if intent.size <= len(data) and ReplaceIntent.of(data[: intent.size]) == intent:
            return intent
    return None
