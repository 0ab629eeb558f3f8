"""Issue 20's scaling table: the everyday commands on a warm state directory, 10k to 1M
records, against `python -c "import json"` and against the round's start.

    python benchmarks/bench_warm.py [--sizes 10k,100k,300k,1M] [--runs 5] [--big-runs 3]
                                    [--cold-runs 1] [--base /work/wt/base]

For each size (genmem.py) and each tree (this one; `--base`, another checkout with its own
`.venv`, when given), on a fresh copy of the file and an empty state directory:

- cold: `show --json` (reads every line, no store), then the first `prompt --max-chars
  4000` (which builds the persistent view where the tree has one); the pair `--cold-runs`
  times, each with an empty state directory, and the ratio of the two medians (the
  target: building the store at most 1.5x `show --json`); and when the store is ready
  (`cold store ready`: the prompt's start to the end of the process it detached to write
  the store, where the tree has one);
- untimed: one `recall` (builds the full-text index) and one `memsync add`;
- warm, `--runs` times (`--big-runs` from 300k on), interleaved: `python -c "import json"`
  (the yardstick, same interpreter), `add`, `prompt --max-chars 4000`, `recall retry` (a
  common word), `forget ID` (another existing id each time), `show --json` (the whole
  file: from the quick part of a valid persistent view where the tree has one).

Medians of wall time and of peak RSS (GNU time). Byte-code is compiled first in both
trees (`compileall`), as an installed package has it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import ROOT, Run, machine, median, memory, records, sizes, timed, until_gone

WARM = ("add", "prompt --max-chars 4000", "recall retry", "forget ID", "show --json")


def _python(tree: Path) -> str:
    return str(tree / ".venv" / "bin" / "python")


def _memsync(tree: Path, state: Path, *args: str) -> Run:
    os.environ["XDG_STATE_HOME"] = str(state)
    return timed([_python(tree), "-m", "memsync", *args])


def _ids(file: Path, n: int) -> list[str]:
    """The ids of the first `n` entries of `file` (to forget one each run)."""
    out: list[str] = []
    with open(file, "rb") as f:
        f.readline()
        while len(out) < n:
            obj = json.loads(f.readline())
            if "kind" in obj and obj["id"] not in out:
                out.append(obj["id"])
    return out


def _tree(tree: Path, src: Path, runs: int, cold_runs: int) -> dict[str, Run]:
    """Cold and warm medians of the commands in `tree` on a copy of `src`."""
    found: dict[str, list[Run]] = {}
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        file = Path(tmp) / src.name
        shutil.copyfile(src, file)
        f = str(file)
        for k in range(max(1, cold_runs)):  # each pair with an empty state directory
            state = Path(tmp) / f"state{k}"
            found.setdefault("cold show --json", []).append(
                _memsync(tree, state, "show", f, "--json")
            )
            args = ("prompt", f, "--max-chars", "4000")
            started = time.perf_counter()
            found.setdefault("cold prompt", []).append(_memsync(tree, state, *args))
            # A detached process may still be writing the store (`ViewStore.detach_from`):
            # when it is done, the store is ready; the next command must not share cores.
            until_gone([_python(tree), "-m", "memsync", *args])
            ready = Run(time.perf_counter() - started, 0.0)
            found.setdefault("cold store ready", []).append(ready)
        _memsync(tree, state, "recall", f, "retry")
        _memsync(tree, state, "add", f, "--kind", "fact", "--text", "warm up")
        for n, rid in enumerate(_ids(file, runs)):
            commands = {
                "python": ["-c", "import json"],
                "add": ["-m", "memsync", "add", f, "--kind", "fact", "--text", f"run {n}"],
                "prompt --max-chars 4000": ["-m", "memsync", "prompt", f, "--max-chars", "4000"],
                "recall retry": ["-m", "memsync", "recall", f, "retry"],
                "forget ID": ["-m", "memsync", "forget", f, rid],
                "show --json": ["-m", "memsync", "show", f, "--json"],
            }
            os.environ["XDG_STATE_HOME"] = str(state)
            for name, args in commands.items():
                found.setdefault(name, []).append(timed([_python(tree), *args]))
    return {name: median(runs) for name, runs in found.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=sizes, default=sizes("10k,100k,300k,1M"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--big-runs", type=int, default=3)
    ap.add_argument("--cold-runs", type=int, default=1)
    ap.add_argument("--base", type=Path, default=None)
    args = ap.parse_args()
    trees = [ROOT] + ([args.base] if args.base else [])
    for tree in trees:
        subprocess.run([_python(tree), "-m", "compileall", "-q", str(tree / "memsync")], check=True)
    print(f"{machine()}\nByte-code compiled in every tree first. Medians; ratio: to the same run's")
    print('`python -c "import json"`; base: ' + (str(args.base) if args.base else "none") + "\n")
    print("| records | command | s | MB | / python | base s | base MB | base / python |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for label in args.sizes:
        src = memory(label)
        runs = args.runs if records(label) < 300_000 else args.big_runs
        results = [_tree(tree, src, runs, args.cold_runs) for tree in trees]
        for name in ("python", *WARM, "cold show --json", "cold prompt", "cold store ready"):
            cells = []
            for found in results:
                r, py = found[name], found["python"].seconds
                ratio = f"{r.seconds / py:.1f}x" if name in WARM or name == "python" else ""
                if name in ("cold prompt", "cold store ready"):  # the 1.5x target
                    ratio = f"{r.seconds / found['cold show --json'].seconds:.2f}x of show"
                mb = f"{r.rss_mb:.0f}" if r.rss_mb else "-"  # (not measured: store ready)
                cells.append(f"{r.seconds:.3f} | {mb} | {ratio}")
            if len(cells) == 1:
                cells.append(" |  | ")
            print(f"| {label} | `{name}` | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
