"""The real-process fault campaign (issue 13), short enough for CI: three `memsync daemon`
processes over one folder hub, concurrent `memsync add` and `memsync forget` writers on
every machine, one daemon killed with SIGKILL mid-way and restarted while the writers go
on. At the end every file converges, and every acknowledged add (a `memsync add` that
exited 0 and printed its id) is in every view exactly once, unless it was forgotten.

Nothing is mocked: real daemons, real command-line writers, a real folder hub. The
helpers are test_daemon.py's (`Cluster`, `wait_for`, ...).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memsync.errors import TransportError
from memsync.hub.transports.s3 import S3Transport
from memsync.local.memory import Memory
from memsync.local.reading import view_of
from tests.helpers.daemons import (
    MEMORY,
    Cluster,
    Node,
    Remote,
    duplicates,
    memsync,
    record_lines,
    start_all,
    view_ids,
    wait_for,
)
from tests.helpers.s3server import S3Server
from tests.helpers.sshd import SshdServer, kill_sessions

REPO = Path(__file__).resolve().parents[2]

ADDS_PER_WRITER = 8


@pytest.fixture
def campaign(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


class Writer(threading.Thread):
    """An agent on one machine: `memsync add` again and again (each a new process), and
    a `memsync forget` of one of its own entries now and then."""

    def __init__(self, node: Node, seed: int) -> None:
        super().__init__(name=f"writer-{node.replica}", daemon=True)
        self.node, self.rng = node, random.Random(seed)
        self.added: list[str] = []
        self.forgotten: list[str] = []
        self.failures: list[str] = []

    def run(self) -> None:
        for i in range(ADDS_PER_WRITER):
            text = f"{self.node.replica} learned fact {i}"
            done = memsync("add", str(self.node.memory), "--kind", "fact", "--text", text)
            if done.returncode != 0:
                self.failures.append(done.stderr)
                continue
            self.added.append(done.stdout.strip())
            if i % 4 == 3:
                victim = self.added[self.rng.randrange(len(self.added))]
                if victim not in self.forgotten:
                    done = memsync("forget", str(self.node.memory), victim)
                    if done.returncode == 0:
                        self.forgotten.append(victim)
                    else:
                        self.failures.append(done.stderr)


@pytest.mark.parametrize(
    "c_reaches_the_hub",
    ["through the folder", pytest.param("over ssh", marks=pytest.mark.integration)],
)
def test_three_daemons_writers_and_a_kill_9_converge_with_nothing_lost(
    campaign: Cluster, request: pytest.FixtureRequest, c_reaches_the_hub: str
) -> None:
    """With "over ssh", c reaches the same hub folder through a real sshd, whose sessions
    are also killed once mid-way."""
    started = time.monotonic()
    hub = campaign.hub()
    server: SshdServer | None = None
    if c_reaches_the_hub == "over ssh":
        server = request.getfixturevalue("sshd_server")
        assert isinstance(server, SshdServer)
    nodes = [campaign.folder_node(name, hub, reconcile_seconds=2.0) for name in ("a", "b")]
    if server is None:
        nodes.append(campaign.folder_node("c", hub, reconcile_seconds=2.0))
    else:
        url = f"ssh://{server.user}@{server.host}:{server.port}{hub}"
        remote = Remote("hub", url, identity_file=server.client_key, known_hosts=server.known_hosts)
        nodes.append(campaign.node("c", [remote], reconcile_seconds=2.0))
    for node in nodes:
        Memory.open(node.memory)
    start_all(*nodes)

    writers = [Writer(node, seed) for seed, node in enumerate(nodes)]
    for w in writers:
        w.start()
    victim = nodes[1]
    wait_for(lambda: len(writers[1].added) >= 2, "b's writer to be under way", timeout=30)
    wait_for(lambda: len(record_lines(victim.hub_file(hub))) >= 1, "b to push", timeout=20)
    print(f"kill -9 of b's daemon after {len(writers[1].added)} of b's adds")
    victim.send(signal.SIGKILL)
    assert victim.proc is not None
    assert victim.proc.wait(timeout=10) == -signal.SIGKILL
    victim.start()  # while the writers go on
    if server is not None:
        wait_for(lambda: len(writers[2].added) >= 4, "c's writer to be half-way", timeout=30)
        kill_sessions(server)  # c's connection dies; its daemon must reconnect
    for w in writers:
        w.join(timeout=60)
        assert not w.is_alive(), f"{w.name} did not finish"
        assert not w.failures, f"{w.name}: {w.failures}"

    added = [rid for w in writers for rid in w.added]
    forgotten = {rid for w in writers for rid in w.forgotten}
    assert len(added) == len(set(added)) == ADDS_PER_WRITER * len(writers)
    assert forgotten
    expected = sorted(set(added) - forgotten)

    def converged() -> bool:
        return all(sorted(view_ids(n.memory)) == expected for n in nodes)

    wait_for(converged, "every view to hold every acknowledged add, forgets applied", 30)
    for node in nodes:
        ids = view_ids(node.memory)
        assert not duplicates(ids), f"{node.replica}'s view holds an id twice"
        assert not duplicates(record_lines(node.memory)), f"{node.replica}: a line twice"
        assert view_of([node.memory]).bad == []
        hub_lines = record_lines(node.hub_file(hub))
        assert not duplicates(hub_lines), f"{node.replica}'s hub file holds a line twice"
        assert set(record_lines(node.memory)) <= {
            line for n in nodes for line in record_lines(n.hub_file(hub))
        }, f"a record line of {node.replica} never reached the hub"
    assert sorted(p.name for p in (hub / MEMORY).glob("*.jsonl")) == [
        "a.jsonl",
        "b.jsonl",
        "c.jsonl",
    ]
    for node in nodes:
        assert node.stop() == 0, node.stderr()
    assert victim.starts == 2
    print(f"campaign took {time.monotonic() - started:.1f} s")


# --- the wedge (issue 24): kill -9 right after our hub file's replace -----------------------


@dataclass
class S3Remote(Remote):
    """A `[[remote]]` table for an s3:// hub (credentials in the daemon's environment)."""

    endpoint_url: str = ""

    def toml(self) -> str:
        extra = f'endpoint_url = {json.dumps(self.endpoint_url)}\nregion = "us-east-1"\n'
        return super().toml() + extra


