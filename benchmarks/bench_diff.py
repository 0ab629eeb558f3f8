"""Issue 21's figure: `memsync diff` between two replicas of one large memory that differ
by one record, through a folder hub: what it reads from the hub, against the size of the
file, and how long it takes.

    python benchmarks/bench_diff.py [--size 100k] [--runs 3]

Replicas "a" and "b" share a folder hub. `a`'s file is genmem.py's memory of `--size`
records; `b` starts empty and pulls it all (untimed set-up: a syncs, b syncs, a syncs
again so that each receipt says how far the other read). Then `a` adds one record and
syncs (b has not pulled it: b is behind). Timed: `memsync diff a --json` on b, whose
`hub_bytes` says how much it read from the hub (the receipt and the stretches of hub
files one replica has read and the other not). Printed: a markdown table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine, memory

PY = sys.executable


def _config(root: Path, replica: str, local: Path, hub: Path) -> Path:
    config = root / f"{replica}.toml"
    config.write_text(
        f'state_dir = "{root / ("state-" + replica)}"\nreplica = "{replica}"\n'
        f'[[memory]]\nname = "notes"\npath = "{local}"\n'
        f'[[remote]]\nname = "hub"\nurl = "{hub}"\n',
        encoding="utf-8",
    )
    return config


def _memsync(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    cmd = [PY, "-P", "-m", "memsync", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="100k")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    src = memory(args.size)
    with tempfile.TemporaryDirectory(prefix="memsync-diff-") as tmp:
        root = Path(tmp)
        hub = root / "hub"
        hub.mkdir(mode=0o700)
        a_file, b_file = root / "a.jsonl", root / "b.jsonl"
        shutil.copyfile(src, a_file)
        a, b = _config(root, "a", a_file, hub), _config(root, "b", b_file, hub)
        started = time.perf_counter()
        for config in (a, b, a):
            _memsync("sync", "--config", str(config))
        setup = time.perf_counter() - started
        added = _memsync("add", str(a_file), "--kind", "fact", "--text", "only on a").stdout
        _memsync("sync", "--config", str(a))
        times, report = [], {}
        for _ in range(args.runs):
            t0 = time.perf_counter()
            # Exit 1, as diff(1): the replicas differ.
            done = _memsync("diff", "a", "--json", "--config", str(b), ok=(0, 1))
            times.append(time.perf_counter() - t0)
            report = json.loads(done.stdout)
        times.sort()
        print(f"{machine()}; set-up (three first syncs) {setup:.0f} s; bytecode compiled.\n")
        print("| file | records | hub file | `memsync diff` s (median) | read from the hub |")
        print("|---|---:|---:|---:|---:|")
        size = a_file.stat().st_size
        hub_bytes = report.get("hub_bytes", "?")
        print(
            f"| {src.name} | {args.size} | {size / 1e6:.1f} MB | {times[len(times) // 2]:.2f} "
            f"| {hub_bytes} bytes |"
        )
        print(f"\nadded on a: {added.strip()}; diff says: {json.dumps(report)[:400]}")


if __name__ == "__main__":
    main()
