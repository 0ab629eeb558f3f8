"""Issue 20's start-up targets, two trees interleaved run by run: warm `add`, `prompt
--max-chars 4000` and, with `--commands`, `forget ID` and `recall retry`, each against
`python -c "import json"`.

    python benchmarks/bench_startup_ab.py --base TREE [--size 10k] [--runs 41]
        [--commands add,prompt,forget,recall]

TREE is another checkout (a `git archive` of the commit to compare with will do) run by
this tree's interpreter with `PYTHONPATH=TREE`, so both trees use the same interpreter and
packages. Each tree gets its own copy of the input and its own state directory, warmed by
one `prompt` (which builds the persistent view), one `recall` (its index) and one `add`.
Then, `--runs` times, for each tree in turn: `python -c "import json"` and each command
chosen (`add` appends one new entry, `forget` another entry of the input each run). Every
memsync command runs as `python -P -m memsync` (the folder run from does not shadow the
package). Prints the medians of wall time and of CPU time (user + system, which the
machine's other jobs disturb less), each as a ratio to the same tree's `import json`, and
now / base. Bytecode is compiled first in both trees (`compileall`), as an installed
package has it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from common import ROOT, machine, memory

MEMSYNC = (sys.executable, "-P", "-m", "memsync")


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one command (CPU: user + system of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _ids(src: Path, n: int) -> list[str]:
    """`n` ids of entries of `src` (one per run of `forget`: another entry each time)."""
    found = []
    with src.open("rb") as f:
        next(f)  # the header
        for line in f:
            found.append(msgspec.json.decode(line)["id"])
            if len(found) == n:
                return found
    raise SystemExit(f"{src}: fewer than {n} entries")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--size", default="10k")
    ap.add_argument("--runs", type=int, default=41)
    ap.add_argument(
        "--commands",
        default="add,prompt",
        help="of add, prompt, forget, recall (comma-separated; python always runs)",
    )
    args = ap.parse_args()
    chosen = ["python", *args.commands.split(",")]
    trees = {"base": args.base.resolve(), "now": ROOT}
    for tree in trees.values():
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "memsync")], check=True
        )
    src = memory(args.size)
    ids = _ids(src, args.runs)
    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        envs = {}
        for name, tree in trees.items():
            work = Path(tmp) / name
            work.mkdir()
            shutil.copyfile(src, work / "m.jsonl")
            env = dict(os.environ, PYTHONPATH=str(tree), XDG_STATE_HOME=str(work / "state"))
            envs[name] = (work, env)
            for warm in (
                ["prompt", "m.jsonl", "--max-chars", "4000"],
                ["recall", "m.jsonl", "retry"],  # builds its index
                ["add", "m.jsonl", "--kind", "fact", "--text", "warm up"],
            ):
                _run([*MEMSYNC, *warm], work, env)
        for n in range(args.runs):
            for name in trees:
                work, env = envs[name]
                text = f"Builds need Python 3.11 on CI, run {n}."
                commands = {
                    "python": [sys.executable, "-c", "import json"],
                    "add": [*MEMSYNC, "add", "m.jsonl", "--kind", "fact", "--text", text],
                    "prompt": [*MEMSYNC, "prompt", "m.jsonl", "--max-chars", "4000"],
                    "forget": [*MEMSYNC, "forget", "m.jsonl", ids[n]],
                    "recall": [*MEMSYNC, "recall", "m.jsonl", "retry"],
                }
                for command in chosen:
                    cmd = commands[command]
                    found.setdefault((command, name), []).append(_run(cmd, work, env))
    print(
        f"{machine()}\n{args.size} records, {args.runs} runs per tree, interleaved; base {args.base}"
    )
    print("\n| command | base ms | base / python | now ms | now / python | now / base |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, index in (("wall", 0), ("CPU", 1)):
        med = {k: statistics.median(r[index] for r in v) for k, v in found.items()}
        for command in chosen:
            cells = []
            for name in trees:
                ratio = med[(command, name)] / med[("python", name)]
                cells.append(f"{med[(command, name)] * 1000:.1f} | {ratio:.2f}x")
            change = med[(command, "now")] / med[(command, "base")]
            print(f"| {command} ({kind}) | {' | '.join(cells)} | {change:.2f} |")


if __name__ == "__main__":
    main()
