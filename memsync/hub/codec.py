"""How a sync pass turns local lines into hub lines and back (issue 12: hub encryption).

A pass (memsync.sync) works on two kinds of bytes: the hub's (offsets, tails, sizes,
generation tokens: all about the bytes in the hub files) and the records' (merging, the
digests of what the hub holds, which push compares local lines with and compaction's
acknowledgement looks tombstones up in). A codec is the one place where they meet:

- `PlainCodec`: hub lines are the records' lines (memsync's behaviour before issue 12). It
  still refuses, loudly, a hub file that is encrypted.
- `EncryptedCodec` (`encrypt = true`): every line but the header is AES-SIV ciphertext
  (memsync.hub.crypto). Deterministic, so that dedup, exact-offset appends, tail checks,
  idempotent retries and hub compaction work unchanged over ciphertext: offsets stay hub
  offsets, digests stay the digests of the plain records.
- `FailingCodec`: a remote whose codec could not be made (no key file): every pass of it
  fails with that one message; the other remotes go on.

Checks made before anything is merged or pushed (a pass reads every file before merging):
a hub file read from its first line must be in the pass's mode (plain with plain, encrypted
with encrypted) and, when encrypted, under a key this machine holds; otherwise the pass
fails with one line naming the remote, the file, both key ids and the fix. A line that
fails authentication is a bad line: reported with file and line, never merged or spread.

Changes of mode or key (turning `encrypt` on or off, `memsync key rotate`, importing a key)
are noticed at the start of a pass through a small marker in the state directory (what our
own hub file was last written with): our own hub file is then re-encoded in one atomic
replace (as hub compaction does, with a new generation token so that peers read it again),
and the pass forgets what it knew of the hub, as after a lost state directory: a full
re-read in which every header is checked again. Nothing is lost or duplicated by it.
"""

from __future__ import annotations

import json
import logging
import secrets as _random
from collections.abc import Callable, Iterator
from pathlib import Path

from memsync.core.lines import without_bom
from memsync.errors import HubKeyMismatch, KeyFileError
from memsync.hub.crypto import SCHEME, LineCipher
from memsync.hub.keys import Keyring, load_keyring
from memsync.hub.state import SyncState, install_token, replace_done, save_replace_intent
from memsync.hub.transports import Transport
from memsync.local.fresh import header_line, now_us
from memsync.local.statedir import StateDir
from memsync.local.storage import atomic_replace

__all__ = [
    "PLAIN",
    "BadDict",
    "EncryptedCodec",
    "FailingCodec",
    "HubKeyMismatch",
    "PlainCodec",
    "header_identity",
]

logger = logging.getLogger("memsync.hub")

PLAIN = "plain"
"""The identity of a hub file that is not encrypted (an encrypted one's is its key id)."""

_READ_BYTES = 1 << 20
_HEAD = b'{"format"'

BadDict = dict[str, object]
Adoption = Callable[[list[bytes], list[bytes]], None]
"""A check of our own hub file's lines (as they are, and plain) before it is taken as ours."""
Chunk = tuple[str, int, list[bytes]]


def header_identity(raw: bytes) -> str | None:
    """`plain` or the key id a header line names; None when `raw` is no header.

    Raises:
        HubKeyMismatch: the header names an encryption scheme this memsync does not know.
    """
    if not raw.startswith(_HEAD):
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


def _fix(remote: str) -> str:
    return (
        f"import the key from a machine that syncs with {remote} (`memsync key show` there, "
        "`memsync key import` here)"
    )


