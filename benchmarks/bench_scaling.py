"""Issue 14's scaling table: time and peak RSS of the reading commands by file size, and
the exponent of each command's growth.

    cd /tmp && python /work/main/benchmarks/bench_scaling.py [--runs 3] [--sizes 100k,300k,1M]

For each size (default 100k, 300k and 1M records, genmem.py's files) and each command
(`show --json`, `check`, `prompt --scope github.com --max-chars 2000`, `merge --no-index`
into an empty file), the medians of `--runs` runs of wall time and GNU time's peak RSS,
the commands interleaved within each round of runs. The runs are `bench_round.run_case`'s
(`python -P -m memsync`, a fresh scratch folder and state directory each run). Last
column: the slope of a least-squares fit of log(time) on log(records), 1.0 for linear.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

from bench_round import run_case
from common import Run, machine, median, memory, records, sizes

CASES = {
    "show": "`show --json`",
    "check": "`check`",
    "prompt": "`prompt --max-chars 2000`",
    "merge-no-index": "`merge --no-index` (into an empty file)",
}


def exponent(points: list[tuple[int, float]]) -> float:
    """The slope of the least-squares line of log(seconds) on log(records)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(s) for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", type=sizes, default="100k,300k,1M", help="%(default)s")
    args = ap.parse_args()
    if len({records(label) for label in args.sizes}) < 2:
        raise SystemExit("--sizes: at least two different sizes, to fit an exponent")
    scratch = Path(tempfile.mkdtemp(prefix="memsync-scaling-"))
    results: dict[tuple[str, str], Run] = {}
    try:
        for label in args.sizes:
            data = memory(label)
            runs: dict[str, list[Run]] = {case: [] for case in CASES}
            for _ in range(args.runs):
                for case in CASES:
                    runs[case].append(run_case(sys.executable, case, data, scratch / "run"))
            for case in CASES:
                results[case, label] = median(runs[case])
            print(f"{label} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{machine()}; medians of {args.runs} runs\n")
    heads = "".join(f" {label} s | {label} MB |" for label in args.sizes)
    print(f"| command |{heads} exponent |")
    print("|---|" + "---:|---:|" * len(args.sizes) + "---:|")
    for case, name in CASES.items():
        cells = "".join(
            f" {results[case, label].seconds:.2f} | {results[case, label].rss_mb:.0f} |"
            for label in args.sizes
        )
        slope = exponent([(records(label), results[case, label].seconds) for label in args.sizes])
        print(f"| {name} |{cells} {slope:.2f} |")


if __name__ == "__main__":
    main()
