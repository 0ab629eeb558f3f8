"""The key file of hub encryption (issue 12): where the keys live and how they change.

One text file, mode 0600, by default `keys` in the config directory (beside
`config.toml`; `key_file` in the config moves it). Lines are keys in their copy-safe form
(`msk1-...`, see `memsync.hub.crypto`); the **first** is the current key, used to write;
every key in the file is used to read, so that a machine keeps reading hub files written
under an old key while a rotation goes round. `#` starts a comment.

Never a key in `config.toml`, a memory file or a log line: only key ids are shown.
Nothing here imports `cryptography` (key ids are HMAC-SHA256 from the standard library).
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from pathlib import Path

from memsync.errors import KeyFileError
from memsync.hub.crypto import KEY_BYTES, format_key, key_id, parse_key
from memsync.local.storage import atomic_replace, private_dirs

__all__ = [
    "KEY_FILE_NAME",
    "KeyFileError",
    "Keyring",
    "add_key",
    "load_keyring",
    "new_master_key",
]

KEY_FILE_NAME = "keys"
_HEADER = (
    "# memsync hub encryption keys: SECRET. The first key writes; every key reads.\n"
    "# Copy a key to another machine with `memsync key show` there and\n"
    "# `memsync key import` here; never put a key in config.toml.\n"
)


def new_master_key() -> bytes:
    """32 bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(KEY_BYTES)


@dataclass(frozen=True)
class Keyring:
    """The keys of a key file: `keys[0]` writes, all of them read."""

    path: Path
    keys: tuple[bytes, ...]

    @property
    def current(self) -> bytes:
        return self.keys[0]

    @property
    def ids(self) -> list[str]:
        return [key_id(k) for k in self.keys]

    def printed_forms(self) -> tuple[str, ...]:
        """Every spelling of every key a person could paste: `msk1-...` as `memsync key
        show` prints it, its base64url body alone, standard base64 and hex (issue 24,
        item 5: memory text must hold none of them)."""
        forms: list[str] = []
        for k in self.keys:
            printed = format_key(k)
            forms += [printed, printed.removeprefix("msk1-"), base64.b64encode(k).decode()]
            forms += [k.hex(), k.hex().upper()]
        return tuple(forms)

    def save(self) -> None:
        """Write the file atomically, mode 0600 from its first byte (directory 0700)."""
        private_dirs(self.path.parent)
        text = _HEADER + "".join(f"{format_key(k)}\n" for k in self.keys)
        # A full disk is an error naming the key file, and leaves no temp file behind.
        atomic_replace(self.path, text.encode())


def load_keyring(path: Path) -> Keyring:
    """The keys in `path`.

    Raises:
        KeyFileError: no such file (with the commands that make one), a file others can read
            (keys must stay 0600), or a line that is not a key (named by line number,
            never echoed: it may be a key mistyped).
    """
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyFileError(
            f"{path}: no key file; run `memsync key new` on the first machine, and "
            "`memsync key import` with its key on the others"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"{path}: cannot read the key file ({exc})") from None
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"{path}: the key file is readable by others (mode {st.st_mode & 0o777:o}); "
            f"run `chmod 600 {path}` and consider the key exposed (`memsync key rotate`)"
        )
    keys: list[bytes] = []
    for n, line in enumerate(text.splitlines(), 1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        key = parse_key(content.split()[0])
        if key is None:
            raise KeyFileError(f"{path}:{n}: not a key (keys look like msk1- and 43 characters)")
        if key not in keys:
            keys.append(key)
    if not keys:
        raise KeyFileError(f"{path}: the key file holds no key; run `memsync key new`")
    return Keyring(path, tuple(keys))


def add_key(path: Path, key: bytes) -> Keyring:
    """Make `key` the current key of the file at `path` (created when missing); the keys
    it held stay, for reading."""
    try:
        old = load_keyring(path).keys
    except KeyFileError:
        if path.exists():
            raise
        old = ()
    ring = Keyring(path, (key, *(k for k in old if k != key)))
    ring.save()
    return ring
