"""Two `memsync daemon` processes syncing through a hub on a real OpenSSH server (SFTP on
127.0.0.1, `tests/sshd.py`): a known_hosts file and an identity file in each config, no
~/.ssh of the person running the tests. Never skipped under CI=true."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sshd import SshdServer, kill_sessions, start_sshd
from tests.test_daemon import (
    MEMORY,
    Cluster,
    Remote,
    cli_add,
    cli_show_ids,
    duplicates,
    memsync,
    record_lines,
    start_all,
    view_ids,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshdServer]:
    server = start_sshd(tmp_path / "sshd")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ssh_cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "nodes")
    c.root.mkdir()
    try:
        yield c
    finally:
        c.close()


def _ssh_remote(server: SshdServer, hub: Path) -> Remote:
    return Remote(
        "vm",
        f"ssh://{server.user}@{server.host}:{server.port}{hub}",
        poll_seconds=0.5,
        identity_file=server.client_key,
        known_hosts=server.known_hosts,
    )


def test_two_daemons_sync_through_an_ssh_hub(
    sshd: SshdServer, ssh_cluster: Cluster, tmp_path: Path
) -> None:
    hub = tmp_path / "hub-on-the-server"
    hub.mkdir()
    a = ssh_cluster.node("a", [_ssh_remote(sshd, hub)])
    b = ssh_cluster.node("b", [_ssh_remote(sshd, hub)])
    start_all(a, b)

    on_a = cli_add(a.memory, "learned on A")
    wait_for(lambda: on_a in view_ids(b.memory), "A's add in B's view (over SSH)")
    assert on_a in cli_show_ids(b.memory)

    on_b = cli_add(b.memory, "learned on B")
    wait_for(lambda: on_b in view_ids(a.memory), "B's add in A's view (over SSH)")

    done = memsync("forget", str(b.memory), on_a)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: on_a not in view_ids(a.memory), "B's forget to reach A")
    assert cli_show_ids(a.memory) == [on_b]

    # The server drops every connection: the daemons reconnect at their next pass.
    assert kill_sessions(sshd) >= 1
    after = cli_add(a.memory, "after the connections dropped")
    wait_for(lambda: after in view_ids(b.memory), "an add after a reconnect")
    assert sorted(cli_show_ids(a.memory)) == sorted(cli_show_ids(b.memory)) == sorted([on_b, after])

    for name in ("a.jsonl", "b.jsonl"):
        lines = record_lines(hub / MEMORY / name)
        assert lines, f"nothing pushed to {name}"
        assert not duplicates(lines)
    for node in (a, b):
        assert node.stop() == 0
        st = node.status()  # the last one, written on the way out
        assert st is not None
        assert st.memories[MEMORY].remotes["vm"].last_error is None
