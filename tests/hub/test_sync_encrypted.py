"""Hub encryption end to end (issue 12), through a real folder hub and `memsync sync` in
this process: convergence and idempotence over ciphertext, nothing readable in the hub, a
machine with another key refused before it touches anything, a tampered line reported and
never merged, plain and encrypted files never mixed, turning encryption on, rotation.

test_sync.py's and test_hubcompact.py's scenarios also run over an encrypted hub, through
their `new_replica` fixture (`BOTH_CODECS`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memsync.hub.push
import memsync.hub.sync
from memsync.hub.codec import EncryptedCodec
from memsync.hub.crypto import key_id
from memsync.hub.keys import load_keyring, new_master_key
from memsync.hub.sync import sync_once
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.hub.transports.memory import InMemoryTransport
from tests.helpers.crypto import (
    encrypted_replica,
    hub_digest,
    hub_plain_lines,
    readable_in_hub,
    set_encrypt,
)
from tests.helpers.faults import AckLost
from tests.helpers.sync import (
    MEMORY,
    Replica,
    assert_converged,
    converge,
    hub_file,
    make_replica,
    record_lines,
    write_records,
)

KEY = new_master_key()


@pytest.fixture
def replicas(tmp_path: Path, hub: Path) -> list[Replica]:
    return [encrypted_replica(tmp_path, name, str(hub), KEY) for name in "abc"]


@pytest.fixture(autouse=True)
def _no_real_config_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A key command without key_file must never write in the real ~/.config."""
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "default-config" / "config.toml"))


def _sync(r: Replica) -> tuple[int, str]:
    result = r.cli("sync")
    return result.rc, result.err


@pytest.mark.slow
def test_three_replicas_converge_and_the_hub_holds_nothing_readable(
    replicas: list[Replica], hub: Path
) -> None:
    a, b, _ = replicas
    a.memory().add("fact", "The staging bucket is called orange-kettle-42.", tags=["infra"])
    b.memory().add("preference", "Answers in French, please.", source="user")
    converge(replicas, hub, seed=5, rounds=3)
    assert readable_in_hub(hub, replicas) == []
    assert len(record_lines(a.path)) > 5
    for path in (hub / MEMORY).glob("*.jsonl"):
        lines = path.read_bytes().splitlines()
        header = json.loads(lines[0])
        assert header["format"] == "agent-memory/0.1"
        assert header["encryption"] == "aes-siv-256/1"
        assert header["key"] == key_id(KEY)
        assert all(line.startswith(b'{"c":"') for line in lines[1:])
    assert (a.root / "keys").stat().st_mode & 0o777 == 0o600
    assert key_id(KEY) not in a.config.read_text()


def test_a_replica_with_another_key_exits_1_and_changes_no_hub_byte(
    tmp_path: Path, replicas: list[Replica], hub: Path
) -> None:
    a, b, _ = replicas
    a.memory().add("fact", "Written under the shared key.")
    a.sync()
    b.sync()
    stranger = encrypted_replica(tmp_path, "stranger", str(hub), other := new_master_key())
    stranger.memory().add("fact", "Must never reach the hub.")
    before = hub_digest(hub)
    rc, err = _sync(stranger)
    assert rc == 1
    assert before == hub_digest(hub)
    [line] = [ln for ln in err.splitlines() if "encrypted with key" in ln]
    assert line.startswith("memsync: ")
    assert f"is encrypted with key {key_id(KEY)}, this machine has {key_id(other)}" in line
    assert "hub:notes/" in line
    assert "memsync key import" in line
    assert not hub_file(hub, stranger).exists()
    assert "Written under" not in stranger.path.read_text()  # nothing merged either
    # With the key imported, it syncs.
    assert stranger.cli("key", "import", _key_text(KEY)).rc == 0
    stranger.sync()
    a.sync()
    assert_converged([a, stranger])


def _key_text(key: bytes) -> str:
    from memsync.hub.crypto import format_key

    return format_key(key)


def test_a_flipped_byte_is_a_bad_line_and_the_other_lines_still_merge(
    replicas: list[Replica], hub: Path
) -> None:
    a, b, c = replicas
    ids = [a.memory().add("fact", f"Record number {i}.").id for i in range(4)]
    a.sync()
    own = hub_file(hub, a)
    lines = own.read_bytes().split(b"\n")
    target = bytearray(lines[2])  # line 3: the second record
    target[20] = ord("A") if target[20] != ord("A") else ord("B")
    lines[2] = bytes(target)
    own.write_bytes(b"\n".join(lines))
    [report] = b.sync()
    assert report["bad"] == [
        {
            "file": "hub:notes/a.jsonl",
            "line": 3,
            "reason": "does not authenticate (altered in the hub, or encrypted under a key "
            "this machine does not hold)",
        }
    ]
    got = {r.id for r in b.view().records}
    assert got == set(ids) - {ids[1]}
    # Never spread: b's own pushes carry only its own new record.
    b.memory().add("fact", "Written on b after the tampering.")
    [report] = b.sync()
    assert report["pushed_records"] == 1
    [report] = c.sync()
    assert len(report["bad"]) == 1
    assert {r.id for r in c.view().records} == got | {r.id for r in b.view().records}
    assert ids[1] not in {r.id for r in c.view().records}


