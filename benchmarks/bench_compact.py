"""Compaction of a 1,000,000-record file, against merging the same file (the issue's bar:
"no slower than merging the same file").

    python benchmarks/bench_compact.py [--entries 1000000] [--runs 3] [--data benchmarks/data]

The file is made once with `shared/tools/genmem.py` (deterministic; reused when present).
Each run works on a fresh copy, in a child process (`python -m memsync ...`) so that peak
RSS is that process's alone (`os.wait4`). Printed: a markdown table of medians.

- compact: `memsync compact COPY --quiet-seconds 0 --grace-seconds 0 --now NOW --json`
- merge into empty: `memsync merge FILE --into EMPTY --no-index` (reads and writes it all)
- merge into a copy: `memsync merge FILE --into COPY --no-index` (reads both, appends none)
- indexed merge into empty: `memsync merge FILE --into EMPTY` with a fresh state directory
  (builds the persistent index as well)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOW = "2026-12-01T00:00:00Z"
"""The compaction's `now` (genmem's records span 2026-01 to 2026-06): a fixed instant, so
that every run drops the same tombstones (those older than 90 days)."""
GENMEM = Path(os.environ.get("MEMSYNC_SHARED") or ROOT.parent / "shared") / "tools" / "genmem.py"


@dataclass
class Run:
    seconds: float
    rss_mb: float
    output: str


def run(argv: list[str], env: dict[str, str] | None = None) -> Run:
    """Run a child to completion; its wall time and its own peak RSS."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    assert proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    proc.stderr.close()
    if proc.returncode != 0:
        sys.exit(f"{argv}: exit {proc.returncode}\n{err.decode()}")
    return Run(seconds, usage.ru_maxrss / 1024, out.decode())


def memsync(*args: str) -> list[str]:
    return [sys.executable, "-m", "memsync", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT / "benchmarks" / "data")
    args = parser.parse_args()

    args.data.mkdir(parents=True, exist_ok=True)
    source = args.data / f"mem-{args.entries}.jsonl"
    if not source.exists():
        print(f"generating {source} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, str(GENMEM), str(source), "--entries", str(args.entries)], check=True
        )
    size = source.stat().st_size

    results: dict[str, list[Run]] = {}
    compacted: dict[str, object] = {}
    with tempfile.TemporaryDirectory(dir=args.data) as tmp:
        work = Path(tmp)
        for i in range(args.runs):
            copy = work / "copy.jsonl"
            shutil.copyfile(source, copy)
            copy.chmod(0o600)
            r = run(
                memsync(
                    "compact",
                    str(copy),
                    "--quiet-seconds",
                    "0",
                    "--grace-seconds",
                    "0",
                    "--now",
                    NOW,
                    "--json",
                )
            )
            compacted = json.loads(r.output)
            results.setdefault("compact", []).append(r)
            copy.unlink()

            empty = work / "empty.jsonl"
            r = run(memsync("merge", str(source), "--into", str(empty), "--no-index"))
            results.setdefault("merge into an empty file", []).append(r)
            empty.unlink()

            shutil.copyfile(source, copy)
            r = run(memsync("merge", str(source), "--into", str(copy), "--no-index"))
            results.setdefault("merge into a copy of itself", []).append(r)
            copy.unlink()

            state = work / f"state-{i}"
            env = dict(os.environ, XDG_STATE_HOME=str(state))
            r = run(memsync("merge", str(source), "--into", str(empty)), env=env)
            results.setdefault("merge into an empty file, indexed", []).append(r)
            empty.unlink()
            shutil.rmtree(state)
            print(f"run {i + 1}/{args.runs} done", file=sys.stderr)

    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; file: {args.entries:,} records, {size / 1e6:.0f} MB "
        f"({source.name}); medians of {args.runs} runs, each in a fresh child process.\n"
    )
    print("| operation | wall time (s) | peak RSS (MB) |")
    print("|---|---:|---:|")
    for name, runs in results.items():
        secs = statistics.median(r.seconds for r in runs)
        rss = statistics.median(r.rss_mb for r in runs)
        spread = f"{min(r.seconds for r in runs):.1f}-{max(r.seconds for r in runs):.1f}"
        print(f"| {name} | {secs:.1f} ({spread}) | {rss:.0f} |")
    dropped = compacted.get("dropped", {})
    print(
        f"\nCompaction: {compacted.get('size_before', 0) / 1e6:.1f} MB -> "
        f"{compacted.get('size_after', 0) / 1e6:.1f} MB, {compacted.get('lines_before', 0):,} -> "
        f"{compacted.get('lines_after', 0):,} lines; dropped: {json.dumps(dropped)}; "
        f"pinned tombstones: {compacted.get('pinned', 0)}"
    )


if __name__ == "__main__":
    main()
