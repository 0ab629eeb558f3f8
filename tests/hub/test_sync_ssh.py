"""test_sync.py's scenarios over SSH: three replicas reach the same hub folder through the
real OpenSSH server on 127.0.0.1 (SFTP), each with its own config, state directory and
connection. Under CI=true these run, never skip (`tests.helpers.sshd.start_sshd`)."""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest

from memsync.hub.transports._ssh_session import TimedSFTPClient
from tests.helpers.crypto import BOTH_CODECS, ReplicaFactory
from tests.helpers.sshd import SshdServer, kill_sessions, session_pids
from tests.helpers.sync import (
    MEMORY,
    Replica,
    assert_converged,
    converge,
    forget_state_costs_a_reread,
    hub_file,
    make_replica,
    record_lines,
    ssh_remote,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def replicas(
    tmp_path: Path, hub: Path, sshd_server: SshdServer, new_replica: ReplicaFactory
) -> list[Replica]:
    return [new_replica(tmp_path, name, **ssh_remote(sshd_server, hub)) for name in "abc"]


@pytest.mark.parametrize("seed", [11, 12])
def test_three_replicas_converge_over_ssh_and_a_further_round_is_a_no_op(
    replicas: list[Replica], hub: Path, seed: int
) -> None:
    converge(replicas, hub, seed, rounds=4)


@BOTH_CODECS
def test_a_deleted_state_directory_costs_a_reread_over_ssh(
    replicas: list[Replica], hub: Path
) -> None:
    converge(replicas, hub, seed=13, rounds=3)
    forget_state_costs_a_reread(replicas, hub, seed=13)


def test_ssh_and_folder_replicas_share_one_hub(
    tmp_path: Path, hub: Path, sshd_server: SshdServer
) -> None:
    """The hub is a folder: one machine mounts it, the others reach it over SSH."""
    local = make_replica(tmp_path, "nas", str(hub))
    remote = make_replica(tmp_path, "laptop", **ssh_remote(sshd_server, hub))
    local.memory().add("fact", "Written next to the hub.")
    remote.memory().add("lesson", "Written over SSH.")
    for r in (local, remote, local):
        r.sync()
    assert_converged([local, remote])
    assert len(record_lines(hub_file(hub, remote))) == 1
    assert (hub_file(hub, remote).stat().st_mode & 0o777) == 0o600


def test_each_sync_run_closes_its_connection(
    replicas: list[Replica], sshd_server: SshdServer
) -> None:
    replicas[0].memory().add("fact", "One record.")
    replicas[0].sync()
    deadline = time.monotonic() + 5
    while session_pids(sshd_server) and time.monotonic() < deadline:
        time.sleep(0.02)  # the session process exits just after the client hangs up
    assert session_pids(sshd_server) == []


def test_an_encrypted_key_fails_sync_with_one_line_saying_what_to_do(
    tmp_path: Path, hub: Path, sshd_server: SshdServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13, item 21: paramiko's "Private key file is encrypted" named neither the key
    nor the remedy; `memsync sync` says both, on the remote's one line, and exits 1."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    key = tmp_path / "encrypted_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(key)],
        check=True,
        capture_output=True,
    )
    options = {**ssh_remote(sshd_server, hub), "identity_file": key}
    a = make_replica(tmp_path, "a", **options)
    a.memory().add("fact", "Kept.")
    result = a.cli("sync")
    assert result.rc == 1
    assert result.out.count("\n") == 1, result.out
    assert f"ssh://{sshd_server.user}@127.0.0.1:{sshd_server.port}{hub}: " in result.out
    assert f"the key file {key} is encrypted: load it into ssh-agent (ssh-add {key})" in result.out


def test_a_hub_in_the_login_home_folder(tmp_path: Path, hub: Path, sshd_server: SshdServer) -> None:
    """Issue 13, item 23: `ssh://host/~/path` is `path` in the login's home folder on the
    host (as scp's `host:~/path`); it was read as a root folder named "~". The hub is
    reached from the home folder with `..`, so that the test writes only under tmp_path."""
    home = pwd.getpwnam(sshd_server.user).pw_dir
    relative = os.path.relpath(hub, home)
    url = f"ssh://{sshd_server.user}@127.0.0.1:{sshd_server.port}/~/{relative}"
    options = {**ssh_remote(sshd_server, hub), "hub_url": url}
    a = make_replica(tmp_path, "a", **options)
    b = make_replica(tmp_path, "b", str(hub))
    a.memory().add("fact", "Pushed through ~/.")
    a.sync()
    b.sync()
    assert_converged([a, b])
    assert len(record_lines(hub_file(hub, a))) == 1


def test_a_replace_cut_off_in_a_pass_leaves_no_temp_file_after_the_next_pass(
    tmp_path: Path, hub: Path, sshd_server: SshdServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 13: the connection dies (its sshd process killed) between the temp file of a
    watermark replace and its rename. That pass fails; the temp file, left in the hub, is
    no replica to anyone; the next pass publishes again and removes it."""
    a = make_replica(tmp_path, "a", **ssh_remote(sshd_server, hub))
    b = make_replica(tmp_path, "b", **ssh_remote(sshd_server, hub))
    b.memory().add("fact", "From B.")
    b.sync()
    a.memory().add("fact", "From A.")
    rename = TimedSFTPClient.posix_rename

    def killed_first(self: TimedSFTPClient, old: str, new: str) -> None:
        monkeypatch.setattr(TimedSFTPClient, "posix_rename", rename)  # once
        assert kill_sessions(sshd_server) == 1
        time.sleep(0.2)  # the kernel has closed the socket
        rename(self, old, new)

    monkeypatch.setattr(TimedSFTPClient, "posix_rename", killed_first)
    failed = a.cli("sync", "--json").reports
    assert failed[0]["error"], failed
    folder = hub / MEMORY
    assert len(list(folder.glob(".*.tmp-*"))) == 1, "the scenario: a temp file left behind"

    seen = b.sync()
    assert set(seen[0]["replicas"]) == {a.replica_id}, "the temp file is no replica"
    assert seen[0]["error"] is None
    again = a.sync()
    assert again[0]["error"] is None
    assert list(folder.glob(".*.tmp-*")) == []
    assert_converged([a, b])
