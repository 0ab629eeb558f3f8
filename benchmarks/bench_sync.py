"""Syncing one new record of a 1,000,000-record memory over SSH, against rsync (the issue's
benchmark): "a 1,000,000-record memory already in sync; append one record; `memsync sync`
over SSH to the loopback sshd. Report bytes on the wire, bytes read from disk on each side,
and wall time, side by side in the same run with `rsync -a` (delta) and `rsync -a
--append-verify` over the same sshd on the same file. Target: under 4 KB on the wire, at
most 256 KiB read from either file, and faster than both."

    python benchmarks/bench_sync.py [--entries 1000000] [--runs 5] [--data benchmarks/data]

Needs sshd, ssh and rsync (`apt-get install -y openssh-server rsync`). The file is made
once with `shared/tools/genmem.py` and kept in `--data` (git-ignored); the rest lives in a
temporary directory removed at the end.

How it measures:
- one sshd on 127.0.0.1 (tests/sshd.py); every connection goes through a small relay on
  127.0.0.1 that counts the bytes in both directions: that is "on the wire" (SSH framing,
  key exchange and authentication included, for every tool alike);
- reads: `rchar` of /proc/<pid>/io, the bytes every read(2)-family call returned (page
  cache hits included; pipe and socket reads included). Server side: the sum over the
  sshd session processes and their children (internal-sftp runs inside the session;
  rsync runs `rsync --server` under it), polled every 2 ms while they live. Client side:
  rsync and its ssh child, polled the same way; memsync runs in a child that imports
  memsync and paramiko, reads its own /proc/self/io, runs `memsync.cli.main`, and reads
  it again, so Python's own start-up reads are left out (its wall time keeps them);
- wall time: the whole child process, interpreter start-up included for memsync;
- each of `--runs` rounds appends one new record (a line like genmem's) to the memsync
  replica's local file and to rsync's source file, then runs each tool once; medians.

memsync's side: replica "laptop" holds the memory; its hub is on the SSH host. Setup (the
initial cost, reported once): its first sync pushes the whole file; replica "desktop",
holding the same file, syncs once (it reads the hub file and merges nothing). Measured:
"laptop" syncs the new record; then "desktop" syncs, pulling it (a row of its own).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.sshd import SshdServer, start_sshd

GENMEM = Path(os.environ.get("MEMSYNC_SHARED") or ROOT.parent / "shared") / "tools" / "genmem.py"

TARGET_WIRE = 4000
TARGET_READ = 256 * 1024

# The memsync child: import everything first, then count only what the sync itself reads.
_WRAPPER = r"""
import json, os, sys
import apscheduler.triggers.cron, paramiko  # imported lazily by the CLI: not sync reads
import memsync.cli, memsync.hub.sync, memsync.hub.transports.ssh

def io():
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f.read().splitlines())}

before = io()
rc = memsync.cli.main(sys.argv[1:])
after = io()
with open(os.environ["BENCH_IO_OUT"], "w") as f:
    json.dump({k: after[k] - before[k] for k in before}, f)
