"""The daemon end to end: how long an append on machine A takes to reach machine B's file
through a shared folder, and what an idle daemon costs.

    python benchmarks/bench_daemon.py [--appends 200] [--idle-seconds 60]
        [--debounce-ms 200] [--poll-seconds 30] [--reconcile-seconds 300]

Two `memsync daemon` processes (replicas "a" and "b"), each with its own config, state
directory and local file, share one folder hub in a temporary directory. Settings are the
defaults of config.example.toml unless given: debounce_ms 200, poll_seconds 30,
reconcile_seconds 300, log_level "warning" (a log line per pass is not what is measured).

- latency (CLI): `memsync add A.jsonl ...` run as a process, one at a time; the clock starts
  just before the process is started and stops when the new line is in B's local file (A's
  and B's files are read incrementally every millisecond or so). CLI start-up is part of
  it: the time until the line is in A's file is shown as well, and the rest, the daemons'.
- latency (API): the same with `Memory(A).add(...)` in this process.
- idle CPU: utime + stime of each daemon (/proc/<pid>/stat) before and after
  `--idle-seconds` with nothing to do, after a few seconds to settle.

Targets (the issue): p50 under 500 ms and p99 under 1.5 s for the CLI; idle CPU close to 0.
Printed: a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import machine

from memsync.local.memory import Memory

MEMORY = "m"


@dataclass
class Daemon:
    name: str
    config: Path
    memory: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None


def write_config(root: Path, name: str, hub: Path, args: argparse.Namespace) -> Daemon:
    home = root / name
    home.mkdir(parents=True)
    memory = home / f"{MEMORY}.jsonl"
    config = home / "config.toml"
    config.write_text(
        f"state_dir = {json.dumps(str(home / 'state'))}\n"
        f"replica = {json.dumps(name)}\n\n"
        f"[[memory]]\nname = {json.dumps(MEMORY)}\npath = {json.dumps(str(memory))}\n\n"
        f'[[remote]]\nname = "hub"\nurl = {json.dumps(str(hub))}\n'
        f"poll_seconds = {args.poll_seconds!r}\n\n"
        f'[daemon]\ndebounce_ms = {args.debounce_ms}\nlog_level = "warning"\n'
        f"reconcile_seconds = {args.reconcile_seconds!r}\n"
    )
    Memory.open(memory)
    return Daemon(name, config, memory, home / "daemon.log")


def start(d: Daemon) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    with d.log.open("ab") as err:
        d.proc = subprocess.Popen(
            [sys.executable, "-m", "memsync", "daemon", "--config", str(d.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )


def wait_up(d: Daemon, timeout: float = 30) -> None:
    status = d.config.parent / "state" / "status.json"
    assert d.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if d.proc.poll() is not None:
            sys.exit(f"daemon {d.name} exited: {d.log.read_text()}")
        try:
            if json.loads(status.read_bytes())["pid"] == d.proc.pid:
                return
        except (FileNotFoundError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    sys.exit(f"daemon {d.name} did not start: {d.log.read_text()}")


class Tail:
    """Reads a file's new bytes as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size
        self.pending = b""

    def seen(self, needle: bytes) -> bool:
        """Whether `needle` is in the bytes that came since the last time it was seen."""
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        if data:
            self.offset += len(data)
            self.pending += data
        if needle in self.pending:
            self.pending = self.pending[self.pending.index(needle) + len(needle) :]
            return True
        self.pending = self.pending[-4096:]
        return False


def arrival(needle: bytes, *tails: Tail, timeout: float = 30) -> list[float]:
    """The perf_counter() at which `needle` was first seen in each file (polled each ms)."""
    found: dict[int, float] = {}
    deadline = time.perf_counter() + timeout
    while len(found) < len(tails):
        for i, tail in enumerate(tails):
            if i not in found and tail.seen(needle):
                found[i] = time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{needle!r} never reached {[t.path for t in tails]}")
        time.sleep(0.001)
    return [found[i] for i in range(len(tails))]


