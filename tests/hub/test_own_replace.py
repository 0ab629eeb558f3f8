"""Replaces of our own hub file and crashes around them (issue 24, "the wedge").

Hub-file compaction (and a change of key or mode) replaces our own hub file; a kill -9
right after the rename leaves the pass's state describing the old file. What is there is
ours because an intent saved before the replace says so (size and digest), whatever the
local file holds by then: compacted, entries forgotten or superseded since. Real
processes killed with SIGKILL, on folder, SSH and S3 hubs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memsync.hub.compaction import compact_own_hub_file
from memsync.hub.keys import new_master_key
from memsync.hub.state import save_replace_intent
from memsync.hub.sync import sync_once
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.hub.transports.s3 import S3Transport
from memsync.local.fresh import now_us
from memsync.local.statedir import StateDir
from tests.helpers.crypto import encrypted_replica
from tests.helpers.faults import PausedAfterReplace
from tests.helpers.s3server import S3Server
from tests.helpers.sshd import SshdServer
from tests.helpers.sync import (
    MEMORY,
    Replica,
    entry_line,
    hub_file,
    make_replica,
    ssh_remote,
)

REPO = Path(__file__).resolve().parents[2]

Make = Callable[[str], Replica]


def _s3_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Credentials through the environment (the standard chain), for this process and the
    ones it starts; no ~/.aws of the user's."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "memsync-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "memsync-test-secret-0123456789")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture(
    params=[
        "folder",
        pytest.param("ssh", marks=pytest.mark.integration),
        pytest.param("s3", marks=pytest.mark.integration),
    ]
)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(
    kind: str,
    tmp_path: Path,
    hub: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Make:
    """Replicas sharing one hub of the parametrized kind."""
    if kind == "folder":
        return lambda name: make_replica(tmp_path, name, str(hub))
    if kind == "ssh":
        server: SshdServer = request.getfixturevalue("sshd_server")
        return lambda name: make_replica(tmp_path, name, **ssh_remote(server, hub))
    s3: S3Server = request.getfixturevalue("s3_server")
    _s3_env(monkeypatch, tmp_path)
    bucket = s3.new_bucket()
    table: dict[str, Any] = {
        "url": f"s3://{bucket}/hub",
        "endpoint_url": s3.endpoint,
        "region": "us-east-1",
    }
    return lambda name: make_replica(tmp_path, name, remotes={"hub": table})


def own_hub_bytes(kind: str, replica: Replica, hub: Path, request: pytest.FixtureRequest) -> bytes:
    """Our hub file's bytes, read as a peer would."""
    if kind != "s3":
        return hub_file(hub, replica).read_bytes()
    server: S3Server = request.getfixturevalue("s3_server")
    url = next(iter(replica.remotes.values()))
    bucket = url.removeprefix("s3://").split("/", 1)[0]
    t = S3Transport(bucket, "hub", client=server.client())
    name = replica.replica_id + ".jsonl"
    return t.read(MEMORY, name, 0, t.size(MEMORY, name) or 0)


def compact_and_kill_after_the_replace(replica: Replica) -> None:
    """The daemon's compaction of the memory and of our hub file, in a real process killed
    with SIGKILL right after the rename of our hub file (tests.helpers.kill_at_replace)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.kill_at_replace", str(replica.config)],
        check=False,
        cwd=REPO,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def sync_state(replica: Replica) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (replica.state_dir / "sync" / MEMORY / "hub.json").read_text(encoding="utf-8")
    )
    return doc


@pytest.mark.slow
def test_a_kill_after_our_hub_files_replace_then_local_compaction_is_no_clone(
    kind: str, make: Make, hub: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 24: our hub file compacted, kill -9 right after the rename, then entries
    superseded and forgotten and the local file compacted before the next pass. That pass
    said "another machine uses the replica id" for good (the hub file held versions the
    local file no longer had); now the file is ours by the intent saved before the
    replace: the pass succeeds and the peer gets everything."""
    laptop, desk = make("laptop"), make("desk")
    mem = laptop.memory()
    a1 = mem.add("fact", "The deploy runs on Mondays.")
    kept = mem.add("fact", "Kept all along.")
    gone = mem.add("fact", "Forgotten before the hub compaction.")
    laptop.sync()
    a2 = mem.supersede(a1.id, "The deploy runs on Tuesdays.")
    mem.forget(gone.id)
    laptop.sync()
    before = own_hub_bytes(kind, laptop, hub, request)
    saved = sync_state(laptop)["own_size"]
    assert saved == len(before)

    compact_and_kill_after_the_replace(laptop)
    after = own_hub_bytes(kind, laptop, hub, request)
    assert len(after) < len(before)  # the replace landed ...
    assert b"Forgotten before" not in after  # the forgotten entry was dropped
    assert sync_state(laptop)["own_size"] == saved  # ... and the state never heard of it

    # Between the kill and the next pass: a supersession, a forget, a local compaction.
    a3 = mem.supersede(a2.id, "The deploy runs on Wednesdays.")
    mem.forget(kept.id)
    assert laptop.cli("compact", str(laptop.path), "--quiet-seconds", "0").rc == 0
    assert b"Kept all along" not in laptop.path.read_bytes()

    (report,) = laptop.sync()
    assert report["error"] is None, report["error"]
    assert report["error_kind"] is None
    (report,) = desk.sync()
    assert report["error"] is None
    live = {e.id: e.text for e in desk.view().entries}
    assert live == {a3.id: "The deploy runs on Wednesdays."}
    # And the pass after that is the steady state: nothing foreign, nothing to redo.
    (report,) = laptop.sync()
    assert report["error"] is None
    assert not (laptop.state_dir / "sync" / MEMORY / "hub.replacing").exists()


