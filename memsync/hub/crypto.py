"""End-to-end encryption of hub lines (issue 12): pure functions, bytes and keys in, bytes out.

A hub file written with `encrypt = true` is still a memory file: its header stays plain JSON
(so the generation token and the scheme are readable), and every other line is

    {"c":"<base64url, unpadded, of AES-SIV(padded line)>"}

**Deterministic** on purpose: AES-SIV (RFC 5297) needs no nonce, so the same record gives
the same hub line on every machine holding the key. Everything sync does with bytes keeps
working over ciphertext: byte-level dedup, exact-offset appends, tail checks, idempotent
retries after a lost answer, compaction of our own hub file. What it leaks: which lines are
equal (records are unique anyway), how many lines there are, and each line's length bucket.

- **Keys.** A 32-byte master key. The 64-byte AES-SIV key (AES-256-SIV) is derived from it
  with HKDF-SHA256 (no salt, info `memsync hub lines v1`), so the master key itself never
  touches a cipher and other uses can derive other keys later.
- **Associated data**: the format and the memory name, as two AD components
  (`agent-memory/0.1`, `<memory>`). A line copied into another memory's folder fails
  authentication. Not the replica file: the same record travels through every replica's
  file with the same bytes.
- **Padding** (before encryption): the line, then 0x80, then zero bytes (ISO/IEC 7816-4),
  up to the smallest bucket of 128 * 2**k or 192 * 2**k bytes (k >= 0) that fits. Two
  buckets per doubling: at most +50% (about +20% on typical records), and a line's length
  says only which of about 2 log2(n/128) classes it falls in.
- **Key id**: `k1.` + the first 8 bytes (hex) of HMAC-SHA256(master key, "memsync key id"):
  names the key in hub headers and messages; says nothing of the key.
- **Copy-safe form** of a key: `msk1-<base64url of the 32 bytes>` (what `memsync key show`
  prints and `memsync key import` takes).

`cryptography` (the PyCA package, already pulled in by paramiko) provides AES-SIV and HKDF;
it is imported only when a `LineCipher` is made (a remote with `encrypt = true`), so that
the key helpers here cost nothing to import.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

__all__ = [
    "FORMAT",
    "KEY_BYTES",
    "SCHEME",
    "LineCipher",
    "bucket",
    "format_key",
    "key_id",
    "pad",
    "parse_key",
    "unpad",
]

SCHEME = "aes-siv-256/1"
"""The value of `encryption` in an encrypted hub file's header."""

FORMAT = "agent-memory/0.1"
"""The first associated-data component of every line (the format the plaintext is in)."""

KEY_BYTES = 32
"""A master key's length."""

_KEY_PREFIX = "msk1-"
_KEY_FORM = re.compile(r"msk1-[A-Za-z0-9_-]{43}")
_HKDF_INFO = b"memsync hub lines v1"
_LINE_START = b'{"c":"'
_LINE_END = b'"}'


def key_id(master: bytes) -> str:
    """The key id named in hub headers and messages: a keyed hash, never the key."""
    return "k1." + hmac.new(master, b"memsync key id", hashlib.sha256).hexdigest()[:16]


def format_key(master: bytes) -> str:
    """The copy-safe text of a master key: `msk1-<base64url>` (43 characters, no padding)."""
    if len(master) != KEY_BYTES:
        raise ValueError(f"a key is {KEY_BYTES} bytes, not {len(master)}")
    return _KEY_PREFIX + base64.urlsafe_b64encode(master).rstrip(b"=").decode()


def parse_key(text: str) -> bytes | None:
    """The master key of a copy-safe text (surrounding spaces allowed), or None when the
    text is not one (no message: the caller says where it came from)."""
    text = text.strip()
    if not _KEY_FORM.fullmatch(text):
        return None
    raw = base64.urlsafe_b64decode(text[len(_KEY_PREFIX) :] + "=")
    return raw if len(raw) == KEY_BYTES else None


def bucket(n: int) -> int:
    """The padded length for `n` bytes (the line plus its 0x80 marker): the smallest
    128 * 2**k or 192 * 2**k that is at least `n`."""
    size = 128
    while True:
        if n <= size:
            return size
        if n <= size * 3 // 2:
            return size * 3 // 2
        size *= 2


def pad(line: bytes) -> bytes:
    """`line`, 0x80, then zeros up to its bucket (reversible whatever bytes `line` holds:
    its last byte may be anything, the marker is the last non-zero byte)."""
    n = len(line) + 1
    return line + b"\x80" + bytes(bucket(n) - n)


def unpad(padded: bytes) -> bytes | None:
    """The line inside `padded`, or None when it is not padded as `pad` does."""
    body = padded.rstrip(b"\x00")
    if not body.endswith(b"\x80") or len(padded) != bucket(len(body)):
        return None
    return body[:-1]


class LineCipher:
    """Encrypts and decrypts the lines of one memory's hub files with one master key.

    Contract: `encrypt` is deterministic (same key, memory and line, same output) and
    `decrypt(encrypt(line)) == line` for every byte string without "\\n"; `decrypt` returns
    None for anything that was not made by `encrypt` with this key and memory (altered,
    truncated, another key, another memory, not an encrypted line at all).
    """

    __slots__ = ("_ad", "_invalid", "_siv", "key_id")

    def __init__(self, master: bytes, memory: str) -> None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        if len(master) != KEY_BYTES:
            raise ValueError(f"a key is {KEY_BYTES} bytes, not {len(master)}")
        self._invalid = InvalidTag
        derived = HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=_HKDF_INFO).derive(
            master
        )
        self._siv: AESSIV = AESSIV(derived)
        self._ad = [FORMAT.encode(), memory.encode()]
        self.key_id = key_id(master)

    def encrypt(self, line: bytes) -> bytes:
        """The hub line (without "\\n") for a plain line (without "\\n")."""
        sealed = self._siv.encrypt(pad(line), self._ad)
        return _LINE_START + base64.urlsafe_b64encode(sealed).rstrip(b"=") + _LINE_END

    def decrypt(self, hub_line: bytes) -> bytes | None:
        """The plain line of a hub line, or None when it does not authenticate."""
        if not (hub_line.startswith(_LINE_START) and hub_line.endswith(_LINE_END)):
            hub_line = _normalized(hub_line)
            if not hub_line:
                return None
        body = hub_line[len(_LINE_START) : -len(_LINE_END)]
        try:
            sealed = base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(sealed) < 16 + 128:  # the tag and the smallest bucket
            return None
        try:
            padded = self._siv.decrypt(sealed, self._ad)
        except self._invalid:
            return None
        return unpad(padded)


def _normalized(hub_line: bytes) -> bytes:
    """An encrypted line written with other spacing (`{"c": "..."}`, a CRLF ending), as
    `encrypt` writes it; b"" when it is not an encrypted line."""
    try:
        obj = json.loads(hub_line)
    except ValueError:
        return b""
    if type(obj) is not dict or list(obj) != ["c"] or type(obj["c"]) is not str:
        return b""
    return _LINE_START + obj["c"].encode("ascii", "replace") + _LINE_END
