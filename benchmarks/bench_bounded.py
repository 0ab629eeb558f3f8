"""Issue 14's memory bounds: peak RSS and wall time of the paths that move a whole file,
at 1,000,000 records: a merge into an empty file (one-off and indexed), a handoff of
everything into an empty file, and a compaction. With `--before VENV`, the same commands
from another tree's venv (e.g. main before the change), interleaved run by run.

    python benchmarks/bench_bounded.py [--runs 3] [--before ../before/.venv]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from common import Run, generated, machine, median, timed

COMMANDS = {
    "merge SRC --into EMPTY --no-index": ["merge", "{src}", "--into", "{dest}", "--no-index"],
    "merge SRC --into EMPTY (indexed)": ["merge", "{src}", "--into", "{dest}"],
    "handoff SRC EMPTY": ["handoff", "{src}", "{dest}"],
    "compact COPY --quiet-seconds 0": ["compact", "{copy}", "--quiet-seconds", "0"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, help="another tree's venv")
    args = ap.parse_args()
    src = generated("m1m.jsonl", "--entries", "1000000")
    trees = {"after": Path(os.environ.get("VIRTUAL_ENV", ".venv"))}
    if args.before is not None:
        trees = {"before": args.before, **trees}
    results: dict[tuple[str, str], list[Run]] = {}
    for _ in range(args.runs):
        for label, cmd in COMMANDS.items():
            for tree, venv in trees.items():
                with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
                    dest, copy = Path(tmp) / "dest.jsonl", Path(tmp) / "copy.jsonl"
                    if "{copy}" in cmd:
                        shutil.copy(src, copy)
                        os.utime(copy, (0, 0))  # quiet for long enough
                    argv = [a.format(src=src, dest=dest, copy=copy) for a in cmd]
                    env = f"XDG_STATE_HOME={tmp}/state"
                    run = timed(["env", env, str(venv / "bin" / "memsync"), *argv])
                    results.setdefault((label, tree), []).append(run)
                    print(f"{label} [{tree}]: {run.seconds:.2f} s, {run.rss_mb:.0f} MB", flush=True)
    print(f"\n{machine()}; {args.runs} runs, medians\n")
    print(
        "| command (1,000,000 records) | "
        + " | ".join(f"{t}: wall (s) / RSS (MB)" for t in trees)
        + " |"
    )
    print("|---|" + "---:|" * len(trees))
    for label in COMMANDS:
        cells = []
        for tree in trees:
            m = median(results[(label, tree)])
            cells.append(f"{m.seconds:.2f} / {m.rss_mb:.0f}")
        print(f"| `memsync {label}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
