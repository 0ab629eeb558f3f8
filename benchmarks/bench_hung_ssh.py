"""A hung SSH hub (issue 13, item 15): do the daemon's other remotes keep syncing meanwhile?

    python benchmarks/bench_hung_ssh.py [--hang-seconds 90] [--every 3] [--timeout 30]

One `memsync daemon` with two remotes: "vm", an SSH hub on a real sshd on 127.0.0.1
(tests/sshd.py), and "hub", a folder. Once both are in sync, every sshd process (the listener
and each connection's processes) is stopped with SIGSTOP: TCP stays open and nothing answers,
as behind a dead VPN. During `--hang-seconds`, a record is added to the local file every
`--every` seconds (`Memory.add`, in this process) and timed until its line is in the folder
hub's file. The daemon runs under a fake systemd (`$NOTIFY_SOCKET`, `WATCHDOG_USEC` of 2 s):
the gaps between its WATCHDOG=1 pings are recorded, and when the status file says the SSH
remote failed, with what message. Then SIGCONT: the time until the last record reaches the
SSH hub.

`--timeout` is written as the SSH remote's `timeout_seconds` when the daemon knows that key
(`--timeout 0`: leave it out, for a tree that predates it; its built-in 30 s applies).
Printed: a markdown table (and, with BENCH_LOGS=1 in the environment, the daemon's log).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import contextlib
import itertools

from common import machine

from memsync.daemon.status import read_status
from memsync.local.memory import Memory
from memsync.local.statedir import StateDir
from tests.helpers.daemons import MEMORY, Cluster, Remote, wait_for
from tests.helpers.sshd import SshdServer, _descendants, start_sshd


def signal_sshd(server: SshdServer, signum: int) -> None:
    """`signum` to the listener and every process under it (sessions and their children)."""
    for pid in [server.process.pid, *_descendants(server.process.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def has_line(path: Path, text: str) -> bool:
    try:
        return text.encode() in path.read_bytes()
    except FileNotFoundError:
        return False


class Pings:
    """Collects the daemon's WATCHDOG=1 datagrams on a notify socket, in a thread."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(0.2)
        self.times: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                if self.sock.recv(4096) == b"WATCHDOG=1":
                    self.times.append(time.monotonic())
            except TimeoutError:
                pass

    def max_gap(self, start: float, end: float) -> float:
        inside = [start] + [t for t in self.times if start <= t <= end] + [end]
        return max(b - a for a, b in itertools.pairwise(inside))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hang-seconds", type=float, default=90.0)
    ap.add_argument("--every", type=float, default=3.0)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-hung-"))
    server = start_sshd(work / "sshd")
    cluster = Cluster(work / "nodes")
    cluster.root.mkdir()
    address = f"/tmp/memsync-bench-notify-{os.getpid()}.sock"
    pings = Pings(address)
    try:
        ssh_hub = work / "ssh-hub"
        ssh_hub.mkdir()
        vm = Remote(
            "vm",
            f"ssh://{server.user}@{server.host}:{server.port}{ssh_hub}",
            poll_seconds=1.0,
            identity_file=server.client_key,
            known_hosts=server.known_hosts,
        )
        hub = cluster.hub()
        env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000000"}
        a = cluster.node("a", [vm, Remote("hub", str(hub), poll_seconds=1.0)], env=env)
        a.reconcile_seconds = 300.0
        text = a.config_text()
        if args.timeout:  # the key goes in the first [[remote]] table: the SSH one
            url_line = f"url = {json.dumps(vm.url)}\n"
            text = text.replace(url_line, url_line + f"timeout_seconds = {args.timeout!r}\n")
        a.config.write_text(text)
        a.start()
        mem = Memory(a.memory)
        first = mem.add("fact", "before the hang").id
        wait_for(lambda: has_line(ssh_hub / MEMORY / "a.jsonl", first), "the SSH hub", 30)
        wait_for(lambda: has_line(hub / MEMORY / "a.jsonl", first), "the folder hub", 30)

        signal_sshd(server, signal.SIGSTOP)
        hang_start = time.monotonic()
        latencies: list[float] = []
        failed_after: float | None = None
        message = ""
        n = 0
        while time.monotonic() - hang_start < args.hang_seconds:
            n += 1
            rid = mem.add("fact", f"during the hang {n}").id
            t0 = time.monotonic()
            while not has_line(hub / MEMORY / "a.jsonl", rid):
                time.sleep(0.005)
            latencies.append(time.monotonic() - t0)
            if failed_after is None:
                st = read_status(StateDir(a.state))
                err = st.memories[MEMORY].remotes["vm"].last_error if st else None
                if err:
                    failed_after, message = time.monotonic() - hang_start, err
            time.sleep(max(0.0, args.every - (time.monotonic() - t0)))
        if failed_after is None:
            st = wait_for(
                lambda: (
                    (s := read_status(StateDir(a.state)))
                    and s.memories[MEMORY].remotes["vm"].last_error
                    and s
                ),
                "the SSH remote's failure in the status",
                120,
            )
            failed_after = time.monotonic() - hang_start
            message = st.memories[MEMORY].remotes["vm"].last_error or ""
        hang_end = time.monotonic()
        gap = pings.max_gap(hang_start, hang_end)
        signal_sshd(server, signal.SIGCONT)
        healed = time.monotonic()
        wait_for(lambda: has_line(ssh_hub / MEMORY / "a.jsonl", rid), "the SSH hub after", 400)
        heal = time.monotonic() - healed
        a.stop()

        lat = sorted(latencies)
        print(f"\n{machine()}\n")
        print(
            f"sshd stopped for {args.hang_seconds:g} s; {len(lat)} adds, one every {args.every:g} s\n"
        )
        print("| measure | value |\n|---|---:|")
        print(f"| add -> folder hub, median | {statistics.median(lat):.3f} s |")
        print(f"| add -> folder hub, max | {lat[-1]:.3f} s |")
        print(f"| adds that took over 1 s | {sum(x > 1 for x in lat)} of {len(lat)} |")
        print(f"| longest gap between WATCHDOG=1 pings (every 1 s) | {gap:.2f} s |")
        print(f"| the SSH remote's failure in the status after | {failed_after:.1f} s |")
        print(f"| SIGCONT -> the last record in the SSH hub | {heal:.1f} s |")
        print(f"\nstatus message: {message}")
    finally:
        pings.stop.set()
        Path(address).unlink(missing_ok=True)
        signal_sshd(server, signal.SIGCONT)
        if os.environ.get("BENCH_LOGS"):
            cluster.close()  # and print the daemon's log
        else:
            for node in cluster.nodes:
                node.kill()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
