"""A hub file's mode, plain or encrypted under a key (issue 12), as its header says it, and
the change of mode or key of this machine's own hub file.

`header_identity` reads the mode of a hub file: `PLAIN`, or the id of the key it is
encrypted under. `prepare_own_file` runs at the start of every pass (through the codec's
`prepare`): when encryption was turned on or off for a remote, or its key rotated or
imported, our own hub file is rewritten in one atomic replace as the codec now writes, with
a new generation token so that peers read it again, and the pass forgets what it knew of
the hub, as after a lost state directory: a full re-read in which every header is checked
again. Nothing is lost or duplicated by it. A small marker in the state directory says what
our own hub file was last written with, so that the steady state costs no read.

Apart from `memsync.hub.codec` (how each mode reads and writes lines) because it is the
one step that rewrites a hub file outside a push, with its own crash-safety (issue 24).
"""

from __future__ import annotations

import json
import secrets as _random
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from memsync.core.lines import without_bom
from memsync.errors import HubKeyMismatch, KeyFileError
from memsync.hub.crypto import SCHEME, LineCipher
from memsync.hub.keys import load_keyring
from memsync.hub.state import SyncState, install_token, replace_done, save_replace_intent
from memsync.hub.transports import Transport
from memsync.local.fresh import now_us
from memsync.local.logs import get_logger
from memsync.local.statedir import StateDir
from memsync.local.storage import atomic_replace

__all__ = [
    "HEAD",
    "PLAIN",
    "Adoption",
    "HubWriter",
    "header_identity",
    "header_identity_or_unknown",
    "key_fix",
    "prepare_own_file",
]

logger = get_logger("memsync.hub")

PLAIN = "plain"
"""The identity of a hub file that is not encrypted (an encrypted one's is its key id)."""

HEAD = b'{"format"'
"""How a header line starts (memsync writes its keys in this order)."""

_READ_BYTES = 1 << 20

Adoption = Callable[[list[bytes], list[bytes]], None]
"""A check of our own hub file's lines (as they are, and plain) before it is taken as ours."""


class HubWriter(Protocol):
    """What writes this machine's own hub file for one remote and memory: what
    `prepare_own_file` needs of a codec (`memsync.hub.codec.Codec`)."""

    @property
    def remote(self) -> str: ...

    @property
    def memory(self) -> str: ...

    @property
    def identity(self) -> str:
        """`PLAIN`, or the id of the key it writes under."""
        ...

    def header(self, now: int, generation: str, install: str | None = None) -> bytes:
        """The header line of a new or rewritten hub file of ours (with its "\\n")."""
        ...

    def encode_line(self, line: bytes) -> bytes:
        """The hub line of a plain line (neither with "\\n")."""
        ...


def header_identity(raw: bytes) -> str | None:
    """`plain` or the key id a header line names; None when `raw` is no header.

    Raises:
        HubKeyMismatch: the header names an encryption scheme this memsync does not know.
    """
    if not raw.startswith(HEAD):
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if type(obj) is not dict or "id" in obj or "format" not in obj:
        return None
    scheme, key = obj.get("encryption"), obj.get("key")
    if scheme is None:
        return PLAIN
    if scheme != SCHEME or type(key) is not str:
        raise HubKeyMismatch(
            f"encrypted with scheme {scheme!r}, which this memsync does not read (it reads "
            f"{SCHEME}); upgrade memsync here"
        )
    return key


def header_identity_or_unknown(raw: bytes) -> str | None:
    """`header_identity`, with an unknown scheme counted as a header too."""
    try:
        return header_identity(raw)
    except HubKeyMismatch:
        return "?"


def key_fix(remote: str) -> str:
    """The fix for a key this machine lacks, for one remote."""
    return (
        f"import the key from a machine that syncs with {remote} (`memsync key show` there, "
        "`memsync key import` here)"
    )


