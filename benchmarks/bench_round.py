"""Issue 14's tables, one run: this tree against a baseline tree, with the baselines of
the issue (`python -c pass`, `LC_ALL=C sort -u`, `awk '!seen[$0]++'`) in the same run.

    python benchmarks/bench_round.py --base /work/wt-base/.venv/bin/python [--runs 3]

Each command runs `--runs` times, the two trees interleaved (this machine is shared and
noisy: medians, and ratios in the same run). Wall time and peak RSS by GNU time.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from common import Run, generated, machine, median, timed

SIZES = {"100k": "100000", "300k": "300000", "1M": "1000000"}


def _hub_config(root: Path, local: Path, hub: Path) -> Path:
    config = root / "config.toml"
    config.write_text(
        f'state_dir = "{root / "state"}"\nreplica = "me"\n'
        f'[[memory]]\nname = "notes"\npath = "{local}"\n'
        f'[[remote]]\nname = "hub"\nurl = "{hub}"\n',
        encoding="utf-8",
    )
    return config


def _fresh(scratch: Path) -> Path:
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    return scratch


def run_case(py: str, case: str, data: Path, scratch: Path) -> Run:
    """One timed run of `case` with interpreter `py` on input `data`."""
    # -P: not the current folder first on sys.path, or `-m memsync` run from a checkout
    # imports that checkout's memsync whatever the interpreter (the baseline would not be).
    memsync = [py, "-P", "-m", "memsync"]
    root = _fresh(scratch)
    if case == "prompt":
        cmd = [*memsync, "prompt", "--scope", "github.com", "--max-chars", "2000", str(data)]
    elif case == "show":
        cmd = [*memsync, "show", "--json", str(data)]
    elif case == "check":
        cmd = [*memsync, "check", str(data)]
    elif case == "merge-no-index":
        cmd = [*memsync, "merge", str(data), "--into", str(root / "m.jsonl"), "--no-index"]
    elif case == "merge-cold":
        cmd = [*memsync, "merge", str(data), "--into", str(root / "m.jsonl")]
    elif case == "first-push":
        hub = root / "hub"
        hub.mkdir()
        local = root / "me.jsonl"
        shutil.copy(data, local)
        cmd = [*memsync, "sync", "--config", str(_hub_config(root, local, hub))]
    elif case == "first-pull":
        hub = root / "hub"
        (hub / "notes").mkdir(parents=True)
        (hub / "notes" / "peer.jsonl").hardlink_to(data)
        cmd = [*memsync, "sync", "--config", str(_hub_config(root, root / "me.jsonl", hub))]
    else:
        raise ValueError(case)
    return timed(cmd)


def baseline(case: str, data: Path) -> Run:
    if case == "python -c pass":
        return timed([sys.executable, "-c", "pass"])
    if case == "sort -u":
        return timed(["sh", "-c", f"LC_ALL=C sort -u {data} > /dev/null"])
    if case == "awk":
        return timed(["sh", "-c", f"awk '!seen[$0]++' {data} > /dev/null"])
    raise ValueError(case)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the baseline tree's python")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--cases",
        default="prompt:100k,show:1M,check:1M,merge-no-index:1M,"
        "merge-cold:1M,first-push:1M,first-pull:1M,show:100k,show:300k",
    )
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="memsync-bench-"))
    print(f"{machine()}; medians of {args.runs} runs, the two trees interleaved\n")
    print("| case | input | baseline s | baseline MB | now s | now MB | now/baseline |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for spec in args.cases.split(","):
        case, size = spec.split(":")
        data = generated(f"m{size.lower()}.jsonl", "--entries", SIZES[size])
        if case in ("python -c pass", "sort -u", "awk"):
            m = median([baseline(case, data) for _ in range(args.runs)])
            print(f"| `{case}` | {size} | | | {m.seconds:.2f} | {m.rss_mb:.0f} | |", flush=True)
            continue
        base: list[Run] = []
        now: list[Run] = []
        for _ in range(args.runs):
            base.append(run_case(args.base, case, data, scratch / "run"))
            now.append(run_case(sys.executable, case, data, scratch / "run"))
        b, n = median(base), median(now)
        print(
            f"| {case} | {size} | {b.seconds:.2f} | {b.rss_mb:.0f} | {n.seconds:.2f} | "
            f"{n.rss_mb:.0f} | {n.seconds / b.seconds:.2f} |",
            flush=True,
        )
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
