"""The three hub codecs are siblings behind one `Codec` Protocol (issue 19, item 5): an
encrypted codec is no plain codec, and a remote that cannot be synced fails at the start
of every pass while reading and writing, between passes, as a plain one does."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.errors import KeyFileError
from memsync.hub.codec import Codec, EncryptedCodec, FailingCodec, PlainCodec
from memsync.hub.keys import Keyring, new_master_key
from memsync.hub.state import SyncState
from memsync.hub.transports.memory import InMemoryTransport
from memsync.local.statedir import StateDir

LINES = [b'{"format":"agent-memory/0.1"}', b'{"id":"a","kind":"fact","text":"x"}']


def test_no_codec_is_another_codec() -> None:
    classes = (PlainCodec, EncryptedCodec, FailingCodec)
    for one in classes:
        for other in classes:
            assert one is other or not issubclass(one, other)


def test_a_failing_codec_fails_the_pass_and_reads_as_plain_otherwise(tmp_path: Path) -> None:
    failing: Codec = FailingCodec("hub", "me", "encrypt = true for hub, but no key file")
    plain: Codec = PlainCodec("hub", "me")
    with pytest.raises(KeyFileError, match="no key file"):
        failing.prepare(InMemoryTransport(), "me", "a.jsonl", SyncState(), StateDir(tmp_path))
    assert failing.identity == plain.identity
    assert failing.plain_lines(LINES) == plain.plain_lines(LINES) == LINES
    assert failing.decode("hub:me/b.jsonl", 1, LINES, []) == [("hub:me/b.jsonl", 1, LINES)]
    assert failing.header(0, "g") == plain.header(0, "g")


def test_an_encrypted_codec_is_a_codec_of_its_own(tmp_path: Path) -> None:
    codec: Codec = EncryptedCodec("hub", "me", Keyring(tmp_path / "keys", (new_master_key(),)))
    hub = codec.encode_line(LINES[1])
    assert hub != LINES[1]
    assert codec.plain_lines([hub]) == [LINES[1]]
    assert codec.unauthenticated([hub, b'{"c":"forged"}']) == [1]
    assert codec.identity != PlainCodec("hub", "me").identity
