"""Merges into a file that other processes append to at the same time (SEMANTICS rules 1
and 13): two writers through `memsync.Memory.add` (which take the file's lock), two with
plain `open(path, "a")` and one line per write (which take no lock at all), while
`memsync merge` runs again and again, three processes at a time (two through the shared
persistent index, one reading everything), from overlapping sets of source files that keep
growing too.

At the end every record appended by anyone is in the file exactly once, and the file holds
no bad line. Real processes throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from memsync.core.lines import Header, Invalid, classify, split_complete
from memsync.core.records import Record
from memsync.local.memory import Memory

pytestmark = pytest.mark.slow

LINES_PER_WRITER = 200

MEMORY_WRITER = """
import sys, time
from memsync import Memory
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
mem = Memory(path)
for i in range(count):
    entry = mem.add("fact", f"{name} line {i}", scope="project:concurrency")
    print(entry.id, flush=True)
    time.sleep(0.004)
"""

PLAIN_WRITER = """
import json, sys, time
from datetime import datetime, timezone
path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "a") as f:
    for i in range(count):
        now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        obj = {"id": f"{name}-{i:06d}", "kind": "fact", "text": f"{name} line {i}",
               "created_at": now.replace("+00:00", "Z")}
        f.write(json.dumps(obj) + "\\n")
        f.flush()  # one write() per line
        print(obj["id"], flush=True)
        time.sleep(0.004)
"""


def source_line(name: str, i: int) -> bytes:
    obj = {
        "id": f"{name}-{i:06d}",
        "kind": "lesson",
        "text": f"from source {name}, number {i}",
        "created_at": "2026-11-01T00:00:00Z",
    }
    return json.dumps(obj).encode() + b"\n"


def merge_command(sources: list[Path], dest: Path, *flags: str) -> list[str]:
    return [
        sys.executable, "-m", "memsync", "merge", *map(str, sources), "--into", str(dest), *flags
    ]  # fmt: skip


def test_merges_while_four_processes_append(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
    dest = Memory.open(tmp_path / "dest.jsonl").path
    sources = [tmp_path / f"src{i}.jsonl" for i in range(3)]
    written: Counter[str] = Counter()
    for n, src in enumerate(sources):
        src.write_bytes(b"".join(source_line(f"s{n}", i) for i in range(40)))
        written.update(f"s{n}-{i:06d}" for i in range(40))

    writers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(dest), name, str(LINES_PER_WRITER)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for script, name in (
            (MEMORY_WRITER, "m0"),
            (MEMORY_WRITER, "m1"),
            (PLAIN_WRITER, "p0"),
            (PLAIN_WRITER, "p1"),
        )
    ]

    merges: list[subprocess.Popen[str]] = []
    rounds = during = 0
    deadline = time.monotonic() + 60
    while rounds < 6 or any(w.poll() is None for w in writers):
        assert time.monotonic() < deadline, "the writers did not finish"
        during += any(w.poll() is None for w in writers)
        # The sources grow between merges, by appends of their own.
        for n, src in enumerate(sources):
            with open(src, "ab") as f:
                f.write(b"".join(source_line(f"s{n}", 40 + 5 * rounds + i) for i in range(5)))
            written.update(f"s{n}-{40 + 5 * rounds + i:06d}" for i in range(5))
        # Three merges at a time, from overlapping sources: two through the persistent
        # index (one SQLite file for DEST, shared), one reading everything.
        batch = [
            merge_command(sources, dest),
            merge_command([sources[rounds % 3]], dest),
            merge_command([sources[(rounds + 1) % 3]], dest, "--no-index"),
        ]
        merges += [
            subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
            for argv in batch
        ]
        for proc in merges[-3:]:
            proc.wait(timeout=60)
        rounds += 1

    for proc in [*writers, *merges]:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        if proc in writers:
            written.update(out.split())
    final = subprocess.run(
        merge_command(sources, dest),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert "bad line" not in final.stdout

    data = dest.read_bytes()
    assert data.endswith(b"\n")
    lines, _ = split_complete(data)
    parsed = [classify(raw) for raw in lines]
    assert [p for p in parsed if isinstance(p, Invalid)] == []
    assert sum(isinstance(p, Header) for p in parsed) == 1
    held = Counter(p.id for p in parsed if isinstance(p, Record))
    assert sum(written.values()) == 4 * LINES_PER_WRITER + sum(
        1 for src in sources for _ in split_complete(src.read_bytes())[0]
    )
    assert held == Counter(dict.fromkeys(written, 1))
    assert during >= 3, f"only {during} of {rounds} rounds of merges ran during the appends"