def _hub_of_kind(
    kind: str, campaign: Cluster, request: pytest.FixtureRequest
) -> tuple[list[Remote], dict[str, str], Callable[[Node], bytes]]:
    """The remote of every node for a hub of `kind`, the nodes' environment, and how to
    read a node's own hub file as a peer would."""
    if kind == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        bucket = s3.new_bucket()
        env = {
            **s3.env,
            "AWS_CONFIG_FILE": "/nonexistent/aws-config",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

        def read_s3(node: Node) -> bytes:
            # A transport of its own each time: one kept across the replace would answer
            # from the segments it listed before it (a reader's cache, not the hub's state).
            # A replace by the running daemon between the listing and the read removes
            # the segments listed: list again.
            name = f"{node.replica}.jsonl"
            for _ in range(10):
                t = S3Transport(bucket, "hub", client=s3.client())
                try:
                    return t.read(MEMORY, name, 0, t.size(MEMORY, name) or 0)
                except TransportError:
                    time.sleep(0.1)
            raise AssertionError(f"{name}: never read whole from the S3 hub")

        remote = S3Remote("hub", f"s3://{bucket}/hub", endpoint_url=s3.endpoint)
        return [remote], env, read_s3
    hub = campaign.hub()
    url = str(hub)
    options: dict[str, Any] = {}
    if kind == "ssh":
        server: SshdServer = request.getfixturevalue("sshd_server")
        url = f"ssh://{server.user}@{server.host}:{server.port}{hub}"
        options = {"identity_file": server.client_key, "known_hosts": server.known_hosts}
    return [Remote("hub", url, **options)], {}, partial(_hub_bytes, hub)


def _hub_bytes(hub: Path, node: Node) -> bytes:
    """`node`'s hub file as it is now: empty before its first push (a wait may start
    before the daemon's first pass has written it)."""
    try:
        return node.hub_file(hub).read_bytes()
    except FileNotFoundError:
        return b""


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    [
        "folder",
        pytest.param("ssh", marks=pytest.mark.integration),
        pytest.param("s3", marks=pytest.mark.integration),
    ],
)
def test_a_kill_9_after_the_hub_file_replace_then_local_compaction_does_not_wedge(
    campaign: Cluster, request: pytest.FixtureRequest, kind: str
) -> None:
    """Issue 24's campaign sequence: writers on two machines; b's daemon is killed, b's
    compaction of its memory and of its own hub file (a real process, as the daemon's
    scheduled job) is killed with SIGKILL right after the rename; then b forgets entries
    and compacts its local file; b's daemon starts again while the writers go on. Every
    pass of b then said "another machine uses the replica id 'b'" and b's writes never
    reached a. Now both converge, with every acknowledged add and every forget."""
    remotes, env, own_hub_bytes = _hub_of_kind(kind, campaign, request)
    a, b = (campaign.node(n, remotes, env=env, reconcile_seconds=2.0) for n in ("a", "b"))
    for node in (a, b):
        Memory.open(node.memory)
    start_all(a, b)
    writers = [Writer(node, seed) for seed, node in enumerate((a, b))]
    for w in writers:
        w.start()
    # Something b's hub compaction will drop: an entry of b's, forgotten, pushed.
    early = memsync("add", str(b.memory), "--kind", "fact", "--text", "b: soon forgotten")
    early_id = early.stdout.strip()
    assert memsync("forget", str(b.memory), early_id).returncode == 0
    wait_for(
        lambda: (
            own_hub_bytes(b).count(early_id.encode()) >= 2 and b"soon forgotten" in own_hub_bytes(b)
        ),
        "b to push the entry and its tombstone",
        timeout=30,
    )
    b.send(signal.SIGKILL)
    assert b.proc is not None
    assert b.proc.wait(timeout=10) == -signal.SIGKILL
    # The kill may land between a push and the save of its state: the hub file is then
    # longer than b's state says, and compaction rightly leaves a file it does not know.
    # One pass, as the daemon's next would, makes them agree again.
    synced = memsync("sync", "--config", str(b.config), env=b.daemon_env())
    assert synced.returncode == 0, synced.stderr
    before = own_hub_bytes(b)
    killed = subprocess.run(
        [sys.executable, "-m", "tests.helpers.kill_at_replace", str(b.config)],
        check=False,
        cwd=REPO,
        env={**b.daemon_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after = own_hub_bytes(b)
    assert len(after) < len(before)
    assert b"soon forgotten" not in after

    # Between the kill and b's next pass: forgets, and a local compaction.
    pushed = [json.loads(raw)["id"] for raw in after.splitlines()[1:] if b'"text"' in raw]
    victims = [rid for rid in pushed if rid in view_ids(b.memory)][:2]
    assert victims, "b had pushed entries of its own"
    for rid in victims:
        assert memsync("forget", str(b.memory), rid).returncode == 0
    done = memsync("compact", str(b.memory), "--quiet-seconds", "0", "--config", str(b.config))
    assert done.returncode == 0, done.stderr
    assert not any(f'"id":"{rid}","kind"'.encode() in b.memory.read_bytes() for rid in victims)
    b.start()

    for w in writers:
        w.join(timeout=60)
        assert not w.is_alive(), f"{w.name} did not finish"
        assert not w.failures, f"{w.name}: {w.failures}"
    added = [rid for w in writers for rid in w.added]
    forgotten = {rid for w in writers for rid in w.forgotten} | set(victims)
    expected = sorted(set(added) - forgotten)

    def converged() -> bool:
        return all(sorted(view_ids(n.memory)) == expected for n in (a, b))

    wait_for(converged, "a and b to hold every acknowledged add, forgets applied", 45)
    assert "another machine uses the replica id" not in b.stderr()
    for node in (a, b):
        assert not duplicates(view_ids(node.memory))
        assert node.stop() == 0, node.stderr()
