"""Convergence receipts in a hub (issue 21; DESIGN.md "The hub", receipts): publishing
ours at the end of a pass, and reading the peers'.

Our receipt for a memory is `<memory>/<replica>.receipt.json` in each hub it syncs with,
written with the transport's atomic `replace` (a reader sees the old receipt or the new
one). Its name is neither a replica file nor a watermark file: no pass, of this memsync or
an earlier one, reads it as records (tests/hub/test_receipts_old_release.py runs the
previous release against a hub holding receipts).

When: at the end of a pass that changed something (records merged or pushed, hub files
read further, our hub file grown), else when the last one is older than
`RECEIPT_EVERY` (the time in it says the replica is alive).

What it costs: the view digest, its buckets and the prompt block need the view. The fold
resumes from the file's persistent view (issue 20), so it costs what was appended since;
the digest and buckets are sums of the record hashes that view keeps for each id (no line
is read or hashed for them, only the versions folded since are hashed), and `unpushed`
reads every live line and asks the hub digest store about it (one SQLite lookup per
batch): that part is still O(view). A pass that publishes nothing costs nothing more.

On an encrypted hub (`encrypt = true`) the whole receipt is sealed with the hub key
(AES-SIV, associated data naming the memory and "receipt", so a receipt is never taken
for a hub line nor moved to another memory): outside, only the replica id (already the
file's name) and the key id can be read. Bucket digests are sums of hashes of whole
records, so they are sealed too: without the key, nothing in a receipt tells ids or texts.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memsync.core.names import valid_replica
from memsync.core.receipts import (
    FORMAT,
    RECEIPT_SUFFIX,
    Position,
    Receipt,
    ViewSummary,
    parse_receipt,
    prompt_digest,
)
from memsync.core.scan import line_digest
from memsync.core.timestamps import SECOND
from memsync.core.version import __version__
from memsync.errors import MemsyncError
from memsync.hub._pass import HUB_FILE_SUFFIX, PassContext
from memsync.hub.codec import Codec, EncryptedCodec
from memsync.hub.crypto import LineCipher
from memsync.hub.transports import RemoteFile, Transport
from memsync.local.fileindex import DigestStore
from memsync.local.located import located_view
from memsync.local.reading import no_gc, prompt_of
from memsync.local.statedir import StateDir
from memsync.local.storage import atomic_replace
from memsync.local.viewstore import ViewStore

__all__ = [
    "PROMPT_CHARS",
    "RECEIPT_EVERY",
    "ReceiptState",
    "local_receipt",
    "publish_receipt",
    "read_receipt",
    "receipt_state",
    "refresh",
    "seal",
    "unseal",
]

RECEIPT_EVERY = 5 * 60 * SECOND
"""A pass that changed nothing publishes a receipt only when the last is older than this."""

PROMPT_CHARS = 20_000
"""The prompt block a receipt names is the one agents are shown at the start of a task:
the MCP server's, for the default scope, at its default bound (`mcp_server.DEFAULT_MAX_CHARS`;
a test keeps the two equal). Bounded, it is also cheap: only the entries it keeps are
decoded whole."""

_LOOKUP_BATCH = 10_000


@dataclass
class ReceiptState:
    """What this machine remembers of the receipts in one hub, for one memory (a cache in
    the state directory: lost, the next pass publishes and reads them again)."""

    published_at: int | None = None
    positions: str = ""  # the read and own positions of the last receipt, as JSON
    own: dict[str, Any] | None = None  # our last receipt, as published
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Peers' receipts as last read: replica -> {stamp: [size, mtime, generation], receipt
    (its JSON, or None: unreadable)}."""
    files: dict[str, int] = field(default_factory=dict)
    """The hub's replica files and their sizes at the last listing."""
    listed_at: int | None = None
    local_stamp: list[int] | None = None
    """The local file as our last receipt saw it: device, inode, size, modification time."""

    @classmethod
    def load(cls, path: Path) -> ReceiptState:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            return cls(**doc)
        except (FileNotFoundError, ValueError, TypeError):
            return cls()

    def save(self, path: Path) -> None:
        atomic_replace(path, json.dumps(asdict(self)).encode())

    def receipts(self, me: str) -> dict[str, Receipt | None]:
        """Every receipt known, ours (`me`) included; None: one that could not be read."""
        out: dict[str, Receipt | None] = {}
        for name, cached in self.peers.items():
            doc = cached.get("receipt")
            out[name] = None if doc is None else parse_receipt(name, json.dumps(doc).encode())
        if self.own is not None:
            out[me] = parse_receipt(me, json.dumps(self.own).encode())
        return out


