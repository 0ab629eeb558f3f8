"""Shared helpers for the benchmarks: generated inputs (cached), timing with peak RSS."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
GENMEM = Path(os.environ.get("MEMSYNC_SHARED", ROOT.parent / "shared")) / "tools" / "genmem.py"


def generated(name: str, *args: str) -> Path:
    """A file made by genmem.py with `args`, cached under benchmarks/data/ (git-ignored)."""
    DATA.mkdir(parents=True, exist_ok=True)
    out = DATA / name
    marker = DATA / (name + ".done")
    if not marker.exists():
        subprocess.run([sys.executable, str(GENMEM), str(out), *args], check=True)
        marker.touch()
    return out


def records(label: str) -> int:
    """The record count of a size label: `1k` is 1,000, `1M` is 1,000,000 (`k`, `M` or none)."""
    scale = {"k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}.get(label[-1:], 1)
    return int(label[:-1] if scale != 1 else label) * scale


def memory(label: str) -> Path:
    """genmem.py's memory of `label` records (`1k`, `100k`, `1M`...), cached as
    benchmarks/data/m<label>.jsonl (`m1k.jsonl`, `m100k.jsonl`, `m1m.jsonl`)."""
    return generated(f"m{label.lower()}.jsonl", "--entries", str(records(label)))


def sizes(text: str) -> list[str]:
    """A `--sizes` option's comma-separated labels, checked (`1k,10k,100k,1M`)."""
    labels = [s.strip() for s in text.split(",") if s.strip()]
    for label in labels:
        records(label)  # a ValueError for anything else
    return labels


@dataclass
class Run:
    seconds: float
    rss_mb: float


def timed(cmd: list[str], *, stdout: int | None = subprocess.DEVNULL, shell: bool = False) -> Run:
    """Wall time and peak RSS of one command (GNU time's %M, in KB)."""
    full = ["/usr/bin/time", "-f", "%e %M", *cmd] if not shell else cmd
    started = time.perf_counter()
    proc = subprocess.run(full, stdout=stdout, stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd}: exit {proc.returncode}: {proc.stderr[-500:]}")
    last = proc.stderr.strip().splitlines()[-1].split()
    return Run(elapsed, int(last[1]) / 1024)


def until_gone(argv: list[str]) -> None:
    """Wait while a process runs `argv`: a command's detached fork, which has the command's
    own command line (the store's writer, `ViewStore.detach_from`). Linux's /proc."""
    wanted = "\0".join(argv) + "\0"
    while True:
        for entry in os.scandir("/proc"):
            try:
                if entry.name.isdigit() and Path(entry.path, "cmdline").read_text() == wanted:
                    break
            except OSError:
                continue  # gone meanwhile
        else:
            return
        time.sleep(0.01)


def median(runs: list[Run]) -> Run:
    return Run(
        statistics.median(r.seconds for r in runs), statistics.median(r.rss_mb for r in runs)
    )


def machine() -> str:
    cpus = os.cpu_count()
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0]
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {cpus} cores "
        f"({model}), Python {platform.python_version()}; shared and noisy (load average "
        f"{load:.2f} now)"
    )