def prepare_own_file(
    writer: HubWriter,
    key_file: Path | None,
    t: Transport,
    memory: str,
    own: str,
    state: SyncState,
    state_dir: StateDir,
    adopt: Adoption | None = None,
) -> None:
    """At the start of a pass, under its lock: when our own hub file was last written
    with another identity than `writer`'s (or that is unknown), re-encode it in one
    replace and make `state` forget the hub (a full re-read); see the module docstring.
    `key_file` serves to read our own hub file back when it was written under a key.

    `adopt` is the pass's adoption check (issue 13, item 11): when the state knows
    nothing of our hub file (a fresh state directory), it is called with the file's
    lines and their plain form before anything is rewritten, and raises when the file
    is another installation's (issue 24: it ran only after the rewrite)."""
    # What our own hub file was last written with (`plain` or a key id): a cache
    # beside the pass's state, deleted with it.
    marker = state_dir.codec_marker(memory, writer.remote)
    try:
        last: str | None = marker.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        last = None
    if last == writer.identity or (last is None and writer.identity == PLAIN):
        return  # the steady state: no read, no write
    where = f"{writer.remote}:{memory}/{own}"
    size = t.size(memory, own) or 0
    if size:
        blocks: list[bytes] = []
        done = 0
        while done < size:  # a list, not bytes +=: that would copy the file per block
            block = t.read(memory, own, done, min(_READ_BYTES, size - done))
            if not block:
                break
            blocks.append(block)
            done += len(block)
        data = b"".join(blocks)
        lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
        try:
            found = header_identity(without_bom(lines[0])) if lines else None
        except HubKeyMismatch as exc:
            raise HubKeyMismatch(f"{where} is {exc}") from None
        current = found or PLAIN
        if current != writer.identity:
            if adopt is not None and state.own_size is None:
                reader = _reader(writer, key_file, current, where)
                plain = lines if reader is None else [reader.decrypt(r) or r for r in lines]
                adopt(lines, plain)
            new, dropped = _reencoded(
                writer, key_file, lines, current, where, install_token(state_dir)
            )
            save_replace_intent(state_dir, memory, writer.remote, new)  # issue 24
            t.replace(memory, own, new)
            logger.warning(
                "%s: rewritten %s (was %s)%s",
                where,
                "plain" if writer.identity == PLAIN else f"under key {writer.identity}",
                current,
                f"; {dropped} line(s) that did not decode left out" if dropped else "",
            )
    # Forget the hub, as after a lost state directory: pull re-reads every file from
    # its header (each checked against the new mode) and re-learns what the hub holds.
    state.own_size, state.own_tail, state.own_generation = None, "", None
    state.pushed, state.peers = None, {}
    state.save(state_dir.sync_state(memory, writer.remote))
    replace_done(state_dir, memory, writer.remote)
    atomic_replace(state_dir.prepared(marker), (writer.identity + "\n").encode())


def _reencoded(
    writer: HubWriter,
    key_file: Path | None,
    lines: list[bytes],
    current: str,
    where: str,
    install: str,
) -> tuple[bytes, int]:
    """Our own hub file's `lines` (written as `current`), written as `writer` writes."""
    reader = _reader(writer, key_file, current, where)
    out = [writer.header(now_us(), _random.token_hex(8), install)]
    dropped = 0
    for raw in lines:
        if not raw.strip() or header_identity_or_unknown(raw) is not None:
            continue
        plain = raw if reader is None else reader.decrypt(raw)
        if plain is None:
            # Only we write this file, whole lines: this is the rest of a write cut
            # short, whose record was pushed again whole.
            dropped += 1
            continue
        out.append(writer.encode_line(plain) + b"\n")
    return b"".join(out), dropped


def _reader(
    writer: HubWriter, key_file: Path | None, identity: str, where: str
) -> LineCipher | None:
    """What decrypts our own hub file written as `identity` (None: it is plain)."""
    if identity == PLAIN:
        return None
    if key_file is not None:
        try:
            ring = load_keyring(key_file)
        except KeyFileError:
            ring = None
        if ring is not None:
            for key in ring.keys:
                cipher = LineCipher(key, writer.memory)
                if cipher.key_id == identity:
                    return cipher
    raise HubKeyMismatch(
        f"{where} (this machine's own hub file) is encrypted with key {identity}, which "
        f"this machine does not hold, so it cannot be rewritten plain; {key_fix(writer.remote)}"
    )
