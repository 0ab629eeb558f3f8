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
re-encode our own hub file at the start of a pass: `memsync.hub.modes`, which also reads a
hub file's mode from its header.

The three codecs are siblings, not one another's subclasses: each is a `Codec` (the
Protocol below), so that an annotation `Codec` says "any mode" and `EncryptedCodec` says
"this one" (issue 19, item 5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from memsync.core.lines import SourceLines
from memsync.errors import HubKeyMismatch, KeyFileError
from memsync.hub.crypto import SCHEME, LineCipher
from memsync.hub.keys import Keyring
from memsync.hub.modes import (
    HEAD,
    PLAIN,
    Adoption,
    HubWriter,
    header_identity,
    header_identity_or_unknown,
    key_fix,
    prepare_own_file,
)
from memsync.hub.state import SyncState
from memsync.hub.transports import Transport
from memsync.local.fresh import header_line
from memsync.local.statedir import StateDir

__all__ = [
    "PLAIN",
    "BadDict",
    "Codec",
    "EncryptedCodec",
    "FailingCodec",
    "HubKeyMismatch",
    "PlainCodec",
    "header_identity",
]

BadDict = dict[str, object]
"""A bad line of a hub file as a pass reports it: file, line, reason."""


class Codec(HubWriter, Protocol):
    """How one remote's hub lines are written and read for one memory (module docstring):
    `PlainCodec`, `EncryptedCodec` or `FailingCodec`. Every method works on whole lines
    without their "\\n" unless it says otherwise."""

    def chunks(
        self, header: bytes, data: bytes, limit: int
    ) -> Iterator[tuple[bytes, list[bytes] | None]]:
        """The hub bytes for `header` (a hub line, or b"") and `data` (whole plain lines),
        in chunks of at most `limit` bytes split on line boundaries (a longer line alone),
        each with the plain lines it holds (None: they are its lines as they are)."""
        ...

    def plain_lines(self, lines: list[bytes]) -> list[bytes]:
        """The plain form of hub lines where there is one; others (a header, a line that
        does not authenticate) as they are."""
        ...

    def unauthenticated(self, lines: list[bytes]) -> list[int]:
        """The indexes of the hub `lines` that do not authenticate under this machine's
        keys (a header or a blank line is none)."""
        ...

    def decode(
        self, where: str, first_line: int, lines: list[bytes], bad: list[BadDict]
    ) -> list[SourceLines]:
        """The runs of plain lines to merge for `lines` of the hub file `where` from line
        `first_line`; lines that do not authenticate go to `bad` instead.

        Raises:
            HubKeyMismatch: read from its first line, the file is not in this pass's mode
                or is under a key this machine does not hold (nothing has been merged).
        """
        ...

    def prepare(
        self,
        t: Transport,
        memory: str,
        own: str,
        state: SyncState,
        state_dir: StateDir,
        adopt: Adoption | None = None,
    ) -> None:
        """At the start of a pass, under its lock: our own hub file re-encoded when it
        was last written in another mode or under another key
        (`memsync.hub.modes.prepare_own_file`, which says what `adopt` is).

        Raises:
            KeyFileError: the remote cannot be synced as configured (`FailingCodec`).
            HubKeyMismatch: our own hub file is under a key this machine lacks.
        """
        ...


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
    ) -> list[SourceLines]:
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
                    f"and {key_fix(self.remote)}"
                )
        return [(where, first_line, lines)]

    def prepare(
        self,
        t: Transport,
        memory: str,
        own: str,
        state: SyncState,
        state_dir: StateDir,
        adopt: Adoption | None = None,
    ) -> None:
        prepare_own_file(self, self.key_file, t, memory, own, state, state_dir, adopt)


class EncryptedCodec:
    """Hub lines are AES-SIV ciphertext under the keyring's current key; every key of the
    keyring reads (the current one first)."""

    def __init__(self, remote: str, memory: str, ring: Keyring) -> None:
        self.remote, self.memory, self.key_file = remote, memory, ring.path
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
            plain = None if raw.startswith(HEAD) else self._decrypt(raw)
            out.append(raw if plain is None else plain)
        return out

    def unauthenticated(self, lines: list[bytes]) -> list[int]:
        return [
            i
            for i, raw in enumerate(lines)
            if raw.strip()
            and not (raw.startswith(HEAD) and header_identity_or_unknown(raw))
            and self._decrypt(raw) is None
        ]

    def decode(
        self, where: str, first_line: int, lines: list[bytes], bad: list[BadDict]
    ) -> list[SourceLines]:
        if first_line == 1 and lines:
            self._check_header(where, lines[0])
        chunks: list[SourceLines] = []
        run: list[bytes] = []
        start = first_line
        for n, raw in enumerate(lines, first_line):
            if not raw.strip() or (raw.startswith(HEAD) and header_identity_or_unknown(raw)):
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

    def prepare(
        self,
        t: Transport,
        memory: str,
        own: str,
        state: SyncState,
        state_dir: StateDir,
        adopt: Adoption | None = None,
    ) -> None:
        prepare_own_file(self, self.key_file, t, memory, own, state, state_dir, adopt)

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
                f"and {key_fix(self.remote)}; then sync here again"
            )
        if found not in self._by_id:
            raise HubKeyMismatch(
                f"{where} is encrypted with key {found}, this machine has "
                f"{', '.join(self._by_id)}; {key_fix(self.remote)}"
            )


class FailingCodec:
    """The codec of a remote that cannot be synced as configured: every pass fails at its
    start (`prepare`) with `message`. Between passes (our own hub file's compaction) it
    reads and writes as `PlainCodec` does."""

    def __init__(self, remote: str, memory: str, message: str) -> None:
        self.remote, self.memory, self.message = remote, memory, message
        self._plain = PlainCodec(remote, memory)
        self.identity = self._plain.identity

    def header(self, now: int, generation: str, install: str | None = None) -> bytes:
        return self._plain.header(now, generation, install)

    def encode_line(self, line: bytes) -> bytes:
        return self._plain.encode_line(line)

    def chunks(
        self, header: bytes, data: bytes, limit: int
    ) -> Iterator[tuple[bytes, list[bytes] | None]]:
        return self._plain.chunks(header, data, limit)

    def plain_lines(self, lines: list[bytes]) -> list[bytes]:
        return self._plain.plain_lines(lines)

    def unauthenticated(self, lines: list[bytes]) -> list[int]:
        return self._plain.unauthenticated(lines)

    def decode(
        self, where: str, first_line: int, lines: list[bytes], bad: list[BadDict]
    ) -> list[SourceLines]:
        return self._plain.decode(where, first_line, lines, bad)

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
