"""Issue 14's start-up table: what agents run every session, against the floor.

    python -m compileall -q /work/main/memsync && cd /tmp && \
        python /work/main/benchmarks/bench_startup.py [--runs 5] [--sizes 1k,10k,100k,1M] \
        [--base /work/wt-base/.venv/bin/python]

Wall time and peak RSS (medians of `--runs`) of the agents' commands on memories of
`--sizes` records (default 1k, 10k, 100k and 1M), each beside a naive script doing the
same job with json (no lock, no validation, no view rules), plus `python -c pass` and
`python -c "import memsync.cli"`. With `--base PYTHON` (another tree's venv python), every
memsync row runs in both trees, interleaved run by run, with the ratio now / base:

- `memsync add` / naive add: append one entry.
- `memsync forget ID` / naive forget: append a tombstone for an id the file holds (the
  first line's), after finding it in the file.
- `memsync show --json` / naive show: the live records as a JSON array.
- `memsync prompt --scope github.com --max-chars 2000` / naive prompt (the issue's
  "20-line json.loads reader").
- `memsync recall FILE retry` / naive recall: the 10 live entries that best match a word;
  memsync's full-text index is built by an untimed first call (in the run's own
  `XDG_STATE_HOME`), so the runs time a warm index.

add and forget (and their naive scripts) run on a fresh copy of the input each run, so
every run appends to the same file. Every memsync command runs as `python -P -m memsync`
(the current folder does not shadow the installed memsync). Run it after `python -m
compileall` (the machine sets PYTHONDONTWRITEBYTECODE=1, so nothing else writes the
bytecode) and say so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from common import Run, machine, median, memory, records, sizes, timed

QUERY = "retry"

NAIVE_ADD = """
import json, os, sys, time, uuid
path = sys.argv[1]
rec = {"id": uuid.uuid4().hex[:12], "kind": "fact", "text": sys.argv[2],
       "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
with open(path, "a") as f:
    f.write(json.dumps(rec) + "\\n")
print(rec["id"])
"""

NAIVE_FORGET = """
import json, sys, time
path, rid = sys.argv[1], sys.argv[2]
needle = json.dumps(rid).encode()
found = False
for line in open(path, "rb"):
    if needle in line:
        try:
            found = found or json.loads(line).get("id") == rid
        except ValueError:
            continue
if not found:
    sys.exit(f"{rid}: no such id")
rec = {"id": rid, "deleted": True,
       "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
with open(path, "a") as f:
    f.write(json.dumps(rec) + "\\n")
"""

NAIVE_SHOW = """
import json, sys
live = {}
for line in open(sys.argv[1], "rb"):
    try:
        obj = json.loads(line)
    except ValueError:
        continue
    if "id" in obj:
        live[obj["id"]] = obj
print(json.dumps([obj for obj in live.values() if not obj.get("deleted")]))
"""

NAIVE_PROMPT = """
import json, sys
live = {}
for line in open(sys.argv[1], "rb"):
    try:
        obj = json.loads(line)
    except ValueError:
        continue
    if "id" in obj:
        live[obj["id"]] = obj
out, size = [], 0
for obj in live.values():
    if obj.get("deleted") or obj.get("scope", "global") not in ("global", sys.argv[2]):
        continue
    text = "- " + str(obj.get("text"))
    size += len(text) + 1
    if size > 2000:
        break
    out.append(text)
print("\\n".join(out))
"""

NAIVE_RECALL = """
import json, sys
live = {}
for line in open(sys.argv[1], "rb"):
    try:
        obj = json.loads(line)
    except ValueError:
        continue
    if "id" in obj:
        live[obj["id"]] = obj
words = sys.argv[2].lower().split()
hits = []
for obj in live.values():
    if obj.get("deleted"):
        continue
    text = str(obj.get("text", "")).lower().split()
    score = sum(text.count(w) for w in words)
    if score:
        hits.append((-score, obj["id"], obj["text"]))
for _, rid, text in sorted(hits)[:10]:
    print(rid, text)
"""


def first_id(path: Path) -> str:
    """The id of the first record line of `path` (genmem's first line is a header)."""
    with path.open("rb") as f:
        for line in f:
            obj = json.loads(line)
            if "id" in obj and not obj.get("deleted"):
                return str(obj["id"])
    raise ValueError(f"{path}: no record")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", type=sizes, default="1k,10k,100k,1M", help="%(default)s")
    ap.add_argument("--base", help="another tree's python: its memsync rows beside this tree's")
    args = ap.parse_args()
    py = sys.executable
    pythons = [py] if args.base is None else [args.base, py]
    with tempfile.TemporaryDirectory(prefix="memsync-startup-") as tmp:
        state = Path(tmp) / "state"

        def memsync(python: str) -> list[str]:
            # One state directory per tree: their indexes need not share a format.
            tree = "base" if python == args.base else "now"
            return ["env", f"XDG_STATE_HOME={state / tree}", python, "-P", "-m", "memsync"]

        print(f"{machine()}; medians of {args.runs} runs; bytecode compiled first.\n")
        if args.base is None:
            print("| command | records | wall (s) | peak RSS (MB) |")
            print("|---|---:|---:|---:|")
        else:
            print("| command | records | base s | base MB | now s | now MB | now / base |")
            print("|---|---:|---:|---:|---:|---:|---:|")

        def row(
            label: str,
            size: str,
            argv: list[str],
            fresh: tuple[Path, Path] | None,
            naive: bool = False,
            prefix: Callable[[str], list[str]] = memsync,
        ) -> None:
            """One table row: `argv` after each tree's `prefix`, or as is when `naive`
            (this tree's python only)."""
            trees = [py] if naive else pythons
            runs: dict[str, list[Run]] = {p: [] for p in trees}
            for _ in range(args.runs):
                for p in trees:  # interleaved: the machine is noisy
                    if fresh is not None:  # a mutating command: the same input every run
                        shutil.copyfile(*fresh)
                    runs[p].append(timed(argv if naive else [*prefix(p), *argv]))
            now = median(runs[py])
            if args.base is None:
                print(f"| {label} | {size} | {now.seconds:.3f} | {now.rss_mb:.0f} |", flush=True)
            elif naive:
                cells = f"| | | {now.seconds:.3f} | {now.rss_mb:.0f} | |"
                print(f"| {label} | {size} {cells}", flush=True)
            else:
                base = median(runs[args.base])
                ratio = now.seconds / base.seconds
                cells = (
                    f"{base.seconds:.3f} | {base.rss_mb:.0f} | {now.seconds:.3f} | {now.rss_mb:.0f}"
                )
                print(f"| {label} | {size} | {cells} | {ratio:.2f} |", flush=True)

        row("`python -c pass`", "-", [py, "-c", "pass"], None, naive=True)
        importing = ["-P", "-c", "import memsync.cli"]
        row("`python -c 'import memsync.cli'`", "-", importing, None, prefix=lambda p: [p])
        for label in args.sizes:
            src = memory(label)
            path = Path(tmp) / f"m{label.lower()}.jsonl"
            fresh = (src, path)
            size = f"{records(label):,}"
            rid = first_id(src)
            add = ["add", str(path), "--kind", "fact", "--text", "x"]
            row("`memsync add`", size, add, fresh)
            naive_add = [py, "-c", NAIVE_ADD, str(path), "x"]
            row("naive add (json, no lock)", size, naive_add, fresh, naive=True)
            forget = ["forget", str(path), rid]
            row("`memsync forget ID`", size, forget, fresh)
            naive_forget = [py, "-c", NAIVE_FORGET, str(path), rid]
            row("naive forget (json, no lock)", size, naive_forget, fresh, naive=True)
            # The read-only commands read the input itself.
            show = ["show", "--json", str(src)]
            row("`memsync show --json`", size, show, None)
            naive_show = [py, "-c", NAIVE_SHOW, str(src)]
            row("naive show --json (json.loads)", size, naive_show, None, naive=True)
            prompt = ["prompt", str(src), "--scope", "github.com", "--max-chars", "2000"]
            row("`memsync prompt --max-chars 2000`", size, prompt, None)
            naive_prompt = [py, "-c", NAIVE_PROMPT, str(src), "github.com"]
            row("naive prompt (json.loads)", size, naive_prompt, None, naive=True)
            recall = ["recall", str(src), QUERY]
            for p in pythons:  # builds each tree's index, untimed
                subprocess.run([*memsync(p), *recall], stdout=subprocess.DEVNULL, check=True)
            row(f"`memsync recall {QUERY}` (index warm)", size, recall, None)
            naive_recall = [py, "-c", NAIVE_RECALL, str(src), QUERY]
            row("naive recall (json.loads)", size, naive_recall, None, naive=True)
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
