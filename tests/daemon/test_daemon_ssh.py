"""Two `memsync daemon` processes syncing through a hub on a real OpenSSH server (SFTP on
127.0.0.1, `tests/sshd.py`): a known_hosts file and an identity file in each config, no
~/.ssh of the person running the tests. Never skipped under CI=true."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsync.daemon.status import DaemonStatus
from tests.helpers.daemons import (
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
from tests.helpers.sshd import SshdServer, _descendants, kill_sessions, start_sshd

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


@dataclass
class _SshRemote(Remote):
    timeout_seconds: float | None = None

    def toml(self) -> str:
        text = super().toml()
        if self.timeout_seconds is not None:
            text += f"timeout_seconds = {self.timeout_seconds!r}\n"
        return text


def _ssh_remote(server: SshdServer, hub: Path, timeout: float | None = None) -> Remote:
    return _SshRemote(
        "vm",
        f"ssh://{server.user}@{server.host}:{server.port}{hub}",
        poll_seconds=0.5,
        identity_file=server.client_key,
        known_hosts=server.known_hosts,
        timeout_seconds=timeout,
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


def _signal_sshd(server: SshdServer, signum: int) -> None:
    """`signum` to the listener and every session process under it."""
    for pid in [server.process.pid, *_descendants(server.process.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


class _Pings:
    """The WATCHDOG=1 datagrams a daemon sends to a notify socket, timed, in a thread."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(0.1)
        self.times: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                if self.sock.recv(4096) == b"WATCHDOG=1":
                    self.times.append(time.monotonic())
            except TimeoutError:
                pass

    def longest_gap(self, start: float, end: float) -> float:
        inside = [start, *(t for t in self.times if start <= t <= end), end]
        return max(b - a for a, b in itertools.pairwise(inside))

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        self.sock.close()


def test_a_hung_ssh_hub_fails_within_its_timeout_and_holds_up_nothing_else(
    sshd: SshdServer, ssh_cluster: Cluster, tmp_path: Path
) -> None:
    """issue 13, item 15: the SSH server stops answering with TCP still open (every sshd
    process stopped: a dead VPN, a frozen host). With `timeout_seconds = 4`, its pass fails
    within that bound with a one-line message saying so; meanwhile every record added goes
    on reaching the other machine through the folder hub at once, the systemd watchdog goes
    on being fed, and the daemon stops within 5 s. Healed, the SSH hub catches up."""
    timeout = 4.0
    ssh_hub = tmp_path / "hub-on-the-server"
    ssh_hub.mkdir()
    hub = ssh_cluster.hub()
    address = f"/tmp/memsync-test-{os.getpid()}-{time.monotonic_ns()}.sock"
    pings = _Pings(address)
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000000"}  # a ping every second
    a = ssh_cluster.node(
        "a", [_ssh_remote(sshd, ssh_hub, timeout), Remote("hub", str(hub))], env=env
    )
    b = ssh_cluster.folder_node("b", hub)
    try:
        start_all(a, b)
        first = cli_add(a.memory, "before the hang")
        wait_for(lambda: first in view_ids(b.memory), "the first add in B's view")
        wait_for(lambda: first.encode() in _bytes(ssh_hub / MEMORY / "a.jsonl"), "the SSH hub")

        _signal_sshd(sshd, signal.SIGSTOP)
        hung_at = time.monotonic()
        added: list[str] = []
        while time.monotonic() - hung_at < 2.5 * timeout:
            rid = cli_add(a.memory, f"during the hang {len(added)}")
            t0 = time.monotonic()
            wait_for(functools.partial(_in_view, rid, b.memory), "an add through the folder hub")
            assert time.monotonic() - t0 < 2.0, "the folder hub waited for the SSH one"
            added.append(rid)
            time.sleep(0.5)
        assert len(added) >= 5

        def failing() -> DaemonStatus | None:
            st = a.status()
            return st if st is not None and st.memories[MEMORY].remotes["vm"].last_error else None

        st = wait_for(failing, "the SSH remote's failure in the status", timeout=2 * timeout)
        error = st.memories[MEMORY].remotes["vm"].last_error
        assert error is not None
        assert "\n" not in error
        assert error.endswith("(the server or the network hangs)"), error
        assert "no answer within 4 s" in error or "no SSH handshake within 4 s" in error
        failed = [ln for ln in a.stderr().splitlines() if "<-> vm: failing: " in ln]
        assert len(failed) == 1, a.stderr()
        assert "Traceback" not in a.stderr()
        assert pings.longest_gap(hung_at, time.monotonic()) < 2.0, "the watchdog would fire"

        started = time.monotonic()
        assert a.stop(timeout=10) == 0
        assert time.monotonic() - started < 5.0

        _signal_sshd(sshd, signal.SIGCONT)
        a.start()
        last = added[-1]
        wait_for(
            lambda: last.encode() in _bytes(ssh_hub / MEMORY / "a.jsonl"),
            "the SSH hub to catch up once healed",
            timeout=30,
        )
        assert a.stop() == 0
        assert b.stop() == 0
    finally:
        _signal_sshd(sshd, signal.SIGCONT)
        pings.close()
        Path(address).unlink(missing_ok=True)


def _in_view(rid: str, path: Path) -> bool:
    return rid in view_ids(path)


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