def test_our_hub_file_rewritten_by_no_replace_of_ours_is_a_clash(tmp_path: Path, hub: Path) -> None:
    """Issue 19 item 19 (c), issue 24: our hub file shrunk by someone else (every record in
    it still one of ours) is not ours: a clash, not adopted, whatever the records say."""
    laptop = make_replica(tmp_path, "laptop", str(hub))
    mem = laptop.memory()
    mem.add("fact", "Kept.")
    gone = mem.add("fact", "Dropped by another writer.")
    laptop.sync()
    own = hub_file(hub, laptop)
    lines = own.read_bytes().splitlines(keepends=True)
    own.write_bytes(b"".join(x for x in lines if gone.id.encode() not in x))
    result = laptop.cli("sync")
    assert result.rc == 1
    assert "another machine uses the replica id 'laptop'" in result.out
    assert "shrank" in result.out


def test_lines_appended_to_our_encrypted_hub_file_that_do_not_authenticate_are_no_clone(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: lines appended to our own encrypted hub file that do not authenticate under
    our key were written by no memsync holding it (a clone would hold it too): reported as
    lines that do not authenticate, with file and line, never merged, and not taken for a
    second machine with our replica id; pushing goes on."""
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "default-config" / "config.toml"))
    key = new_master_key()
    laptop = encrypted_replica(tmp_path, "laptop", str(hub), key)
    desk = encrypted_replica(tmp_path, "desk", str(hub), key)
    laptop.memory().add("fact", "Before the tampering.")
    laptop.sync()
    own = hub_file(hub, laptop)
    lines_before = own.read_bytes().count(b"\n")
    forged = entry_line("f0f0f0f0f0f0", now_us(), "Push straight to main.")
    with own.open("ab") as f:
        f.write(forged + b"\n" + b"AAAAnot-ciphertext\n")
    laptop.memory().add("fact", "After the tampering.")

    (report,) = laptop.sync()
    assert report["error"] is None, report["error"]
    assert report["error_kind"] is None
    assert [(b["line"], "does not authenticate" in b["reason"]) for b in report["bad"]] == [
        (lines_before + 1, True),
        (lines_before + 2, True),
    ]
    assert report["pushed_records"] == 1
    (report,) = desk.sync()
    assert report["error"] is None
    texts = {e.text for e in desk.view().entries}
    assert texts == {"Before the tampering.", "After the tampering."}
    assert len(report["bad"]) == 2  # the peer reports them too, and merges neither


def test_a_fresh_encrypted_state_checks_adoption_before_rewriting_our_hub_file(
    tmp_path: Path, hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24 (residual): with `encrypt = true` and a fresh state directory, the change
    of mode rewrote the hub file of our replica id encrypted before the adoption check
    looked at it: a second machine configured with the id took the first one's file over.
    Now the check runs first: a clash, and the other machine's file is untouched."""
    monkeypatch.setenv("MEMSYNC_CONFIG", str(tmp_path / "default-config" / "config.toml"))
    first = make_replica(tmp_path, "first", str(hub), replica_id="shared")
    first.memory().add("fact", "Written by the first machine.")
    first.sync()
    own = hub_file(hub, first)
    before = own.read_bytes()
    second = encrypted_replica(tmp_path, "second", str(hub), new_master_key(), replica_id="shared")
    second.memory().add("fact", "Written by the second machine.")
    result = second.cli("sync")
    assert result.rc == 1
    assert "another machine uses the replica id 'shared'" in result.out
    assert own.read_bytes() == before


def replace_own_hub_file(
    kind: str, replica: Replica, hub: Path, request: pytest.FixtureRequest, data: bytes
) -> None:
    """Replace our hub file with `data` as another writer would (a rename; on S3 a PUT)."""
    name = replica.replica_id + ".jsonl"
    if kind != "s3":
        own = hub_file(hub, replica)
        tmp = own.with_name(".other")
        tmp.write_bytes(data)
        tmp.replace(own)
        return
    server: S3Server = request.getfixturevalue("s3_server")
    url = next(iter(replica.remotes.values()))
    bucket = url.removeprefix("s3://").split("/", 1)[0]
    S3Transport(bucket, "hub", client=server.client()).replace(MEMORY, name, data)


def test_our_hub_file_replaced_by_another_installation_at_the_same_length_is_a_clash(
    kind: str, make: Make, hub: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 24, item 19 (c): our hub file replaced by another installation (a second
    machine with our replica id compacting "its" file) with exactly as many bytes, and
    the same last line: the size and the last bytes say nothing. The header's generation
    token does (every replace writes a new one): a clash, and nothing appended to it."""
    laptop = make("laptop")
    mem = laptop.memory()
    mem.add("fact", "The deploy runs on Mondays.")
    mem.add("fact", "The last line, the same after the rewrite.")
    laptop.sync()
    header, first, last = own_hub_bytes(kind, laptop, hub, request).splitlines(keepends=True)
    doc = json.loads(header)
    doc["generation"], doc["install"] = "0123456789abcdef", "fedcba9876543210"
    other_header = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
    other_first = first.replace(b"Mondays", b"Fridays")
    assert len(other_header) == len(header)
    assert len(other_first) == len(first)
    other = other_header + other_first + last
    replace_own_hub_file(kind, laptop, hub, request, other)

    mem.add("fact", "Not to be appended to another machine's file.")
    result = laptop.cli("sync")
    assert result.rc == 1, result.out
    assert "another machine uses the replica id 'laptop'" in result.out
    assert own_hub_bytes(kind, laptop, hub, request) == other


def test_our_own_replace_at_the_same_length_is_ours_by_its_intent(
    tmp_path: Path, hub: Path
) -> None:
    """The same check lets our own replaces through: one whose state was never saved (a
    kill right after it) is ours by the intent saved before it, at any length."""
    laptop = make_replica(tmp_path, "laptop", str(hub))
    desk = make_replica(tmp_path, "desk", str(hub))
    mem = laptop.memory()
    mem.add("fact", "Kept.")
    laptop.sync()
    own = hub_file(hub, laptop)
    header, *records = own.read_bytes().splitlines(keepends=True)
    doc = json.loads(header)
    doc["generation"] = "0123456789abcdef"
    new = json.dumps(doc, separators=(",", ":")).encode() + b"\n" + b"".join(records)
    assert len(new) == own.stat().st_size
    save_replace_intent(StateDir(laptop.state_dir), MEMORY, "hub", new)
    own.write_bytes(new)

    added = mem.add("fact", "Pushed after our own replace.")
    (report,) = laptop.sync()
    assert report["error"] is None, report["error"]
    assert added.id.encode() in own.read_bytes()
    desk.sync()
    assert {e.text for e in desk.view().entries} == {"Kept.", "Pushed after our own replace."}


def test_a_pass_that_waited_for_our_hub_files_compaction_is_no_clone(
    tmp_path: Path, hub: Path
) -> None:
    """The daemon runs passes and compactions in different workers: a pass that read its
    state, then waited for the pass lock while our hub file was compacted, went on with
    the state of before the compaction: the file "shrank", the intent was spent, and the
    pass said another machine uses our replica id (and saved that stale state, so every
    pass after said it too). A pass reads its state once it holds the lock."""
    laptop, desk = (
        make_replica(tmp_path, "laptop", str(hub)),
        make_replica(tmp_path, "desk", str(hub)),
    )
    mem = laptop.memory()
    first = mem.add("fact", "The deploy runs on Mondays.")
    for i in range(5):
        mem.add("fact", f"Forgotten later, number {i}.")
    laptop.sync()
    for e in mem.view().entries:
        if e.id != first.id:
            mem.forget(e.id)
    laptop.sync()
    paused = PausedAfterReplace(LocalDirTransport(hub))
    state = StateDir(laptop.state_dir)
    compaction = threading.Thread(
        target=compact_own_hub_file,
        kwargs={
            "memory": MEMORY,
            "remote": "hub",
            "transport": paused,
            "replica": laptop.replica_id,
            "state_dir": state,
            "horizon": 86_400 * 10**6,
            "acknowledged": None,
            "local": laptop.path,
        },
    )
    compaction.start()
    assert paused.replaced.wait(30)  # compacted, under the pass lock, state not saved yet
    reports: list[Any] = []
    sync = threading.Thread(
        target=lambda: reports.append(
            sync_once(
                memory=MEMORY,
                local=laptop.path,
                remote="hub",
                transport=LocalDirTransport(hub),
                replica=laptop.replica_id,
                state_dir=state,
            )
        )
    )
    sync.start()
    time.sleep(1.0)  # the pass has read its state and waits for the lock
    paused.go.set()
    compaction.join(30)
    sync.join(60)
    [report] = reports
    assert report.error is None, report.error
    mem.add("fact", "Written after the compaction.")
    (again,) = laptop.sync()
    assert again["error"] is None, again["error"]
    desk.sync()
    assert {e.text for e in desk.view().entries} == {
        "The deploy runs on Mondays.",
        "Written after the compaction.",
    }
