"""memsync.hub.crypto and memsync.hub.keys (issue 12): determinism, padding buckets, associated
data bound to the memory name, tamper detection, key ids, the key file."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.errors import KeyFileError
from memsync.hub.crypto import (
    LineCipher,
    bucket,
    format_key,
    key_id,
    pad,
    parse_key,
    unpad,
)
from memsync.hub.keys import Keyring, add_key, load_keyring, new_master_key

KEY = bytes(range(32))
LINE = b'{"id": "01J0", "kind": "fact", "text": "The build needs Python 3.11.", "created_at": "2026-01-02T03:04:05Z"}'


def test_encryption_is_deterministic_and_round_trips() -> None:
    a, b = LineCipher(KEY, "notes"), LineCipher(KEY, "notes")
    hub = a.encrypt(LINE)
    assert hub == b.encrypt(LINE)  # another machine, the same bytes
    assert b.decrypt(hub) == LINE
    assert hub.startswith(b'{"c":"')
    assert hub.endswith(b'"}')
    assert b"\n" not in hub
    assert b"Python" not in hub
    assert b"01J0" not in hub


@given(st.binary(max_size=3000).filter(lambda b: b"\n" not in b))
def test_any_line_round_trips(line: bytes) -> None:
    cipher = LineCipher(KEY, "m")
    assert cipher.decrypt(cipher.encrypt(line)) == line


def test_padding_buckets() -> None:
    assert [bucket(n) for n in (1, 128, 129, 192, 193, 256, 257, 384, 385, 1000)] == [
        128, 128, 192, 192, 256, 256, 384, 384, 512, 1024,
    ]  # fmt: skip
    for line in (b"", b"x", b"a" * 127, b"a" * 128, b"ends in zeros\x00\x00", b"\x80"):
        padded = pad(line)
        assert len(padded) == bucket(len(line) + 1)
        assert unpad(padded) == line
    assert unpad(b"no marker" + bytes(119)) is None
    assert unpad(pad(b"x") + b"\x00") is None  # not a bucket's length


def test_lengths_in_one_bucket_give_hub_lines_of_one_length() -> None:
    cipher = LineCipher(KEY, "notes")
    lengths = {len(cipher.encrypt(b"x" * n)) for n in range(130, 192)}
    assert len(lengths) == 1


def test_associated_data_binds_a_line_to_its_memory() -> None:
    hub = LineCipher(KEY, "notes").encrypt(LINE)
    assert LineCipher(KEY, "other").decrypt(hub) is None
    assert LineCipher(KEY, "notes").decrypt(hub) == LINE


def test_tampering_and_other_keys_are_detected() -> None:
    cipher = LineCipher(KEY, "notes")
    hub = cipher.encrypt(LINE)
    body = hub[6:-2]
    for i in (0, len(body) // 2, len(body) - 2):
        flipped = bytearray(body)
        flipped[i] = ord("A") if flipped[i] != ord("A") else ord("B")
        assert cipher.decrypt(b'{"c":"' + bytes(flipped) + b'"}') is None
    assert cipher.decrypt(hub[:-3] + b'"}') is None  # truncated
    assert LineCipher(os.urandom(32), "notes").decrypt(hub) is None
    assert cipher.decrypt(LINE) is None  # a plain record is no encrypted line
    assert cipher.decrypt(b'{"c":"!!!"}') is None
    assert cipher.decrypt(b"\xff\xfe") is None
    # Other spacing of the same JSON object is the same line.
    assert cipher.decrypt(b'{"c": "' + body + b'"}') == LINE


def test_key_ids_are_stable_keyed_hashes() -> None:
    assert key_id(KEY) == key_id(bytes(range(32)))
    assert key_id(KEY).startswith("k1.")
    assert len(key_id(KEY)) == 19
    assert key_id(KEY) != key_id(bytes(32))
    assert KEY.hex()[:16] not in key_id(KEY)
    assert LineCipher(KEY, "x").key_id == key_id(KEY)


def test_key_id_is_pinned() -> None:
    """A key id is named in hub headers that other versions read: it must never change."""
    import hashlib
    import hmac

    expected = "k1." + hmac.new(KEY, b"memsync key id", hashlib.sha256).hexdigest()[:16]
    assert key_id(KEY) == expected == "k1.90954f56016c5e41"


def test_copy_safe_form_round_trips_and_rejects_near_misses() -> None:
    text = format_key(KEY)
    assert text.startswith("msk1-")
    assert len(text) == 48
    assert parse_key(text) == KEY
    assert parse_key(f"  {text}\n") == KEY
    assert parse_key(text[:-1]) is None
    assert parse_key(text + "A") is None
    assert parse_key("msk2-" + text[5:]) is None
    assert parse_key(base64.b64encode(KEY).decode()) is None


def test_key_file_is_0600_first_key_writes_all_read(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "keys"
    first = new_master_key()
    ring = add_key(path, first)
    assert (path.stat().st_mode & 0o777) == 0o600
    assert ring.keys == (first,)
    second = new_master_key()
    ring = add_key(path, second)
    assert load_keyring(path).keys == (second, first)
    assert add_key(path, first).keys == (first, second)  # import again: current, no repeat
    assert format_key(first) in path.read_text()


def test_key_file_errors_are_one_line_and_never_echo_a_key(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    with pytest.raises(KeyFileError, match="memsync key new"):
        load_keyring(path)
    Keyring(path, (KEY,)).save()
    path.chmod(0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_keyring(path)
    path.chmod(0o600)
    typo = format_key(KEY)[:-2]
    path.write_text(f"# comment\n{typo}\n")
    with pytest.raises(KeyFileError, match=r"keys:2: not a key") as err:
        load_keyring(path)
    assert typo not in str(err.value)
    path.write_text("# only comments\n")
    with pytest.raises(KeyFileError, match="holds no key"):
        load_keyring(path)
