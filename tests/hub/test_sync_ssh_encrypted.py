"""Hub encryption over the real sshd (issue 12): three encrypted replicas converge over
SFTP, a hub shared by an SSH and a folder replica, and a replica with another key refused
without a byte of the hub changed. (test_sync_ssh.py runs its lost-state scenario over a
plain and an encrypted hub.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.hub.crypto import key_id
from memsync.hub.keys import new_master_key
from tests.helpers.crypto import encrypted_replica, hub_digest, readable_in_hub
from tests.helpers.sshd import SshdServer
from tests.helpers.sync import Replica, assert_converged, converge, ssh_remote

pytestmark = pytest.mark.integration

KEY = new_master_key()


@pytest.fixture
def replicas(tmp_path: Path, hub: Path, sshd_server: SshdServer) -> list[Replica]:
    return [
        encrypted_replica(tmp_path, name, **ssh_remote(sshd_server, hub), key=KEY) for name in "abc"
    ]


def test_three_replicas_converge_over_encrypted_ssh(replicas: list[Replica], hub: Path) -> None:
    replicas[0].memory().add("fact", "The VPN config lives in vault path ops/vpn-blue.")
    converge(replicas, hub, seed=21, rounds=3)
    assert readable_in_hub(hub, replicas) == []


def test_two_replicas_over_ssh_and_folder_share_an_encrypted_hub(
    tmp_path: Path, hub: Path, sshd_server: SshdServer
) -> None:
    nas = encrypted_replica(tmp_path, "nas", str(hub), KEY)
    laptop = encrypted_replica(tmp_path, "laptop", **ssh_remote(sshd_server, hub), key=KEY)
    nas.memory().add("fact", "Written next to the hub.")
    laptop.memory().add("lesson", "Written over SSH.")
    for r in (nas, laptop, nas):
        r.sync()
    assert_converged([nas, laptop])
    assert readable_in_hub(hub, [nas, laptop]) == []


def test_another_key_over_ssh_exits_1_and_changes_nothing(
    tmp_path: Path, replicas: list[Replica], hub: Path, sshd_server: SshdServer
) -> None:
    a = replicas[0]
    a.memory().add("fact", "Under the shared key.")
    a.sync()
    other = new_master_key()
    stranger = encrypted_replica(tmp_path, "x", **ssh_remote(sshd_server, hub), key=other)
    stranger.memory().add("fact", "Never to reach the hub.")
    before = hub_digest(hub)
    result = stranger.cli("sync")
    assert result.rc == 1
    assert f"encrypted with key {key_id(KEY)}, this machine has {key_id(other)}" in result.err
    assert hub_digest(hub) == before