sys.exit(rc)
"""


# --- the byte-counting relay ----------------------------------------------------------


class Relay:
    """A TCP relay 127.0.0.1:port -> 127.0.0.1:target that counts bytes both ways."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self.up = 0  # client -> server
        self.down = 0  # server -> client
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.up = self.down = 0

    @property
    def total(self) -> int:
        with self._lock:
            return self.up + self.down

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            done = threading.Barrier(2, action=_closer(client, server))
            threading.Thread(target=self._pump, args=(client, server, True, done)).start()
            threading.Thread(target=self._pump, args=(server, client, False, done)).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, up: bool, done: threading.Barrier
    ) -> None:
        try:
            while True:
                data = src.recv(1 << 18)
                if not data:
                    break
                dst.sendall(data)
                with self._lock:
                    if up:
                        self.up += len(data)
                    else:
                        self.down += len(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        done.wait()

    def close(self) -> None:
        self.listener.close()


def _closer(*sockets: socket.socket) -> Callable[[], None]:
    def close() -> None:
        for s in sockets:
            s.close()

    return close


# --- reads, from /proc ------------------------------------------------------------------


def proc_io(pid: int) -> dict[str, int] | None:
    return proc_io_path(f"/proc/{pid}/io")


def proc_io_path(path: str) -> dict[str, int] | None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return found


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    for child in children(pid):
        out += [child, *descendants(child)]
    return out


class IoPoller:
    """Poll /proc/<pid>/io of the processes `roots()` names until stopped; keep each
    process's last sample (a process that exited keeps what it had read by then)."""

    def __init__(self, roots: Callable[[], Iterable[int]]) -> None:
        self.roots = roots
        self.first: dict[int, dict[str, int]] = {}  # processes already alive: their start
        self.last: dict[int, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._sample()
        self.first = dict(self.last)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        for pid in self.roots():
            io = proc_io(pid)
            if io is not None:
                self.last[pid] = io

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.002)
        self._sample()

    def total(self, key: str = "rchar") -> int:
        """What the processes read while polled."""
        return sum(io[key] - self.first.get(pid, {}).get(key, 0) for pid, io in self.last.items())


def thread_io() -> dict[str, int]:
    """/proc io counters of the calling thread alone (not the pollers' reads of /proc)."""
    return proc_io_path(f"/proc/self/task/{threading.get_native_id()}/io") or {}


# --- measurements ------------------------------------------------------------------------


@dataclass
class Sample:
    wire: int
    client_read: int
    server_read: int
    seconds: float
    pass_seconds: float | None = None
    disk_read: int = 0  # read_bytes (from the block device) on both sides


@dataclass
class Row:
    name: str
    samples: list[Sample] = field(default_factory=list)

    def median(self, attr: str) -> float:
        values = [getattr(s, attr) for s in self.samples if getattr(s, attr) is not None]
        return statistics.median(values) if values else float("nan")


class Bench:
    def __init__(self, work: Path, server: SshdServer, relay: Relay) -> None:
        self.work = work
        self.server = server
        self.relay = relay
        self.known_hosts = work / "known_hosts_relay"
        public = server.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{relay.port} {public[0]} {public[1]}\n")
        self.ssh = (
            f"ssh -F /dev/null -p {relay.port} -i {server.client_key} -o IdentitiesOnly=yes"
            f" -o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes"
            " -o BatchMode=yes -o ControlMaster=no"
        )

    def server_roots(self) -> list[int]:
        return descendants(self.server.process.pid)

    def config(self, name: str, local: Path, hub: Path) -> Path:
        root = self.work / name
        root.mkdir(parents=True, exist_ok=True)
        url = f"ssh://{self.server.user}@127.0.0.1:{self.relay.port}{hub}"
        text = "\n".join(
            [
                f"state_dir = {json.dumps(str(root / 'state'))}",
                f"replica = {json.dumps(name)}",
                "[[memory]]",
                'name = "me"',
                f"path = {json.dumps(str(local))}",
                "[[remote]]",
                'name = "vm"',
                f"url = {json.dumps(url)}",
                f"identity_file = {json.dumps(str(self.server.client_key))}",
                f"known_hosts = {json.dumps(str(self.known_hosts))}",
            ]
        )
        path = root / "config.toml"
        path.write_text(text + "\n")
        return path

    def memsync_sync(self, config: Path) -> Sample:
        out = self.work / "io.json"
        env = dict(os.environ, BENCH_IO_OUT=str(out))
        argv = [sys.executable, "-c", _WRAPPER, "sync", "--json", "--config", str(config)]
        self.relay.reset()
        with IoPoller(self.server_roots) as server:
            started = time.perf_counter()
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - started
            time.sleep(0.05)  # the session's last reads, as it closes
        if proc.returncode != 0:
            sys.exit(f"memsync sync failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        reports = json.loads(proc.stdout)
        if any(r["error"] for r in reports):
            sys.exit(f"memsync sync reported an error: {reports}")
        client = json.loads(out.read_text())
        return Sample(
            wire=self.relay.total,
            client_read=client["rchar"],
            server_read=server.total(),
            seconds=seconds,
            pass_seconds=sum(r["seconds"] for r in reports),
            disk_read=client["read_bytes"] + server.total("read_bytes"),
        )

    def rsync(self, src: Path, dest: Path, *options: str) -> Sample:
        target = f"{self.server.user}@127.0.0.1:{dest}"
        argv = ["rsync", "-a", *options, "-e", self.ssh, str(src), target]
        self.relay.reset()
        with IoPoller(self.server_roots) as server:
            started = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            pid = proc.pid
            with IoPoller(lambda: [pid, *descendants(pid)]) as client:
                out, err = proc.communicate()
            seconds = time.perf_counter() - started
            time.sleep(0.05)
        if proc.returncode != 0:
            sys.exit(f"{argv}: exit {proc.returncode}\n{out.decode()}{err.decode()}")
        return Sample(
            wire=self.relay.total,
            client_read=client.total(),
            server_read=server.total(),
            seconds=seconds,
            disk_read=client.total("read_bytes") + server.total("read_bytes"),
        )

    def connection_only(self) -> tuple[Sample, Sample]:
        """An SSH connection doing (almost) nothing: paramiko (as memsync: key exchange,
        key auth, the SFTP subsystem, one lstat) and OpenSSH's ssh (as rsync: key
        exchange, key auth, `true`). Wire bytes and the server side's reads."""
        from memsync.hub.transports.ssh import SSHTransport

        self.relay.reset()
        with IoPoller(self.server_roots) as server:
            started = time.perf_counter()
            t = SSHTransport(
                "127.0.0.1",
                str(self.work / "hub"),
                port=self.relay.port,
                user=self.server.user,
                identity_file=self.server.client_key,
                known_hosts=self.known_hosts,
                ssh_config_path=self.work / "no-ssh-config",
            )
            t.list_files("no-such-memory")
            t.close()
            seconds = time.perf_counter() - started
            time.sleep(0.1)
        paramiko_only = Sample(self.relay.total, 0, server.total(), seconds)
        self.relay.reset()
        target = f"{self.server.user}@127.0.0.1"
        with IoPoller(self.server_roots) as server:
            started = time.perf_counter()
            subprocess.run([*self.ssh.split(), target, "true"], check=True, capture_output=True)
            seconds = time.perf_counter() - started
            time.sleep(0.1)
        return paramiko_only, Sample(self.relay.total, 0, server.total(), seconds)

    def open_connection_passes(self, config_path: Path, local: Path, runs: int) -> Row:
        """The daemon's case: one pass per new record on a connection kept open, in this
        process (client reads: this thread's own counters)."""
        from memsync.config import load_config
        from memsync.config.wiring import open_remote, sync_config

        config = load_config(config_path)
        transport = open_remote(config.remote[0])
        row = Row("memsync, a pass on an open connection (the daemon's case)")
        try:
            sync_config(config, transports={"vm": transport})  # connect; nothing new
            for n in range(runs):
                append(local, new_line(100 + n))
                self.relay.reset()
                with IoPoller(self.server_roots) as server:
                    before = thread_io()
                    started = time.perf_counter()
                    (report,) = sync_config(config, transports={"vm": transport})
                    seconds = time.perf_counter() - started
                    after = thread_io()
                    time.sleep(0.05)
                if report.error or report.pushed_records != 1:
                    sys.exit(f"open-connection pass: {report}")
                row.samples.append(
                    Sample(
                        self.relay.total,
                        after["rchar"] - before["rchar"],
                        server.total(),
                        seconds,
                        pass_seconds=report.seconds,
                    )
                )
        finally:
            transport.close()
        return row


def new_line(n: int) -> bytes:
    """One record like genmem's (about 250 bytes), dated now."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
    obj = {
        "id": secrets.token_hex(6),
        "kind": "lesson",
        "text": f"Benchmark run {n}: the staging bucket needs a user agent, retry after the "
        "rate limit, and ask before deleting files.",
        "scope": "project:memsync",
        "tags": ["bench"],
        "source": "session:bench",
        "confidence": 0.8,
        "expires_at": None,
        "supersedes": None,
        "created_at": stamp,
    }
    return json.dumps(obj).encode() + b"\n"


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def size(n: float) -> str:
    if math.isnan(n):
        return "-"
    if n < 10_000:
        return f"{n:,.0f} B"
    if n < 10 << 20:
        return f"{n / 1024:,.1f} KiB"
    return f"{n / (1 << 20):,.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=ROOT / "benchmarks" / "data")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    for tool in ("rsync", "ssh"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (apt-get install -y rsync openssh-client)")

    args.data.mkdir(parents=True, exist_ok=True)
    source = args.data / f"mem-{args.entries}.jsonl"  # the name bench_compact.py uses too
    if not source.exists():
        print(f"generating {source} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, str(GENMEM), str(source), "--entries", str(args.entries)], check=True
        )
    file_size = source.stat().st_size

    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    server = start_sshd(work / "sshd")
    relay = Relay(server.port)
    try:
        bench = Bench(work, server, relay)
        hub = work / "hub"
        hub.mkdir()
        laptop, desktop = work / "laptop.jsonl", work / "desktop.jsonl"
        rsync_src = work / "rsync-src.jsonl"
        rsync_delta, rsync_append = work / "remote-delta.jsonl", work / "remote-append.jsonl"
        print(f"copying {source.name} ({size(file_size)}) ...", file=sys.stderr)
        for copy in (laptop, desktop, rsync_src):
            shutil.copyfile(source, copy)
        for copy in (rsync_delta, rsync_append):
            shutil.copy2(source, copy)
        shutil.copystat(source, rsync_src)  # rsync's destinations start in sync
        config_laptop = bench.config("laptop", laptop, hub)
        config_desktop = bench.config("desktop", desktop, hub)

        print("initial sync of laptop (index build + push of the whole file) ...", file=sys.stderr)
        first = bench.memsync_sync(config_laptop)
        print("initial sync of desktop (index build + read of the hub file) ...", file=sys.stderr)
        first_peer = bench.memsync_sync(config_desktop)
        for config in (config_laptop, config_desktop):
            bench.memsync_sync(config)  # steady state: nothing new either way

        rows = {
            name: Row(name)
            for name in (
                "memsync sync (push the new record)",
                "memsync sync (the other replica pulls it)",
                "rsync -a (delta)",
                "rsync -a --append-verify",
            )
        }
        for n in range(args.runs):
            line = new_line(n)
            append(laptop, line)
            append(rsync_src, line)
            print(f"run {n + 1}/{args.runs} ...", file=sys.stderr)
            rows["memsync sync (push the new record)"].samples.append(
                bench.memsync_sync(config_laptop)
            )
            rows["memsync sync (the other replica pulls it)"].samples.append(
                bench.memsync_sync(config_desktop)
            )
            rows["rsync -a (delta)"].samples.append(bench.rsync(rsync_src, rsync_delta))
            rows["rsync -a --append-verify"].samples.append(
                bench.rsync(rsync_src, rsync_append, "--append-verify")
            )
        if rsync_delta.read_bytes()[-4096:] != laptop.read_bytes()[-4096:]:
            sys.exit("rsync's copy does not end like the source: the comparison is off")
        if desktop.stat().st_size != laptop.stat().st_size:
            sys.exit("desktop did not receive every new record")
        print("an open connection, and connections alone ...", file=sys.stderr)
        daemon = bench.open_connection_passes(config_laptop, laptop, args.runs)
        rows[daemon.name] = daemon
        baseline = bench.connection_only()
    finally:
        relay.close()
        server.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}", file=sys.stderr)

    push_wire = rows["memsync sync (push the new record)"].median("wire")
    print(
        f"## memsync sync vs rsync: one new record in a {args.entries:,}-record memory "
        f"({size(file_size)})\n"
    )
    print(
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}; loopback sshd; "
        f"medians of {args.runs} runs.\n"
    )
    print("| tool | on the wire | read, client side | read, server side | wall time |")
    print("|---|---:|---:|---:|---:|")
    for row in rows.values():
        wall = f"{row.median('seconds'):.2f} s"
        if row is daemon:
            wall = f"{row.median('seconds') * 1000:.0f} ms"
        if row.name.startswith("memsync") and row is not daemon:
            wall += f" (pass {row.median('pass_seconds') * 1000:.0f} ms)"
        print(
            f"| {row.name} | {size(row.median('wire'))} | {size(row.median('client_read'))} "
            f"| {size(row.median('server_read'))} | {wall} |"
        )
    print()
    print(
        f"Initial cost, once: laptop's first sync {first.seconds:.1f} s, "
        f"{size(first.wire)} on the wire; desktop's first sync (reads the hub file, merges "
        f"nothing) {first_peer.seconds:.1f} s, {size(first_peer.wire)} on the wire."
    )
    print()
    paramiko_only, openssh_only = baseline
    print(
        f"An SSH connection that does nothing costs {size(paramiko_only.wire)} on the wire "
        f"with paramiko (memsync's client: handshake, key auth, SFTP start, one lstat; "
        f"the server side reads {size(paramiko_only.server_read)} for it) and "
        f"{size(openssh_only.wire)} with OpenSSH's ssh running `true` (rsync's client; "
        f"server side reads {size(openssh_only.server_read)}). So memsync's own traffic "
        f"for the push is about {size(max(0.0, push_wire - paramiko_only.wire))}."
    )
    print()
    print(
        "Reads are `rchar` (bytes returned by read calls, page cache included, pipes and "
        "sockets included); memsync's client side leaves out Python's start-up; its wall "
        "time keeps it (pass: the sync pass itself, from its report). Block-device reads "
        f"(`read_bytes`), all runs and sides: "
        f"{size(sum(s.disk_read for r in rows.values() for s in r.samples))}."
    )
    push = rows["memsync sync (push the new record)"]
    fastest_rsync = min(rows[k].median("seconds") for k in rows if k.startswith("rsync"))
    verdict = {
        f"under {TARGET_WIRE} B on the wire": push_wire < TARGET_WIRE,
        f"under {TARGET_WIRE} B on the wire beyond the SSH connection itself": (
            push_wire - paramiko_only.wire < TARGET_WIRE
        ),
        f"under {TARGET_WIRE} B on the wire on an open connection": (
            rows[daemon.name].median("wire") < TARGET_WIRE
        ),
        "at most 256 KiB read on either side": max(
            push.median("client_read"), push.median("server_read")
        )
        <= TARGET_READ,
        "faster than both rsync runs": push.median("seconds") < fastest_rsync,
    }
    print()
    for what, ok in verdict.items():
        print(f"- {what}: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