def test_plain_and_encrypted_files_are_never_mixed(tmp_path: Path, hub: Path) -> None:
    plain = make_replica(tmp_path, "plain", str(hub))
    enc = encrypted_replica(tmp_path, "enc", str(hub), KEY)
    plain.memory().add("fact", "Written in clear.")
    plain.sync()
    enc.memory().add("fact", "Written under a key.")
    before = hub_digest(hub)
    rc, err = _sync(enc)
    assert rc == 1
    assert "hub:notes/plain.jsonl is not encrypted" in err
    assert "must not mix plain and encrypted files" in err
    assert hub_digest(hub) == before
    assert "in clear" not in enc.path.read_text()


def test_a_plain_replica_refuses_an_encrypted_hub_file(tmp_path: Path, hub: Path) -> None:
    enc = encrypted_replica(tmp_path, "enc", str(hub), KEY)
    enc.memory().add("fact", "Written under a key.")
    enc.sync()
    plain = make_replica(tmp_path, "plain", str(hub))
    plain.memory().add("fact", "Written in clear.")
    before = hub_digest(hub)
    rc, err = _sync(plain)
    assert rc == 1
    assert f"hub:notes/enc.jsonl is encrypted with key {key_id(KEY)}" in err
    assert "set encrypt = true" in err
    assert hub_digest(hub) == before


@pytest.mark.slow
def test_turning_encryption_on_migrates_each_machine_s_own_file(tmp_path: Path, hub: Path) -> None:
    a, b = (make_replica(tmp_path, n, str(hub)) for n in "ab")
    a.memory().add("fact", "Old plain record from a.")
    b.memory().add("fact", "Old plain record from b.")
    for r in (a, b, a):
        r.sync()
    # a turns encryption on: its own file is rewritten encrypted; b's plain file stops it,
    # with what b must do.
    set_encrypt(a, True)
    assert a.cli("key", "new").rc == 0
    rc, err = _sync(a)
    assert rc == 1
    assert "hub:notes/b.jsonl is not encrypted" in err
    assert b"Old plain record" not in hub_file(hub, a).read_bytes()
    # b, still plain, is refused too, and told why.
    rc, err = _sync(b)
    assert rc == 1
    assert "hub:notes/a.jsonl is encrypted" in err
    # b imports a's key and turns encryption on: everyone syncs again.
    ring = load_keyring(a.root / "keys")
    set_encrypt(b, True)
    assert b.cli("key", "import", _key_text(ring.current)).rc == 0
    b.memory().add("fact", "New record from b.")
    b.sync()
    a.memory().add("fact", "New record from a.")
    a.sync()
    b.sync()
    assert_converged([a, b])
    assert readable_in_hub(hub, [a, b]) == []


def test_rotation_while_another_replica_keeps_syncing_loses_nothing(
    replicas: list[Replica], hub: Path
) -> None:
    a, b, _c = replicas
    for r in (a, b):
        r.memory().add("fact", f"Before the rotation, from {r.name}.")
        r.sync()
    a.sync()
    result = a.cli("key", "rotate")
    assert result.rc == 0, result.err
    assert "own hub file under the new key" in result.out
    new = load_keyring(a.root / "keys")
    assert new.keys[1] == KEY
    header = json.loads(hub_file(hub, a).read_bytes().splitlines()[0])
    assert header["key"] == key_id(new.current)
    # b keeps adding and syncing: refused (loudly, touching nothing) until it has the key.
    b.memory().add("fact", "During the rotation, from b.")
    before = hub_digest(hub)
    rc, err = _sync(b)
    assert rc == 1
    assert f"encrypted with key {key_id(new.current)}, this machine has {key_id(KEY)}" in err
    assert hub_digest(hub) == before
    # a goes on: it still reads b's file under the old key.
    a.memory().add("fact", "During the rotation, from a.")
    a.sync()
    # b imports the new key (keeping the old one), then both converge.
    assert b.cli("key", "import", _key_text(new.current)).rc == 0
    b.sync()
    a.sync()
    b.sync()
    assert_converged([a, b])
    texts = {r.fields()["text"] for r in a.view().records}
    assert {
        "Before the rotation, from a.",
        "Before the rotation, from b.",
        "During the rotation, from a.",
        "During the rotation, from b.",
    } <= texts
    for name in ("a", "b"):
        header = json.loads(hub_file(hub, name).read_bytes().splitlines()[0])
        assert header["key"] == key_id(new.current)
    assert readable_in_hub(hub, [a, b]) == []


