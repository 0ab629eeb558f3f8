"""Issue 3's benchmark: two replicas of 1,000,000 records that diverged by 1,000 records
each, merged into each other; beside `LC_ALL=C sort -u A B` and `awk '!seen[$0]++' A B`
from the same run; and the steady state (one new record into a file memsync has seen).

    python benchmarks/bench_merge.py [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Run, generated, machine, median, timed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    stem = generated("rep.jsonl", "--entries", "1000000", "--replicas", "2", "--diverge", "1000")
    r0, r1 = stem.with_name("rep.r0.jsonl"), stem.with_name("rep.r1.jsonl")
    memsync = [sys.executable, "-m", "memsync"]
    results: dict[str, list[Run]] = {}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(dir=stem.parent) as tmp:
            a, b, state = Path(tmp) / "A.jsonl", Path(tmp) / "B.jsonl", Path(tmp) / "state"
            for label, index in (("no index", ["--no-index"]), ("with index (cold)", [])):
                shutil.copy(r0, a)
                shutil.copy(r1, b)
                env = f"XDG_STATE_HOME={state}"
                one = timed(["env", env, *memsync, "merge", str(b), "--into", str(a), *index])
                two = timed(["env", env, *memsync, "merge", str(a), "--into", str(b), *index])
                results.setdefault(f"memsync merge B into A ({label})", []).append(one)
                results.setdefault(f"memsync merge A into B ({label})", []).append(two)
                both = Run(one.seconds + two.seconds, max(one.rss_mb, two.rss_mb))
                results.setdefault(f"both merges ({label})", []).append(both)
            # Steady state: A and B are in sync and indexed; one new record on B, merged into A.
            env = f"XDG_STATE_HOME={state}"
            subprocess.run(
                ["env", env, *memsync, "merge", str(b), "--into", str(a)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            subprocess.run(
                [*memsync, "add", str(b), "--kind", "fact", "--text", "one more"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            results.setdefault("steady state: 1 new record, B into A (CLI)", []).append(
                timed(["env", env, *memsync, "merge", str(b), "--into", str(a)])
            )
            subprocess.run(
                [*memsync, "add", str(b), "--kind", "fact", "--text", "and one more"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            results.setdefault("steady state: 1 new record, in-process merge_indexed", []).append(
                _in_process(a, b, state)
            )
            results.setdefault("python -c 'import memsync.cli' (start-up)", []).append(
                timed([sys.executable, "-c", "import memsync.cli"])
            )
        results.setdefault("LC_ALL=C sort -u A B", []).append(
            timed(["env", "LC_ALL=C", "sort", "-u", str(r0), str(r1)])
        )
        results.setdefault("awk '!seen[$0]++' A B", []).append(
            timed(["awk", "!seen[$0]++", str(r0), str(r1)])
        )
    print(
        f"Input: genmem.py --entries 1000000 --replicas 2 --diverge 1000 "
        f"({r0.stat().st_size / 1e6:.0f} MB each); {machine()}"
    )
    print(f"Medians of {args.runs} runs, all from the same run of this script.\n")
    print("| what | wall (s) | peak RSS (MB) |")
    print("|---|---:|---:|")
    for label, runs in results.items():
        m = median(runs)
        print(f"| `{label}` | {m.seconds:.3f} | {m.rss_mb:.0f} |")


def _in_process(a: Path, b: Path, state: Path) -> Run:
    code = (
        "import time, resource, sys; from pathlib import Path; "
        "from memsync.local.merge import merge_indexed; "
        "from memsync.local.statedir import StateDir; t=time.perf_counter(); "
        f"merge_indexed(Path({str(a)!r}), [Path({str(b)!r})], StateDir(Path({str(state / 'memsync')!r}))); "
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    secs, rss = out.stdout.split()
    return Run(float(secs), int(rss) / 1024)


if __name__ == "__main__":
    main()