class PlainCodec:
    """Hub lines are the local lines. `key_file` serves only to read our own hub file
    back when encryption was turned off for this remote."""

    identity = PLAIN

    def __init__(self, remote: str, memory: str, key_file: Path | None = None) -> None:
        self.remote, self.memory, self.key_file = remote, memory, key_file

    # Writing

    def header(self, now: int, generation: str, install: str | None = None) -> bytes:
        """The header line of a new or rewritten hub file of ours; `install` is this
        installation's token (`memsync.hub.state.install_token`)."""
        return header_line(now, generation, install)

    def encode_line(self, line: bytes) -> bytes:
        """The hub line of a plain line (neither with "\\n")."""
        return line

    def chunks(
        self, header: bytes, data: bytes, limit: int
    ) -> Iterator[tuple[bytes, list[bytes] | None]]:
        """The hub bytes for `header` (a hub line, or b"") and `data` (whole plain lines),
        in chunks of at most `limit` bytes split on line boundaries (a longer line alone),
        each with the plain lines it holds (None: they are its lines as they are)."""
        data = header + data
        start = 0
        while start < len(data):
            end = data.rfind(b"\n", start, start + limit) + 1
            if end <= start:
                end = data.index(b"\n", start) + 1
            yield data[start:end], None
            start = end

    # Reading

    def plain_lines(self, lines: list[bytes]) -> list[bytes]:
        """The plain form of hub lines where there is one; others (a header, a line that
        does not authenticate) as they are."""
        return lines

    def unauthenticated(self, lines: list[bytes]) -> list[int]:
        """The indexes of the hub `lines` that do not authenticate under this machine's
        keys (a plain hub has no such lines; a header or a blank line is none)."""
        return []

    def decode(
        self, where: str, first_line: int, lines: list[bytes], bad: list[BadDict]
    ) -> list[Chunk]:
        """The chunks to merge for `lines` of the hub file `where` from line `first_line`;
        lines that do not authenticate go to `bad` instead.

        Raises:
            HubKeyMismatch: read from its first line, the file is not in this pass's mode
                or is under a key this machine does not hold (nothing has been merged).
        """
        if first_line == 1 and lines:
            try:
                found = header_identity(lines[0])
            except HubKeyMismatch as exc:
                raise HubKeyMismatch(f"{where} is {exc}") from None
            if found not in (None, PLAIN):
                raise HubKeyMismatch(
                    f"{where} is encrypted with key {found}, but encrypt is off for "
                    f"{self.remote} on this machine; set encrypt = true for that remote "
                    f"and {_fix(self.remote)}"
                )
        return [(where, first_line, lines)]

    def _reader(self, identity: str, where: str) -> LineCipher | None:
        """What decrypts our own hub file written as `identity` (None: it is plain)."""
        if identity == PLAIN:
            return None
        if self.key_file is not None:
            try:
                ring = load_keyring(self.key_file)
            except KeyFileError:
                ring = None
            if ring is not None:
                for key in ring.keys:
                    cipher = LineCipher(key, self.memory)
                    if cipher.key_id == identity:
                        return cipher
        raise HubKeyMismatch(
            f"{where} (this machine's own hub file) is encrypted with key {identity}, which "
            f"this machine does not hold, so it cannot be rewritten plain; {_fix(self.remote)}"
        )

    # Changes of mode or key

    def prepare(
        self,
        t: Transport,
        memory: str,
        own: str,
        state: SyncState,
        state_dir: StateDir,
        adopt: Adoption | None = None,
    ) -> None:
        """At the start of a pass, under its lock: when our own hub file was last written
        with another identity (or that is unknown), re-encode it in one replace and make
        `state` forget the hub (a full re-read); see the module docstring.

        `adopt` is the pass's adoption check (issue 13, item 11): when the state knows
        nothing of our hub file (a fresh state directory), it is called with the file's
        lines and their plain form before anything is rewritten, and raises when the file
        is another installation's (issue 24: it ran only after the rewrite)."""
        # What our own hub file was last written with (`plain` or a key id): a cache
        # beside the pass's state, deleted with it.
        marker = state_dir.codec_marker(memory, self.remote)
        try:
            last: str | None = marker.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            last = None
        if last == self.identity or (last is None and self.identity == PLAIN):
            return  # the steady state: no read, no write
        where = f"{self.remote}:{memory}/{own}"
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
            if current != self.identity:
                if adopt is not None and state.own_size is None:
                    reader = self._reader(current, where)
                    plain = lines if reader is None else [reader.decrypt(r) or r for r in lines]
                    adopt(lines, plain)
                new, dropped = self._reencoded(lines, current, where, install_token(state_dir))
                save_replace_intent(state_dir, memory, self.remote, new)  # issue 24
                t.replace(memory, own, new)
                logger.warning(
                    "%s: rewritten %s (was %s)%s",
                    where,
                    "plain" if self.identity == PLAIN else f"under key {self.identity}",
                    current,
                    f"; {dropped} line(s) that did not decode left out" if dropped else "",
                )
        # Forget the hub, as after a lost state directory: pull re-reads every file from
        # its header (each checked against the new mode) and re-learns what the hub holds.
        state.own_size, state.own_tail, state.own_generation = None, "", None
        state.pushed, state.peers = None, {}
        state.save(state_dir.sync_state(memory, self.remote))
        replace_done(state_dir, memory, self.remote)
        atomic_replace(state_dir.prepared(marker), (self.identity + "\n").encode())

    def _reencoded(
        self, lines: list[bytes], current: str, where: str, install: str
    ) -> tuple[bytes, int]:
        """Our own hub file's `lines` (written as `current`), written as this codec writes."""
        reader = self._reader(current, where)
        out = [self.header(now_us(), _random.token_hex(8), install)]
        dropped = 0
        for raw in lines:
            if not raw.strip() or _header_identity_or_unknown(raw) is not None:
                continue
            plain = raw if reader is None else reader.decrypt(raw)
            if plain is None:
                # Only we write this file, whole lines: this is the rest of a write cut
                # short, whose record was pushed again whole.
                dropped += 1
                continue
            out.append(self.encode_line(plain) + b"\n")
        return b"".join(out), dropped