def latency_cli(a: Daemon, b: Daemon, n: int) -> tuple[list[float], list[float]]:
    """(to B's file, to A's file) in seconds, for `n` `memsync add` processes."""
    tail_a, tail_b = Tail(a.memory), Tail(b.memory)
    total, local = [], []
    for i in range(n):
        text = f"bench cli entry {i} {os.urandom(4).hex()}"
        argv = [sys.executable, "-m", "memsync", "add", str(a.memory), "--kind", "fact"]
        started = time.perf_counter()
        proc = subprocess.Popen([*argv, "--text", text], stdout=subprocess.DEVNULL)
        in_a, in_b = arrival(json.dumps(text).encode(), tail_a, tail_b)
        if proc.wait() != 0:
            sys.exit(f"memsync add exited {proc.returncode}")
        total.append(in_b - started)
        local.append(in_a - started)
    return total, local


def latency_api(a: Daemon, b: Daemon, n: int) -> list[float]:
    tail = Tail(b.memory)
    mem = Memory(a.memory)
    out = []
    for i in range(n):
        text = f"bench api entry {i} {os.urandom(4).hex()}"
        started = time.perf_counter()
        mem.add("fact", text)
        [in_b] = arrival(json.dumps(text).encode(), tail)
        out.append(in_b - started)
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--debounce-ms", type=int, default=200)
    parser.add_argument("--poll-seconds", type=float, default=30.0)
    parser.add_argument("--reconcile-seconds", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="memsync-bench-daemon-"))
    hub = root / "hub"
    hub.mkdir()
    a, b = (write_config(root, name, hub, args) for name in ("a", "b"))
    try:
        for d in (a, b):
            start(d)
        for d in (a, b):
            wait_up(d)
        time.sleep(1.0)  # the first passes of both daemons

        print(f"{args.appends} appends through `memsync add` ...", file=sys.stderr)
        cli_total, cli_local = latency_cli(a, b, args.appends)
        print(f"{args.appends} appends through Memory.add ...", file=sys.stderr)
        api_total = latency_api(a, b, args.appends)

        time.sleep(3.0)  # settle: the last passes, watcher debounce
        assert a.proc is not None
        assert b.proc is not None
        print(f"{args.idle_seconds:g} idle seconds ...", file=sys.stderr)
        before = {d.name: cpu_seconds(d.proc.pid) for d in (a, b) if d.proc is not None}
        time.sleep(args.idle_seconds)
        idle = {
            d.name: cpu_seconds(d.proc.pid) - before[d.name] for d in (a, b) if d.proc is not None
        }
        lines_b = sum(1 for _ in b.memory.open("rb"))
    finally:
        for d in (a, b):
            if d.proc is not None and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGTERM)
                try:
                    d.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    d.proc.kill()
                    d.proc.wait()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    n = args.appends
    print()
    print(f"command: `python {' '.join(sys.argv)}`")
    print(
        f"input: two daemons (a, b) sharing a folder hub on local disk; debounce_ms "
        f"{args.debounce_ms}, poll_seconds {args.poll_seconds:g}, reconcile_seconds "
        f"{args.reconcile_seconds:g}; {n} appends each way of measuring, one at a time "
        f"(B's file: {lines_b} lines at the end)"
    )
    print(f"machine: {machine()}")
    print()
    print("| measure | p50 | p99 | max | target |")
    print("|---|---:|---:|---:|---|")
    print(
        f"| `memsync add` on A -> line in B's file ({n}) | {ms(pct(cli_total, 50))} | "
        f"{ms(pct(cli_total, 99))} | {ms(max(cli_total))} | p50 < 500 ms, p99 < 1.5 s |"
    )
    print(
        f"| of which `memsync add` until the line is in A's file (CLI start-up, append) | "
        f"{ms(pct(cli_local, 50))} | {ms(pct(cli_local, 99))} | {ms(max(cli_local))} | |"
    )
    sync = [t - loc for t, loc in zip(cli_total, cli_local, strict=True)]
    print(
        f"| of which A's file -> B's file (the daemons: watch, push, watch, pull, merge) | "
        f"{ms(pct(sync, 50))} | {ms(pct(sync, 99))} | {ms(max(sync))} | |"
    )
    print(
        f"| `Memory.add` on A (in-process) -> line in B's file ({n}) | "
        f"{ms(pct(api_total, 50))} | {ms(pct(api_total, 99))} | {ms(max(api_total))} | |"
    )
    print()
    print("| idle daemon | CPU seconds | share of one core | target |")
    print("|---|---:|---:|---|")
    for name, used in idle.items():
        print(
            f"| {name}, {args.idle_seconds:g} s idle, one folder remote | {used:.2f} s | "
            f"{100 * used / args.idle_seconds:.2f} % | close to 0 |"
        )


if __name__ == "__main__":
    main()
