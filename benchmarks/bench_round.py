"""Issue 14's tables, one run: this tree against a baseline tree, with the baselines of
the issue (`python -c pass`, `LC_ALL=C sort -u`, `awk '!seen[$0]++'`, and `floor`: the
in-process floor of benchmarks/floor.py) in the same run.

    cd /tmp && python /work/main/benchmarks/bench_round.py \
        --base /work/wt-base/.venv/bin/python [--runs 3] [--cases prompt:100k,show:1M]

Without `--base`, only this tree's columns. `python` is this tree's interpreter (its
venv's); the baselines run with it too. Each case runs `--runs` times, the two trees
interleaved (this machine is shared and noisy: medians, and ratios in the same run). Wall
time and peak RSS by GNU time. Every run starts from an empty scratch folder, with
`XDG_STATE_HOME` in it: the merge index (and anything else memsync keeps in its state
directory) starts cold each run and stays out of ~/.local/state.

Cases (`--cases`, comma-separated `case:size`, sizes such as 100k or 1M):
- prompt, show (`--json`), check: the file as it is.
- merge-no-index, merge-cold: merge into an empty file, without and with the index.
- merge-steady: merge the file into a destination that already holds it and has its
  index (an untimed first merge, the same way); the second merge is timed.
- compact: `compact COPY --quiet-seconds 0` of a fresh copy of the file.
- handoff: `handoff FILE EMPTY` (everything, into an empty file).
- first-push, first-pull: one `sync` through a folder hub, into an empty one.
- baselines: `python -c pass`, `sort -u`, `awk`, `floor` (this tree's python only).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Run, machine, median, memory, records, timed

FLOOR = Path(__file__).resolve().with_name("floor.py")
CASES = (
    "prompt",
    "show",
    "check",
    "merge-no-index",
    "merge-cold",
    "merge-steady",
    "compact",
    "handoff",
    "first-push",
    "first-pull",
)
BASELINES = ("python -c pass", "sort -u", "awk", "floor")
DEFAULT_CASES = (
    "prompt:100k,show:1M,check:1M,merge-no-index:1M,merge-cold:1M,merge-steady:1M,"
    "compact:1M,handoff:1M,first-push:1M,first-pull:1M,show:100k,show:300k,"
    "python -c pass:100k,sort -u:1M,awk:1M,floor:1M"
)


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
    """One timed run of `case` with interpreter `py` on input `data`, in a fresh `scratch`."""
    root = _fresh(scratch)
    # -P: not the current folder first on sys.path, or `-m memsync` run from a checkout
    # imports that checkout's memsync whatever the interpreter (the baseline would not be).
    # The state directory (the merge index) is the run's own: cold, and not ~/.local/state.
    memsync = ["env", f"XDG_STATE_HOME={root / 'state'}", py, "-P", "-m", "memsync"]
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
    elif case == "merge-steady":
        cmd = [*memsync, "merge", str(data), "--into", str(root / "m.jsonl")]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)  # the first, untimed
    elif case == "compact":
        copy = root / "c.jsonl"
        shutil.copyfile(data, copy)
        cmd = [*memsync, "compact", str(copy), "--quiet-seconds", "0"]
    elif case == "handoff":
        empty = root / "h.jsonl"
        empty.touch()
        cmd = [*memsync, "handoff", str(data), str(empty)]
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
    if case == "floor":
        return timed([sys.executable, str(FLOOR), str(data)])
    raise ValueError(case)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="the baseline tree's python (none: this tree only)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", default=DEFAULT_CASES, help="case:size,... (%(default)s)")
    args = ap.parse_args()
    specs = [spec.rsplit(":", 1) for spec in args.cases.split(",")]
    for spec in specs:  # fail on a misspelt case now, not an hour into the run
        try:
            case, size = spec
            records(size)
        except ValueError:
            raise SystemExit(f"--cases: {':'.join(spec)!r} is not case:size") from None
        if case not in CASES and case not in BASELINES:
            raise SystemExit(f"--cases: unknown case {case!r}")
    scratch = Path(tempfile.mkdtemp(prefix="memsync-bench-"))
    if args.base:
        print(f"{machine()}; medians of {args.runs} runs, the two trees interleaved\n")
        print("| case | input | baseline s | baseline MB | now s | now MB | now/baseline |")
        print("|---|---|---:|---:|---:|---:|---:|")
    else:
        print(f"{machine()}; medians of {args.runs} runs\n")
        print("| case | input | now s | now MB |")
        print("|---|---|---:|---:|")
    try:
        for case, size in specs:
            data = memory(size)
            if case in BASELINES:
                m = median([baseline(case, data) for _ in range(args.runs)])
                cells = f"{m.seconds:.2f} | {m.rss_mb:.0f} |"
                if args.base:  # no baseline tree columns, no ratio
                    cells = f"| | {cells} |"
                print(f"| `{case}` | {size} | {cells}", flush=True)
                continue
            base: list[Run] = []
            now: list[Run] = []
            for _ in range(args.runs):
                if args.base:
                    base.append(run_case(args.base, case, data, scratch / "run"))
                now.append(run_case(sys.executable, case, data, scratch / "run"))
            n = median(now)
            if args.base:
                b = median(base)
                print(
                    f"| {case} | {size} | {b.seconds:.2f} | {b.rss_mb:.0f} | {n.seconds:.2f} | "
                    f"{n.rss_mb:.0f} | {n.seconds / b.seconds:.2f} |",
                    flush=True,
                )
            else:
                print(f"| {case} | {size} | {n.seconds:.2f} | {n.rss_mb:.0f} |", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