def _header_identity_or_unknown(raw: bytes) -> str | None:
    """`header_identity`, with an unknown scheme counted as a header too."""
    try:
        return header_identity(raw)
    except HubKeyMismatch:
        return "?"


class EncryptedCodec(PlainCodec):
    """Hub lines are AES-SIV ciphertext under the keyring's current key; every key of the
    keyring reads (the current one first)."""

    def __init__(self, remote: str, memory: str, ring: Keyring) -> None:
        super().__init__(remote, memory, ring.path)
        self.keys = ring.keys  # the first writes; all read (also receipts: memsync.hub.receipts)
        self.ciphers = [LineCipher(key, memory) for key in ring.keys]
        self.writer = self.ciphers[0]
        self.identity = self.writer.key_id
        self._by_id = {c.key_id: c for c in self.ciphers}

    def header(self, now: int, generation: str, install: str | None = None) -> bytes:
        obj = json.loads(header_line(now, generation, install))
        obj |= {"encryption": SCHEME, "key": self.identity}
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    def encode_line(self, line: bytes) -> bytes:
        return self.writer.encrypt(line)

    def chunks(
        self, header: bytes, data: bytes, limit: int
    ) -> Iterator[tuple[bytes, list[bytes] | None]]:
        out: list[bytes] = []
        plain: list[bytes] = []
        size = 0
        if header:
            out, plain, size = [header], [header[:-1]], len(header)
        encrypt = self.writer.encrypt
        for raw in data.split(b"\n")[:-1]:
            line = encrypt(raw) + b"\n"
            if out and size + len(line) > limit:
                yield b"".join(out), plain
                out, plain, size = [], [], 0
            out.append(line)
            plain.append(raw)
            size += len(line)
        if out:
            yield b"".join(out), plain

    def _decrypt(self, raw: bytes) -> bytes | None:
        for cipher in self.ciphers:
            plain = cipher.decrypt(raw)
            if plain is not None:
                return plain
        return None

    def plain_lines(self, lines: list[bytes]) -> list[bytes]:
        out = []
        for raw in lines:
            plain = None if raw.startswith(_HEAD) else self._decrypt(raw)
            out.append(raw if plain is None else plain)
        return out

    def unauthenticated(self, lines: list[bytes]) -> list[int]:
        return [
            i
            for i, raw in enumerate(lines)
            if raw.strip()
            and not (raw.startswith(_HEAD) and _header_identity_or_unknown(raw))
            and self._decrypt(raw) is None
        ]

    def decode(
        self, where: str, first_line: int, lines: list[bytes], bad: list[BadDict]
    ) -> list[Chunk]:
        if first_line == 1 and lines:
            self._check_header(where, lines[0])
        chunks: list[Chunk] = []
        run: list[bytes] = []
        start = first_line
        for n, raw in enumerate(lines, first_line):
            if not raw.strip() or (raw.startswith(_HEAD) and _header_identity_or_unknown(raw)):
                run.append(raw)  # a blank line or a header: nothing to decrypt or merge
                continue
            plain = self._decrypt(raw)
            if plain is not None:
                run.append(plain)
                continue
            bad.append(
                {
                    "file": where,
                    "line": n,
                    "reason": "does not authenticate (altered in the hub, or encrypted "
                    "under a key this machine does not hold)",
                }
            )
            if run:
                chunks.append((where, start, run))
            run, start = [], n + 1
        if run:
            chunks.append((where, start, run))
        return chunks

    def _check_header(self, where: str, first: bytes) -> None:
        try:
            found = header_identity(first)
        except HubKeyMismatch as exc:
            raise HubKeyMismatch(f"{where} is {exc}") from None
        if found is None or found == PLAIN:
            raise HubKeyMismatch(
                f"{where} is not encrypted, but this machine encrypts for {self.remote} "
                f"(key {self.identity}); a hub must not mix plain and encrypted files. On "
                f"the machine that writes that file, set encrypt = true for {self.remote} "
                f"and {_fix(self.remote)}; then sync here again"
            )
        if found not in self._by_id:
            raise HubKeyMismatch(
                f"{where} is encrypted with key {found}, this machine has "
                f"{', '.join(self._by_id)}; {_fix(self.remote)}"
            )


class FailingCodec(PlainCodec):
    """The codec of a remote that cannot be synced as configured: every pass fails."""

    def __init__(self, remote: str, memory: str, message: str) -> None:
        super().__init__(remote, memory)
        self.message = message

    def prepare(
        self,
        t: Transport,
        memory: str,
        own: str,
        state: SyncState,
        state_dir: StateDir,
        adopt: Adoption | None = None,
    ) -> None:
        raise KeyFileError(self.message)
