"""Issue 20's benchmark: the everyday commands with a cold and a warm state directory.

    python benchmarks/bench_store.py [--sizes 10k,100k] [--runs 3] [--only prompt,show --json]
        [--compact]

For each size (genmem.py), on a copy of the file: each command once with an empty state
directory (cold: no persistent view, no recall index), and once after the same command ran
and `memsync add` appended one record (warm: the store folds the one new line). The
yardstick is `python -c "import json"`, the interpreter's own start-up, in the same run.
Byte-code is compiled first (`compileall`), as an installed package has it.

With `--compact`, also: on a copy whose store is warm, `memsync compact` (which leaves the
new file's store, issue 20), then the first `prompt` after it.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, Run, machine, median, memory, sizes, timed

COMMANDS = {
    "prompt --max-chars 4000": ["prompt", "{file}", "--max-chars", "4000"],
    "recall retry": ["recall", "{file}", "retry"],
    "forget ID": ["forget", "{file}", "{id}"],
    "show --scope github.com": ["show", "{file}", "--scope", "github.com"],
    "show --digest": ["show", "{file}", "--digest"],
    "show --json": ["show", "{file}", "--json"],
}
"""`show --json` unfiltered reads every line (issue 20 lets it): the yardstick of a cold
store, whose building may cost at most 1.5x it."""


def _run(cmd: list[str], state: Path) -> Run:
    os.environ["XDG_STATE_HOME"] = str(state)
    return timed([sys.executable, "-m", "memsync", *cmd])


def _add(file: Path, state: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    subprocess.run(
        [sys.executable, "-m", "memsync", "add", str(file), "--kind", "fact", "--text", "one more"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=sizes, default=sizes("10k,100k"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compact", action="store_true", help="also time compact, then prompt")
    ap.add_argument(
        "--only",
        default="",
        help="comma-separated command names (their first words) to run; default: all",
    )
    args = ap.parse_args()
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    commands = {k: v for k, v in COMMANDS.items() if not only or any(k.startswith(o) for o in only)}
    compileall.compile_dir(ROOT / "memsync", quiet=1)
    base = median([timed([sys.executable, "-c", "import json"]) for _ in range(5)])
    print(
        f'{machine()}\nMedians of {args.runs} runs; `python -c "import json"`: '
        f"{base.seconds * 1000:.0f} ms, {base.rss_mb:.0f} MB.\n"
    )
    print("| records | command | cold (s) | cold MB | warm (s) | warm MB | warm / python |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for label in args.sizes:
        src = memory(label)
        with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
            file = Path(tmp) / src.name
            shutil.copyfile(src, file)
            with open(file, "rb") as f:
                f.readline()
                rid = json.loads(f.readline())["id"]
            for name, template in commands.items():
                cmd = [a.format(file=file, id=rid) for a in template]
                cold, warm = [], []
                for n in range(args.runs):
                    state = Path(tmp) / f"state-{name.replace(' ', '_')}-{n}"
                    cold.append(_run(cmd, state))
                    _add(file, state)
                    warm.append(_run(cmd, state))
                    shutil.rmtree(state, ignore_errors=True)
                c, w = median(cold), median(warm)
                print(
                    f"| {label} | `{name}` | {c.seconds:.2f} | {c.rss_mb:.0f} | "
                    f"{w.seconds:.3f} | {w.rss_mb:.0f} | {w.seconds / base.seconds:.1f}x |",
                    flush=True,
                )
    if args.compact:
        _compact_then_prompt(args.sizes, args.runs)


COMPACT = ["--quiet-seconds", "0", "--grace-seconds", "0", "--horizon-days", "0"]
COMPACT += ["--now", "2026-12-01T00:00:00Z"]


def _compact_then_prompt(labels: list[str], runs: int) -> None:
    """`compact` of a copy whose store is warm (`--horizon-days 0`: genmem's tombstones go),
    then the first `prompt` after it, each in a fresh state directory per run."""
    print("\n| records | `compact` (s) | MB | first `prompt` after (s) | MB |")
    print("|---:|---:|---:|---:|---:|")
    os.environ["MEMSYNC_CONFIG"] = os.devnull + ".none"  # no configured memory: no hub
    for label in labels:
        src = memory(label)
        compacts, prompts = [], []
        for n in range(runs):
            with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
                file, state = Path(tmp) / src.name, Path(tmp) / f"state-{n}"
                shutil.copyfile(src, file)
                prompt = ["prompt", str(file), "--max-chars", "4000"]
                _run(prompt, state)
                compacts.append(_run(["compact", str(file), *COMPACT], state))
                prompts.append(_run(prompt, state))
        c, p = median(compacts), median(prompts)
        print(
            f"| {label} | {c.seconds:.2f} | {c.rss_mb:.0f} | {p.seconds:.3f} | {p.rss_mb:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
