"""Issue 2's benchmark: `memsync show --json` and `memsync check` on 1,000,000 records.

    python benchmarks/bench_view.py [--runs 3]

Target: the view of 1,000,000 records in under 3 s and under 500 MB RSS on 2 cores.
"""

from __future__ import annotations

import argparse
import sys

from common import generated, machine, median, timed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    path = generated("m1m.jsonl", "--entries", "1000000")
    size = path.stat().st_size
    memsync = [sys.executable, "-m", "memsync"]
    rows = []
    for label, cmd in [
        ("memsync show --json", [*memsync, "show", str(path), "--json"]),
        ("memsync check", [*memsync, "check", str(path)]),
        ("wc -l (reading the file once)", ["wc", "-l", str(path)]),
    ]:
        runs = [timed(cmd) for _ in range(args.runs)]
        m = median(runs)
        rows.append((label, m.seconds, m.rss_mb))
    print(f"Input: genmem.py --entries 1000000 ({size / 1e6:.0f} MB); {machine()}")
    print(f"Medians of {args.runs} runs.\n")
    print("| command | wall (s) | peak RSS (MB) |")
    print("|---|---:|---:|")
    for label, secs, rss in rows:
        print(f"| `{label}` | {secs:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
