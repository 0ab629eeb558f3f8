"""Concurrent appends from independent processes (SEMANTICS rule 13).

Eight real processes append to ONE memory file at the same time: four through
`memsync.Memory.add` (the library's locked append) and four as agents that know nothing of
memsync and write whole lines with plain `open(path, "ab")`, one `write()` per line, under
`O_APPEND`. No line may be lost, torn or interleaved with another.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from memsync import Memory
from memsync.core.lines import Blank, Header, Invalid, classify, split_complete
from memsync.core.records import Record

WRITERS_PER_KIND = 4
APPENDS = 2_000
TOTAL = 2 * WRITERS_PER_KIND * APPENDS
NOW_TEXT = "2026-11-01T00:00:00Z"

_WAIT_FOR_GO = """
import os, sys, time
path, go, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
open(f"{go}.ready-{sys.argv[5]}", "w").close()  # at the barrier, imports done
deadline = time.monotonic() + 60
while not os.path.exists(go):
    if time.monotonic() > deadline:
        sys.exit("no go file")
    time.sleep(0.001)
"""

MEMSYNC_WORKER = (
    "from memsync import Memory\n"  # imported before the barrier
    + _WAIT_FOR_GO
    + """
mem = Memory(path)
ids = [mem.add("fact", f"Worker {worker} learned fact number {i}.", source="session:w").id
       for i in range(count)]
print("\\n".join(ids))
"""
)

PLAIN_WORKER = (
    _WAIT_FOR_GO
    + f"CREATED = {NOW_TEXT!r}\n"
    + """
import json
with open(path, "ab", buffering=0) as f:
    for i in range(count):
        obj = {"id": f"plain{worker}-{i:05d}", "kind": "lesson",
               "text": f"Plain writer {worker} wrote line {i}.", "scope": "global",
               "tags": [], "source": "session:plain", "confidence": 0.8,
               "expires_at": None, "supersedes": None, "created_at": CREATED}
        f.write(json.dumps(obj).encode() + b"\\n")  # one whole line per write()
"""
)


def _start(script: str, path: Path, go: Path, worker: int, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, str(path), str(go), str(worker), str(APPENDS), name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_eight_processes_append_to_one_file_without_losing_a_line(tmp_path: Path) -> None:
    """4 x Memory.add + 4 x plain O_APPEND writers, 2,000 appends each, all at once: every
    line arrives whole, exactly once, and the view holds all 16,000 entries."""
    path = tmp_path / "m.jsonl"
    Memory.open(path)  # the header first, so that plain writers never create the file
    go = tmp_path / "go"
    procs = [_start(MEMSYNC_WORKER, path, go, w, f"m{w}") for w in range(WRITERS_PER_KIND)]
    procs += [_start(PLAIN_WORKER, path, go, w, f"p{w}") for w in range(WRITERS_PER_KIND)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go.ready-*"))) < len(procs):  # the barrier
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for p in procs), "a worker died before the barrier"
        time.sleep(0.01)
    started = time.monotonic()
    go.touch()
    outputs = [p.communicate(timeout=280) for p in procs]
    elapsed = time.monotonic() - started
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    print(f"\n{TOTAL} concurrent appends took {elapsed:.1f} s")

    memsync_ids: list[str] = []
    for out, _ in outputs[:WRITERS_PER_KIND]:
        memsync_ids += out.split()
    assert len(memsync_ids) == WRITERS_PER_KIND * APPENDS

    data = path.read_bytes()
    lines, end = split_complete(data)
    assert end == len(data), "the file ends with a torn line"
    seen: Counter[str] = Counter()
    headers = 0
    for n, raw in enumerate(lines, 1):
        parsed = classify(raw, source=str(path), line_no=n)
        assert not isinstance(parsed, Invalid), f"line {n} is bad ({parsed.reason}): {raw!r}"
        assert not isinstance(parsed, Blank), f"line {n} is blank"
        if isinstance(parsed, Header):
            headers += 1
            continue
        assert isinstance(parsed, Record)
        seen[parsed.id] += 1
    assert headers == 1
    assert sum(seen.values()) == TOTAL
    expected = set(memsync_ids) | {
        f"plain{w}-{i:05d}" for w in range(WRITERS_PER_KIND) for i in range(APPENDS)
    }
    assert len(expected) == TOTAL
    assert set(seen) == expected
    assert max(seen.values()) == 1

    view = Memory(path).view()
    assert view.bad == []
    assert len(view) == TOTAL
    assert {r.id for r in view.records} == expected
    # Each record object survived byte for byte: its JSON parses back to one object.
    assert all(json.loads(r.raw)["id"] == r.id for r in view.records)
