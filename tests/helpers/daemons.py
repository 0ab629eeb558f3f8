"""Helpers for tests that run real daemons: `Cluster` makes nodes (each with its own
config, state directory and local file) under one directory and kills whatever is still
running at teardown, printing the daemons' logs (pytest shows them on failure); `Node`
starts, stops and reads one daemon; `wait_for` polls with a deadline instead of sleeping.

Nothing of memsync is mocked: every daemon is `python -m memsync daemon --config CFG`.
The `cluster` fixture (tests/conftest.py) hands a test a `Cluster`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from memsync.core.lines import Header, classify
from memsync.core.records import Record
from memsync.daemon.status import DaemonStatus, read_status
from memsync.local.reading import view_of
from memsync.local.statedir import StateDir

T = TypeVar("T")

MEMORY = "m"
"""The memory's name in every config here (its hub folder is `<hub>/m/`)."""

ENV_DROPPED = (
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "JOURNAL_STREAM",
    "MEMSYNC_CONFIG",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
)


# --- waiting --------------------------------------------------------------------------------


def wait_for(
    check: Callable[[], T | None], what: str, timeout: float = 20.0, interval: float = 0.05
) -> T:
    """Call `check` until it returns something true; return that. Fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# --- files and views ------------------------------------------------------------------------


def view_ids(*paths: Path) -> list[str]:
    """The ids of the live records of the view of `paths` together (library, in-process)."""
    existing = [p for p in paths if p.exists()]
    return [r.id for r in view_of(existing).records] if existing else []


def record_lines(path: Path) -> list[bytes]:
    """The valid record lines of a file, as written (headers, blanks and bad lines left out)."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_bytes().split(b"\n"):
        if raw.strip() and isinstance(classify(raw), Record):
            out.append(raw)
    return out


def header_of(path: Path) -> Header:
    first = path.read_bytes().split(b"\n", 1)[0]
    parsed = classify(first)
    assert isinstance(parsed, Header), f"{path}: first line is not a header: {first!r}"
    return parsed


def duplicates(items: Sequence[T]) -> list[T]:
    return [item for item, n in Counter(items).items() if n > 1]


def memsync(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line (`python -m memsync ...`) to completion."""
    return subprocess.run(
        [sys.executable, "-m", "memsync", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=None if env is None else dict(env),
        check=False,
    )


def cli_add(path: Path, text: str) -> str:
    """`memsync add PATH --kind fact --text TEXT`; return the new id it prints."""
    done = memsync("add", str(path), "--kind", "fact", "--text", text)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def cli_show_ids(path: Path) -> list[str]:
    """The ids `memsync show --json PATH` prints."""
    done = memsync("show", "--json", str(path))
    assert done.returncode == 0, done.stderr
    return [obj["id"] for obj in json.loads(done.stdout)]


# --- daemons --------------------------------------------------------------------------------


@dataclass
class Remote:
    """A `[[remote]]` table."""

    name: str
    url: str
    poll_seconds: float = 0.5
    identity_file: Path | None = None
    known_hosts: Path | None = None

    def toml(self) -> str:
        lines = ["[[remote]]", f"name = {json.dumps(self.name)}", f"url = {json.dumps(self.url)}"]
        lines.append(f"poll_seconds = {self.poll_seconds!r}")
        if self.identity_file is not None:
            lines.append(f"identity_file = {json.dumps(str(self.identity_file))}")
        if self.known_hosts is not None:
            lines.append(f"known_hosts = {json.dumps(str(self.known_hosts))}")
        return "\n".join(lines) + "\n"


@dataclass
class Node:
    """One "machine": its config file, state directory, local memory file and daemon."""

    root: Path
    replica: str
    remotes: list[Remote]
    debounce_ms: int = 50
    reconcile_seconds: float = 5.0
    log_level: str = "info"
    schedule: str = "17 3 * * *"
    quiet_seconds: float = 60.0
    max_postpone_seconds: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def config(self) -> Path:
        return self.root / "config.toml"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def memory(self) -> Path:
        return self.root / "agent-memory" / f"{MEMORY}.jsonl"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def config_text(self) -> str:
        text = (
            f"state_dir = {json.dumps(str(self.state))}\n"
            f"replica = {json.dumps(self.replica)}\n\n"
            "[[memory]]\n"
            f"name = {json.dumps(MEMORY)}\n"
            f"path = {json.dumps(str(self.memory))}\n\n"
        )
        text += "\n".join(r.toml() for r in self.remotes)
        text += (
            "\n[daemon]\n"
            f"debounce_ms = {self.debounce_ms}\n"
            f"log_level = {json.dumps(self.log_level)}\n"
            f"reconcile_seconds = {self.reconcile_seconds!r}\n\n"
            "[compaction]\n"
            f"schedule = {json.dumps(self.schedule)}\n"
            f"quiet_seconds = {self.quiet_seconds!r}\n"
        )
        if self.max_postpone_seconds is not None:
            text += f"max_postpone_seconds = {self.max_postpone_seconds!r}\n"
        return text

    def write_config(self) -> None:
        self.config.write_text(self.config_text())

    def daemon_env(self) -> dict[str, str]:
        """The environment of the daemon: HOME in the node (no ~/.ssh/config of the person
        running the tests), no systemd variables unless the test sets them."""
        env = {k: v for k, v in os.environ.items() if k not in ENV_DROPPED}
        env["HOME"] = str(self.home)
        env.update(self.env)
        return env

    def start(self, *, wait: bool = True) -> subprocess.Popen[bytes]:
        """Start the daemon (its stderr appended to `log`); with `wait`, until it is up."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.config.exists():
            self.write_config()
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memsync", "daemon", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=self.daemon_env(),
            )
        self.starts += 1
        if wait:
            self.wait_up()
        return self.proc

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def status(self) -> DaemonStatus | None:
        return read_status(StateDir(self.state))

    def wait_up(self, timeout: float = 20.0) -> DaemonStatus:
        """Until the daemon has written its first status (it is watching and scheduled)."""
        proc = self.proc
        assert proc is not None

        def up() -> DaemonStatus | None:
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited with {proc.returncode}:\n{self.stderr()}")
            st = self.status()
            return st if st is not None and st.pid == proc.pid else None

        return wait_for(up, f"daemon {self.replica} to start", timeout)

    def send(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Send `signum` and wait for the exit; return the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL (if still running) and reap."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def hub_file(self, hub: Path) -> Path:
        return hub / MEMORY / f"{self.replica}.jsonl"


class Cluster:
    """Makes nodes under one directory; kills every daemon still running at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: list[Node] = []

    def hub(self, name: str = "hub") -> Path:
        path = self.root / name
        path.mkdir(exist_ok=True)
        return path

    def node(self, replica: str, remotes: Sequence[Remote], **options: Any) -> Node:
        node = Node(self.root / replica, replica, list(remotes), **options)
        node.root.mkdir(parents=True)
        self.nodes.append(node)
        return node

    def folder_node(self, replica: str, hub: Path, **options: Any) -> Node:
        return self.node(replica, [Remote("hub", str(hub))], **options)

    def close(self) -> None:
        for node in self.nodes:
            node.kill()
        for node in self.nodes:
            print(f"----- daemon {node.replica} ({node.starts} start(s)) -----\n{node.stderr()}")


def start_all(*nodes: Node) -> None:
    """Start daemons side by side (their start-ups overlap), then wait for each."""
    for node in nodes:
        node.start(wait=False)
    for node in nodes:
        node.wait_up()
