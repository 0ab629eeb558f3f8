"""The real-process fault campaign (issue 13), short enough for CI: three `memsync daemon`
processes over one folder hub, concurrent `memsync add` and `memsync forget` writers on
every machine, one daemon killed with SIGKILL mid-way and restarted while the writers go
on. At the end every file converges, and every acknowledged add (a `memsync add` that
exited 0 and printed its id) is in every view exactly once, unless it was forgotten.

Nothing is mocked: real daemons, real command-line writers, a real folder hub. The
helpers are test_daemon.py's (`Cluster`, `wait_for`, ...).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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
from tests.helpers.sshd import SshdServer, kill_sessions

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
