"""Issue 14's start-up table: what agents run every session, against the floor.

    python -m compileall -q memsync && python benchmarks/bench_startup.py [--runs 7]

Wall time and peak RSS (medians) of `memsync add` and `memsync prompt --scope X
--max-chars 2000` on memories of 1k, 10k and 100k records, beside `python -c pass`,
`import memsync.cli`, and a naive 20-line script doing the same with json (no lock, no
validation, no view rules). Run it after `python -m compileall` (the machine sets
PYTHONDONTWRITEBYTECODE=1, so nothing else writes the bytecode) and say so.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from common import generated, machine, median, timed

NAIVE_ADD = """
import json, os, sys, time, uuid
path = sys.argv[1]
rec = {"id": uuid.uuid4().hex[:12], "kind": "fact", "text": sys.argv[2],
       "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
with open(path, "a") as f:
    f.write(json.dumps(rec) + "\\n")
print(rec["id"])
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    py = sys.executable
    memsync = [py, "-m", "memsync"]
    rows: list[tuple[str, str, float, float]] = []

    def row(label: str, size: str, cmd: list[str]) -> None:
        m = median([timed(cmd) for _ in range(args.runs)])
        rows.append((label, size, m.seconds, m.rss_mb))

    row("`python -c pass`", "-", [py, "-c", "pass"])
    row("`python -c 'import memsync.cli'`", "-", [py, "-c", "import memsync.cli"])
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1_000, 10_000, 100_000):
            src = generated(f"m{n // 1000}k.jsonl", "--entries", str(n))
            path = Path(tmp) / f"m{n}.jsonl"
            shutil.copy(src, path)
            size = f"{n:,}"
            row(
                "`memsync add`", size, [*memsync, "add", str(path), "--kind", "fact", "--text", "x"]
            )
            row("naive add (json, no lock)", size, [py, "-c", NAIVE_ADD, str(path), "x"])
            prompt = [*memsync, "prompt", str(path), "--scope", "github.com", "--max-chars", "2000"]
            row("`memsync prompt --max-chars 2000`", size, prompt)
            row(
                "naive prompt (json.loads)", size, [py, "-c", NAIVE_PROMPT, str(path), "github.com"]
            )
    print(f"{machine()}; medians of {args.runs} runs; bytecode compiled first.\n")
    print("| command | records | wall (s) | peak RSS (MB) |")
    print("|---|---:|---:|---:|")
    for label, size, secs, rss in rows:
        print(f"| {label} | {size} | {secs:.3f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