def test_no_key_file_fails_that_remote_with_one_line(tmp_path: Path, hub: Path) -> None:
    r = encrypted_replica(tmp_path, "nokey", str(hub), None)
    r.memory().add("fact", "Nowhere to go.")
    rc, err = _sync(r)
    assert rc == 1
    assert "encrypt = true for hub, but" in err
    assert "no key file" in err
    assert list(hub.iterdir()) == []


# --- faults: exact-offset appends and idempotent retries over ciphertext ------------------


@pytest.mark.slow
@pytest.mark.parametrize("lose", [{1}, {2}, {1, 3}], ids=["first", "second chunk", "two"])
def test_a_write_whose_answer_was_lost_is_adopted_not_repeated_encrypted(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch, lose: set[int]
) -> None:
    monkeypatch.setattr(memsync.hub.push, "PUSH_CHUNK_BYTES", 2048)  # several chunks a push
    a = encrypted_replica(tmp_path, "a", str(hub), KEY)
    b = encrypted_replica(tmp_path, "b", str(hub), KEY)
    write_records(a.path, 3)
    a.sync()
    write_records(a.path, 30, start=3, text_bytes=100)
    flaky = AckLost(LocalDirTransport(hub), lose)
    for _ in lose:
        (failed,) = a.sync_config(transports={"hub": flaky})
        assert failed.error is not None
        assert "connection lost" in failed.error
    (done,) = a.sync()
    assert done["error"] is None
    plain, failed_lines = hub_plain_lines(hub_file(hub, a), KEY)
    assert failed_lines == 0
    assert sorted(plain) == sorted(set(plain))  # no record twice
    assert set(plain) == set(record_lines(a.path))
    b.sync()
    assert_converged([a, b])
    (again,) = a.sync()
    assert again["pushed_bytes"] == 0


@pytest.mark.parametrize("cut", [1, 40, -1], ids=["first byte", "mid-line", "before newline"])
def test_a_torn_encrypted_write_is_completed_without_duplicating(tmp_path: Path, cut: int) -> None:
    a = encrypted_replica(tmp_path, "a", None, KEY)
    write_records(a.path, 5)
    hub = InMemoryTransport()
    codec = EncryptedCodec("hub", MEMORY, load_keyring(a.root / "keys"))

    def run() -> memsync.hub.sync.SyncReport:
        return sync_once(
            memory=MEMORY,
            local=a.path,
            remote="hub",
            transport=hub,
            replica="a",
            state_dir=a.state_dir,
            codec=codec,
        )

    assert run().ok
    write_records(a.path, 3, start=5)
    one_line = len(codec.encode_line(record_lines(a.path)[5])) + 1
    hub.tear_next_write = cut if cut > 0 else one_line + cut
    assert not run().ok
    assert run().ok
    data = bytes(hub.files[(MEMORY, "a.jsonl")])
    cipher = codec.ciphers[0]
    lines = data.split(b"\n")[1:-1]
    plain = [p for p in map(cipher.decrypt, lines) if p is not None]
    assert sorted(plain) == sorted(set(plain))
    assert set(plain) == set(record_lines(a.path))
    again = run()
    assert again.ok
    assert again.pushed_bytes == 0


def test_turning_encryption_off_rewrites_our_own_file_plain(
    replicas: list[Replica], hub: Path
) -> None:
    """The way back: every machine sets encrypt = false (keeping its key file, which the
    rewrite needs); each one's next sync rewrites its own hub file plain."""
    a, b, _ = replicas
    for r in (a, b):
        r.memory().add("fact", f"Encrypted once, from {r.name}.")
        r.sync()
    a.sync()
    for r in (a, b):
        set_encrypt(r, False)
    rc, err = _sync(a)  # b's file is still encrypted: refused, a's own file rewritten
    assert rc == 1
    assert "hub:notes/b.jsonl is encrypted" in err
    assert b"Encrypted once, from a." in hub_file(hub, a).read_bytes()
    b.sync()
    a.memory().add("fact", "Plain again, from a.")
    a.sync()
    b.sync()
    assert_converged([a, b])
    for name in ("a", "b"):
        assert "encryption" not in json.loads(hub_file(hub, name).read_bytes().splitlines()[0])