def refresh(
    t: Transport,
    codec: Codec,
    memory: str,
    rs: ReceiptState,
    listing: list[RemoteFile],
    me: str,
    now: int,
    *,
    force: bool = False,
) -> None:
    """Take in a listing of the hub's memory folder: the replica files' sizes, and the
    peers' receipts that changed since they were last read (one small read each; a receipt
    that cannot be read now keeps what was read before); with `force`, every receipt.

    "Changed" is a new size, modification time or generation. An SFTP server (or a file
    system) that gives times in whole seconds shows a receipt replaced twice in a second at
    the same size as unchanged: with `force` (each time we publish ours, so at least every
    `RECEIPT_EVERY`, and for `memsync status`) such receipts are read again, which bounds
    how long a stale copy is kept. An S3 hub's generations and a local file system's
    nanoseconds need no such read."""
    rs.files = {
        f.name: f.size
        for f in listing
        if f.name.endswith(HUB_FILE_SUFFIX) and valid_replica(f.name[: -len(HUB_FILE_SUFFIX)])
    }
    rs.listed_at = now
    seen = set()
    for f in listing:
        replica = f.name[: -len(RECEIPT_SUFFIX)]
        if not f.name.endswith(RECEIPT_SUFFIX) or not valid_replica(replica) or replica == me:
            continue
        seen.add(replica)
        cached = rs.peers.get(replica)
        stamp = [f.size, f.mtime, f.generation]
        if cached is not None and cached.get("stamp") == stamp and not (force and _coarse(f)):
            continue
        try:
            receipt = read_receipt(t, codec, memory, f)
        except MemsyncError:
            continue  # read again next time
        doc = None if receipt is None else receipt.to_json()
        rs.peers[replica] = {"stamp": stamp, "receipt": doc}
    for gone in set(rs.peers) - seen:
        del rs.peers[gone]


def _coarse(f: RemoteFile) -> bool:
    """Whether `f`'s listing may not show a replace: no generation, a whole-second time."""
    return f.generation is None and float(f.mtime).is_integer()


def _receipt_ad(memory: str) -> str:
    # A memory name has no space: this never names a memory, so a sealed receipt never
    # authenticates as a hub line (associated data: the format and the memory name).
    return f"{memory} receipt"


def seal(codec: Codec, memory: str, replica: str, data: bytes) -> bytes:
    """The bytes to publish for receipt `data`: as they are on a plain hub, sealed under the
    hub's current key on an encrypted one."""
    if not isinstance(codec, EncryptedCodec):
        return data
    cipher = LineCipher(codec.keys[0], _receipt_ad(memory))
    sealed = cipher.encrypt(data)
    doc = {"format": FORMAT, "replica": replica, "key": cipher.key_id, "sealed": sealed.decode()}
    return json.dumps(doc, separators=(",", ":")).encode()


