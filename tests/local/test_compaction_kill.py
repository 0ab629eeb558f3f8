"""kill -9 of a compaction at 100 random moments (SEMANTICS rule 16; DESIGN "crash safety").

A child runs `memsync compact FILE --quiet-seconds 0` on a file of a few thousand records
with planted bad lines, and is killed with SIGKILL after a random delay drawn over the whole
length of a run (measured first), counted from the moment it starts compacting: the child
imports what it runs first, then waits for the go (`tests.helpers.ready_then_run`). After each kill the file is readable, holds no
bad lines but planted ones, has the view it had before, and every planted bad line is in
the file or in its side file. Leftover temp files change nothing, and the next compaction
removes them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from memsync.core.lines import split_complete
from memsync.core.records import canonical
from memsync.core.timestamps import SECOND, format_ts
from memsync.local.compaction import compact_file, rejected_path
from memsync.local.fresh import header_line
from memsync.local.reading import view_of

T0 = 1_767_225_600 * SECOND  # 2026-01-01T00:00:00Z
ROOT = Path(__file__).resolve().parents[2]
"""The repository: `python -m tests.helpers.ready_then_run` runs from there."""
NOW = T0 + 200 * 24 * 3600 * SECOND
RECORDS = 4000
KILLS = 100
SHARDS = 4
"""The 100 kills run as 4 tests of 25 (each with its own random moments and its own
measure of a run), so that parallel workers share them: one test of 100 took 2 to 3
minutes of one worker, the longest path of the suite."""
PLANTED = [b"{this is not json", b'{"id": 7, "kind": "fact"}', b"\xff\xfe not utf-8"]


def make_file(path: Path) -> None:
    """A realistic mix: new entries, later versions, tombstones (some past the 90-day
    horizon), re-adds, supersessions, expiry, user and inferred, and planted bad lines."""
    rng = random.Random(20260101)
    ids: list[str] = []
    t = 0.0
    lines = [header_line(T0, "f" * 16)]
    plant = {RECORDS * (k + 1) // 4: bad for k, bad in enumerate(PLANTED)}
    for i in range(RECORDS):
        t += rng.uniform(1, 4000)
        at = format_ts(T0 + round(t * SECOND))
        roll = rng.random()
        if ids and roll < 0.08:
            obj: dict[str, object] = {"id": rng.choice(ids), "deleted": True, "created_at": at}
        else:
            rid = rng.choice(ids) if ids and roll < 0.30 else f"id{i:05d}"
            obj = {"id": rid, "kind": "fact", "text": f"Record {i}.", "created_at": at}
            if rng.random() < 0.1:
                obj["source"] = "user"
            if ids and rng.random() < 0.04:
                obj["supersedes"] = rng.choice(ids)
            if rng.random() < 0.05:
                obj["expires_at"] = format_ts(T0 + round((t + rng.uniform(-1e5, 4e7)) * SECOND))
            ids.append(rid)
        lines.append(json.dumps(obj).encode() + b"\n")
        if i in plant:
            lines.append(plant[i] + b"\n")
    path.write_bytes(b"".join(lines))
    path.chmod(0o600)


def restore(path: Path, data: bytes) -> None:
    """Put the original file back as a new inode, as a fresh write of it would be."""
    fresh = path.with_name("fresh")
    fresh.write_bytes(data)
    fresh.chmod(0o600)
    os.replace(fresh, path)


def canonical_view(path: Path) -> tuple[list[bytes], list[bytes]]:
    """The view (canonical records) and the bad lines' bytes of the file."""
    result = view_of([path], NOW)
    lines, _ = split_complete(path.read_bytes())
    bad = [lines[b.line - 1] for b in result.bad]
    return [canonical(r) for r in result.records], bad


def command(path: Path) -> list[str]:
    """`memsync compact` of `path`, in a process that waits for the go (`started`)."""
    return [
        sys.executable,
        "-m",
        "tests.helpers.ready_then_run",
        "compact",
        str(path),
        "--quiet-seconds",
        "0",
        "--now",
        format_ts(NOW),
    ]


def started(path: Path) -> subprocess.Popen[bytes]:
    """The compaction of `path` in a child that has imported what it runs, just told to go:
    what follows is the compaction's own work."""
    child = subprocess.Popen(
        command(path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    child.stdin.write(b"go\n")
    child.stdin.flush()
    return child


BEFORE, AFTER = "before the rename", "after the rename"
MAX_KILLS = 50
"""A shard kills at 25 moments, and goes on (up to this many) while its kills all landed on
one side of the rename: the moments must reach both."""


def _moment(rng: random.Random, run_time: float, outcomes: Counter[str], kills: int) -> float:
    """When to kill the `kills`-th child: a random moment over twice a measured run. A run
    on a loaded machine may be much shorter or longer than the one measured, so past the
    25 kills of a shard, a side of the rename no kill has reached yet is aimed at: the
    first quarter of a run (before), or past the run (after)."""
    if kills <= KILLS // SHARDS or (outcomes[BEFORE] and outcomes[AFTER]):
        return rng.uniform(0, run_time * 2)
    if not outcomes[BEFORE]:
        return rng.uniform(0, run_time / 4)
    return rng.uniform(run_time, run_time * 4)


def leftovers(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if ".tmp-" in n or ".old-" in n)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("shard", range(SHARDS))
def test_kill_9_at_random_moments_loses_nothing(tmp_path: Path, shard: int) -> None:
    folder = tmp_path / "mem"
    folder.mkdir()
    path = folder / "m.jsonl"
    make_file(path)
    original = path.read_bytes()
    expected, planted = canonical_view(path)
    assert planted == PLANTED

    durations = []
    for _ in range(2):
        with started(path) as child:
            began = time.monotonic()
            assert child.wait() == 0
            durations.append(time.monotonic() - began)
        assert canonical_view(path) == (expected, [])
        restore(path, original)
        rejected_path(path).unlink()
    # The longest of the two, and moments up to twice it: on a loaded machine (the suite's
    # other workers) a run may take longer than measured, and every kill then landed
    # before the rename; past the end, a kill finds the compaction done ("after").
    run_time = max(durations)

    rng = random.Random(16 + shard)
    outcomes: Counter[str] = Counter()
    kills = 0
    while kills < KILLS // SHARDS or (
        kills < MAX_KILLS and not (outcomes[BEFORE] and outcomes[AFTER])
    ):
        kills += 1
        restore(path, original)
        with started(path) as child:
            time.sleep(_moment(rng, run_time, outcomes, kills))
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        view, bad = canonical_view(path)
        assert view == expected
        assert set(bad) <= set(PLANTED)  # readable: no bad line but the planted ones
        side = rejected_path(path)
        moved = side.read_bytes() if side.exists() else b""
        for line in PLANTED:
            assert line in bad or line + b"\n" in moved  # never lost
        outcomes[BEFORE if path.read_bytes() == original else AFTER] += 1
        if leftovers(folder):
            outcomes["left a temp file or link"] += 1

    # The next compaction runs to the end and removes what the kills left.
    restore(path, original)
    result = compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)
    assert result.rewritten
    assert leftovers(folder) == []
    assert canonical_view(path) == (expected, [])
    assert outcomes[BEFORE] > 0
    assert outcomes[AFTER] > 0
    print(f"run {run_time:.2f} s; kills: {dict(outcomes)}")
