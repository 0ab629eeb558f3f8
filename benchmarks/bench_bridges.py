"""Bridges end to end (issue 22, item 5): how long a memory Claude Code's auto memory
writes on machine A takes to reach machine B's `AGENTS.md` block and B's auto-memory
folder, through a folder hub.

    python benchmarks/bench_bridges.py [--memories 50] [--debounce-ms 200]

Two `memsync daemon` processes (replicas "a" and "b"), each with a git repository, a
Claude Code project folder for it (a session transcript naming the repository, an empty
`memory/` folder), and two bridges: the repository's `AGENTS.md` (agents-md) and the
project (claude-auto-memory); one folder hub in a temporary directory. Settings are the
defaults of config.example.toml unless given (debounce_ms 200, log_level "warning").

For each memory, one at a time: the clock starts just before a memory file is written
into A's auto-memory folder the way Claude writes one (frontmatter `name`, `description`,
`type`, then the text), and stops when its text is both in B's `AGENTS.md` and in a
`memsync_*.md` file of B's auto-memory folder (polled every millisecond or so).

Goal (the issue): p50 under 1 s. Printed: a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine

MEMORY = "m"


def setup(root: Path, name: str, hub: Path, debounce_ms: int) -> tuple[Path, Path, Path]:
    """A machine: returns its config, its AGENTS.md and its auto-memory folder."""
    home = root / name
    repo = home / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    agents = repo / "AGENTS.md"
    agents.write_text("# Project\n\nRun the linter before committing.\n")
    project = home / "home" / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(repo))
    (project / "memory").mkdir(parents=True)
    (project / "s.jsonl").write_text(json.dumps({"type": "user", "cwd": str(repo)}) + "\n")
    config = home / "config.toml"
    config.write_text(
        f"state_dir = {json.dumps(str(home / 'state'))}\nreplica = {json.dumps(name)}\n\n"
        f"[[memory]]\nname = {json.dumps(MEMORY)}\n"
        f"path = {json.dumps(str(home / 'm.jsonl'))}\n\n"
        f'[[remote]]\nname = "hub"\nurl = {json.dumps(str(hub))}\n\n'
        f'[[bridge]]\nmemory = "m"\npath = {json.dumps(str(agents))}\nformat = "agents-md"\n\n'
        f'[[bridge]]\nmemory = "m"\npath = {json.dumps(str(repo))}\n'
        'format = "claude-auto-memory"\n\n'
        f'[daemon]\ndebounce_ms = {debounce_ms}\nlog_level = "warning"\n'
    )
    return config, agents, project / "memory"


def start(config: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    env["HOME"] = str(config.parent / "home")
    with (config.parent / "daemon.log").open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "memsync", "daemon", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )


def arrived(text: str, agents: Path, folder: Path) -> bool:
    if text not in agents.read_text():
        return False
    return any(text in p.read_text() for p in folder.glob("memsync_*.md"))


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=50)
    parser.add_argument("--debounce-ms", type=int, default=200)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="memsync-bench-bridges-"))
    procs = []
    try:
        hub = root / "hub"
        hub.mkdir()
        a_config, _, a_folder = setup(root, "a", hub, args.debounce_ms)
        b_config, b_agents, b_folder = setup(root, "b", hub, args.debounce_ms)
        procs = [start(a_config), start(b_config)]
        time.sleep(3)  # both up and watching
        times = []
        for n in range(args.memories):
            text = f"Benchmark memory number {n} of this run."
            body = f"---\nname: M{n}\ndescription: {text}\ntype: project\n---\n\n{text}\n"
            t0 = time.perf_counter()
            (a_folder / f"project_bench_{n}.md").write_text(body)
            deadline = t0 + 60
            while not arrived(text, b_agents, b_folder):
                if time.perf_counter() > deadline:
                    raise SystemExit(f"memory {n} did not arrive in 60 s; see {root}/*/daemon.log")
                time.sleep(0.001)
            times.append(time.perf_counter() - t0)
        print(f"machine: {machine()}")
        print("| measure | n | p50 | p99 |")
        print("|---|---|---|---|")
        print(
            f"| Claude memory on A -> B's AGENTS.md block and auto-memory folder | "
            f"{len(times)} | {pct(times, 50) * 1000:.0f} ms | {pct(times, 99) * 1000:.0f} ms |"
        )
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