def unseal(codec: Codec, memory: str, data: bytes) -> bytes | None:
    """A receipt's JSON from what a hub holds, or None: sealed under no key this machine
    holds (or altered), or plain where this machine encrypts (a hub must not mix)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return None
    if not isinstance(doc, dict):
        return None
    sealed = doc.get("sealed")
    if not isinstance(codec, EncryptedCodec):
        return None if sealed is not None else data
    if not isinstance(sealed, str):
        return None
    for key in codec.keys:
        plain = LineCipher(key, _receipt_ad(memory)).decrypt(sealed.encode())
        if plain is not None:
            return plain
    return None


def read_receipt(t: Transport, codec: Codec, memory: str, f: RemoteFile) -> Receipt | None:
    """The receipt in hub file `f` (`<replica>.receipt.json`), or None when it is none."""
    replica = f.name[: -len(RECEIPT_SUFFIX)]
    data = t.read(memory, f.name, 0, min(f.size, 1 << 20))
    plain = unseal(codec, memory, data)
    return None if plain is None else parse_receipt(replica, plain)


def local_receipt(
    local: Path,
    replica: str,
    now: int,
    hub: DigestStore | None,
    read: dict[str, Position],
    own: Position | None,
    store: ViewStore | None = None,
) -> Receipt:
    """This replica's receipt for memory file `local` at `now`: the view of the file, from
    its persistent view in `store` when valid (issue 20: only the bytes appended since are
    folded), its digests summed from the record hashes that view keeps, its live lines
    read for `unpushed` and the prompt block (see the module docstring for the cost); `hub` (the digests of what the hub holds)
    counts the live entries it lacks."""
    summary = ViewSummary()
    unpushed = 0
    block = ""
    if local.exists():
        with no_gc(), located_view([local], now, store, hashes=True) as view:
            # The persistent view keeps each version's record hash (issue 21): the digest
            # and the buckets sum them and read no line (a view without a store hashes
            # its lines).
            for rec, h in zip(view.records, view.hashes(), strict=True):
                summary.add_hashed(rec.id, h, rec.expires)
            if hub is not None:
                batch: list[int] = []
                for raw in view.lines():
                    batch.append(line_digest(raw.rstrip(b"\r")))
                    if len(batch) >= _LOOKUP_BATCH:
                        unpushed += len(batch) - len(hub.intersection(batch))
                        batch = []
                if batch:
                    unpushed += len(batch) - len(hub.intersection(batch))
            block = prompt_of(view.records, None, PROMPT_CHARS, view.lines(), markdown=True)
    return Receipt(
        replica=replica,
        time=now,
        version=__version__,
        view=summary,
        prompt=prompt_digest(block),
        read=read,
        own=own,
        unpushed=unpushed,
    )


def _positions(p: PassContext) -> tuple[dict[str, Position], Position | None]:
    read = {
        peer + HUB_FILE_SUFFIX: (ps.offset, ps.generation) for peer, ps in p.state.peers.items()
    }
    own_size = p.state.own_size
    own = None if own_size is None else (own_size, p.state.own_generation)
    return read, own


def _state_path(state_dir: StateDir, memory: str, remote: str) -> Path:
    return state_dir.prepared(state_dir.receipts(memory, remote))


def publish_receipt(p: PassContext) -> bool:
    """At the end of pass `p` (pushes done, state saved): take in the peers' receipts of
    the pass's listing, then publish ours when the pass changed something or the last is
    older than `RECEIPT_EVERY`. True when published."""
    path = _state_path(p.state_dir, p.memory, p.remote)
    rs = ReceiptState.load(path)
    listing = p.listing
    read, own = _positions(p)
    positions = json.dumps({"read": read, "own": own}, sort_keys=True)
    changed = (
        p.report.pulled_records > 0
        or p.report.pushed_records > 0
        or positions != rs.positions
        or rs.published_at is None
        or rs.own is None
        or not 0 <= p.now - rs.published_at < RECEIPT_EVERY
    )
    refresh(p.t, p.codec, p.memory, rs, listing, p.replica, p.now, force=changed)
    if changed:
        stamp = _local_stamp(p.local)
        receipt = _unchanged(rs, p, stamp, read, own)
        if receipt is None:
            store = ViewStore(p.state_dir)
            receipt = local_receipt(p.local, p.replica, p.now, p.hub, read, own, store)
        rs.local_stamp = stamp
        data = seal(p.codec, p.memory, p.replica, receipt.encode())
        p.t.replace(p.memory, p.replica + RECEIPT_SUFFIX, data)
        rs.published_at, rs.positions, rs.own = p.now, positions, receipt.to_json()
        own_size = own[0] if own is not None else None
        if own_size is not None:
            rs.files[p.own] = max(rs.files.get(p.own, 0), own_size)  # pushed after listing
    rs.save(path)
    return changed


def _local_stamp(local: Path) -> list[int] | None:
    """The local file's identity and state: device, inode, size, modification time."""
    try:
        st = os.stat(local)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _unchanged(
    rs: ReceiptState,
    p: PassContext,
    stamp: list[int] | None,
    read: dict[str, Position],
    own: Position | None,
) -> Receipt | None:
    """Our last receipt brought to `p.now`, when its view still holds: the local file has
    not changed since (same inode, size and time), the pass merged and pushed nothing, and
    no entry has expired since (rule 11). Then the periodic receipt of a quiet machine
    costs no fold. None: compute it again."""
    if stamp is None or rs.local_stamp != stamp or rs.own is None:
        return None
    if p.report.pulled_records or p.report.pushed_records:
        return None
    last = parse_receipt(p.replica, json.dumps(rs.own).encode())
    if last is None or last.version != __version__:
        return None  # another memsync may build another view: fold again
    if last.view.valid_until is not None and last.view.valid_until <= p.now:
        return None
    last.time, last.read, last.own = p.now, read, own
    return last


def receipt_state(state_dir: StateDir, memory: str, remote: str) -> ReceiptState:
    """The receipts of a memory's hub as the last pass left them (a cache)."""
    return ReceiptState.load(state_dir.receipts(memory, remote))
