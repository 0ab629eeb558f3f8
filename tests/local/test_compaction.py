"""compact_file on real files with real processes (SEMANTICS rules 4, 15 and 16).

Writers in other processes append while compaction runs, some through `Memory.add` and
some as agents that know nothing of memsync; a writer that keeps its handle open holds
compaction off; bad lines go to the side file; a dry run changes nothing; and merges of
stale replicas through `memsync.local.merge.merge_files` cannot bring anything back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from memsync import ALL, Memory, NotQuiet
from memsync.cli import main
from memsync.core.lines import Header, Invalid, classify, split_complete
from memsync.core.records import Record
from memsync.core.timestamps import format_ts
from memsync.local.compaction import CompactionResult, compact_file
from memsync.local.drain import Drained, drain, rejected_path
from memsync.local.fresh import header_line
from memsync.local.merge import merge_files
from memsync.local.reading import view_of
from tests.helpers.records import DAY, T0, entry, tomb
from tests.helpers.writers import HOLDER, LINUX_DETECTORS, holding, only, release

NOW = T0 + 30 * DAY
"""Tombstones of the samples are 30 days old: within the default 90-day horizon."""
HEADER = header_line(T0, "0123456789abcdef")


def write(path: Path, *lines: bytes) -> Path:
    """A memory file (mode 0600) holding a header and `lines`."""
    path.write_bytes(HEADER + b"".join(line + b"\n" for line in lines))
    path.chmod(0o600)
    return path


def append(path: Path, *lines: bytes) -> None:
    with open(path, "ab") as f:
        f.write(b"".join(line + b"\n" for line in lines))


def live(path: Path, now: int = NOW) -> list[bytes]:
    return [rec.raw for rec in view_of([path], now).records]


def records_of(path: Path) -> list[Record]:
    lines, _ = split_complete(path.read_bytes())
    return [r for r in map(classify, lines) if isinstance(r, Record)]


def bad_lines(path: Path) -> list[bytes]:
    lines, _ = split_complete(path.read_bytes())
    return [raw for raw in lines if isinstance(classify(raw), Invalid)]


def generation(path: Path) -> str | None:
    first = path.read_bytes().split(b"\n", 1)[0]
    header = classify(first)
    assert isinstance(header, Header)
    return header.generation


def compact(path: Path) -> CompactionResult:
    return compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)


SAMPLE = (
    entry("a", 1),
    entry("a", 2, text="a, later"),
    entry("b", 1, user=True),
    tomb("b", 2),
    entry("c", 1),
    entry("d", 3, supersedes="c"),
    tomb("d", 4),
    entry("e", 1, expires=2),
)


# The basics


def test_compaction_drops_what_the_view_does_not_need(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE, entry("a", 1))
    before = live(path)
    result = compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)
    assert live(path) == before
    assert result.rewritten
    assert result.dropped == {"older version": 2, "deleted version": 1, "header": 1}
    assert result.size_before > result.size_after == path.stat().st_size
    assert result.lines_after == len(path.read_bytes().splitlines()) == 7
    assert [r.raw for r in records_of(path)] == [
        entry("c", 1),
        entry("e", 1, expires=2),
        entry("a", 2, text="a, later"),
        tomb("b", 2),
        entry("d", 3, supersedes="c"),
        tomb("d", 4),
    ]


def test_new_generation_token_and_header(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    old = generation(path)
    result = compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)
    assert result.generation is not None
    assert generation(path) == result.generation != old
    assert path.read_bytes().count(b'"format"') == 1


def test_an_already_compact_file_is_left_alone(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    compact(path)
    data, ino = path.read_bytes(), path.stat().st_ino
    result = compact_file(path, now=NOW, quiet_seconds=0)
    assert not result.rewritten
    assert result.generation is None
    assert (path.read_bytes(), path.stat().st_ino) == (data, ino)


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_file_mode_is_kept(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    path.chmod(mode)
    compact(path)
    assert path.stat().st_mode & 0o777 == mode


def test_memory_compact_delegates(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    before = live(path)
    result = Memory(path).compact(now=NOW, quiet_seconds=0, grace_seconds=0)
    assert result.rewritten
    assert live(path) == before


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE, b"not json")
    data, names = path.read_bytes(), sorted(os.listdir(tmp_path))
    dry = compact_file(path, now=NOW, quiet_seconds=3600, dry_run=True)
    assert path.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == names  # no lock file, no side file, no temp file
    assert not dry.rewritten
    real = compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)
    assert (dry.dropped, dry.kept, dry.rejected) == (real.dropped, real.kept, real.rejected)
    assert (dry.size_before, dry.size_after) == (real.size_before, real.size_after)


def test_tombstones_past_the_horizon_go(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    result = compact_file(
        path, now=NOW, horizon_days=10, quiet_seconds=0, grace_seconds=0, acknowledged=ALL
    )
    assert result.dropped["old tombstone"] == 1  # b's; d's is pinned by its supersession
    assert result.pinned == 1
    assert tomb("d", 4) in path.read_bytes()
    assert tomb("b", 2) not in path.read_bytes()
    held_back = write(tmp_path / "n.jsonl", *SAMPLE)
    compact_file(
        held_back,
        now=NOW,
        horizon_days=10,
        quiet_seconds=0,
        grace_seconds=0,
        acknowledged=lambda rec: rec.id != "b",
    )
    assert tomb("b", 2) in held_back.read_bytes()


# Bad lines and torn tails go to the side file, never nowhere (rule 4)


def test_bad_lines_go_to_the_side_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = [b"{not json", b'{"id": 3, "created_at": "x"}', b"\xff\xfe binary", b"[1, 2]"]
    path = write(tmp_path / "m.jsonl", entry("a", 1), bad[0], bad[1], entry("b", 1))
    append(path, bad[2], bad[3])
    result = compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0)
    assert result.rejected == 4
    assert bad_lines(path) == []
    side = rejected_path(path)
    assert side.stat().st_mode & 0o777 == 0o600
    assert bad_lines(side) == bad  # byte for byte, in order
    notes = [json.loads(raw) for raw in side.read_bytes().splitlines() if b"rejected_from" in raw]
    assert [(n["rejected_from"], n["line"]) for n in notes] == [
        ("m.jsonl", 3),
        ("m.jsonl", 4),
        ("m.jsonl", 6),
        ("m.jsonl", 7),
    ]
    # The side file is a memory file `memsync check` reads: it lists exactly the bad lines.
    assert main(["check", str(side), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [b["line"] for b in report["bad"]] == [3, 5, 7, 9]
    # A second compaction appends to it.
    append(path, b"again bad")
    compact(path)
    assert bad_lines(side) == [*bad, b"again bad"]


def test_an_unterminated_last_line_goes_to_the_side_file(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    with open(path, "ab") as f:
        f.write(b'{"id": "torn", "kind": "fa')
    compact(path)
    assert path.read_bytes().endswith(b"\n")
    assert rejected_path(path).read_bytes().endswith(b'{"id": "torn", "kind": "fa\n')


# Not quiet: exit 3 and a reason


def test_quiet_period_is_respected(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    data = path.read_bytes()
    with pytest.raises(NotQuiet, match=r"changed 0 s ago; quiet period is 60 s"):
        compact_file(path, now=NOW, quiet_seconds=60)
    assert path.read_bytes() == data
    old = time.time() - 61
    os.utime(path, (old, old))
    assert compact_file(path, now=NOW, quiet_seconds=60, grace_seconds=0).rewritten


@pytest.fixture(params=LINUX_DETECTORS)
def detector(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tests with a real holder run under each writer detector that works on Linux
    (issue 23, item 1)."""
    name: str = request.param
    only(monkeypatch, name)
    return name


def test_a_writer_holding_the_file_open_holds_compaction_off(tmp_path: Path, detector: str) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    written = []
    with holding(path) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        for i in range(3):
            line = entry(f"held{i}", 10 + i).decode()
            holder.stdin.write(line + "\n")
            holder.stdin.flush()
            assert holder.stdout.readline() == "ok\n"
            written.append(line.encode())
            with pytest.raises(NotQuiet, match=rf"open for writing by pid {holder.pid} \("):
                compact_file(path, now=NOW, quiet_seconds=0)
        release(holder)
    assert compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0).rewritten
    assert all(raw in live(path) for raw in written)


def test_a_forced_compaction_does_not_wait_for_the_quiet_period(tmp_path: Path) -> None:
    """Issue 13: the daemon, after too many postponements, compacts a file that keeps
    changing; the drain (rule 16) keeps what is appended meanwhile."""
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    with pytest.raises(NotQuiet, match="changed 0 s ago"):
        compact_file(path, now=NOW, quiet_seconds=60)
    assert compact_file(path, now=NOW, quiet_seconds=60, grace_seconds=0, force=True).rewritten


def test_a_forced_compaction_still_waits_for_a_writer_holding_the_file_open(
    tmp_path: Path, detector: str
) -> None:
    """A handle kept open would write to the old inode after the drain: even forced,
    compaction waits for it (a while), then gives up and says who holds it."""
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    data = path.read_bytes()
    with holding(path) as holder:
        started = time.monotonic()
        with pytest.raises(NotQuiet, match=rf"open for writing by pid {holder.pid} \(.* 0.3 s"):
            compact_file(path, now=NOW, quiet_seconds=60, grace_seconds=0.3, force=True)
        assert time.monotonic() - started >= 0.3
        assert path.read_bytes() == data
        release(holder)
    assert compact_file(path, now=NOW, quiet_seconds=60, grace_seconds=0, force=True).rewritten


LOCKER = """
import sys
from pathlib import Path
from memsync.local.lock import file_lock
with file_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_held_lock_is_not_quiet(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    with subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as locker:
        assert locker.stdin is not None
        assert locker.stdout is not None
        assert locker.stdout.readline() == "locked\n"
        with pytest.raises(NotQuiet, match="locked by another memsync process"):
            compact_file(path, now=NOW, quiet_seconds=0, lock_timeout=0.1)
        locker.stdin.close()
        assert locker.wait(timeout=30) == 0
    assert compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=0).rewritten


# Lines that reach the old inode late (rule 16)


def test_drain_copies_what_reaches_the_old_inode_after_the_rename(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", entry("a", 1))
    late_writer = open(path, "ab", buffering=0)  # noqa: SIM115 (held across the rename)
    old_fd = os.open(path, os.O_RDONLY)
    try:
        offset = path.stat().st_size
        new = tmp_path / "new.jsonl"
        write(new, entry("a", 1))
        os.replace(new, path)
        late_writer.write(entry("late", 5) + b"\n" + entry("later", 6) + b"\n")
        late_writer.write(b'{"id": "unfinished"')
        drained = drain(old_fd, offset, path, time.monotonic() + 0.2)
    finally:
        late_writer.close()
        os.close(old_fd)
    assert drained.lines == 2
    assert drained.torn == b'{"id": "unfinished"'
    assert path.read_bytes().endswith(entry("late", 5) + b"\n" + entry("later", 6) + b"\n")


def test_drain_waits_for_a_writer_that_opened_the_file_before_the_rename(
    tmp_path: Path, detector: str
) -> None:
    """The logrotate problem: a process that opened the file just before the rename keeps
    writing into the old inode. The drain goes on until it closes it (within the grace
    period), so that none of its lines are lost."""
    path = write(tmp_path / "m.jsonl", entry("a", 1))
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        assert holder.stdout.readline() == "open\n"
        old_fd = os.open(path, os.O_RDONLY)
        try:
            offset = path.stat().st_size
            os.replace(write(tmp_path / "new.jsonl", entry("a", 1)), path)
            result: list[object] = []
            thread = threading.Thread(
                target=lambda: result.append(drain(old_fd, offset, path, time.monotonic() + 30))
            )
            started = time.monotonic()
            thread.start()
            time.sleep(0.3)  # the drain is waiting: the holder has not written yet
            for i in range(2):
                holder.stdin.write(entry(f"late{i}", 5 + i).decode() + "\n")
                holder.stdin.flush()
                assert holder.stdout.readline() == "ok\n"
            holder.stdin.write("close\n")
            holder.stdin.flush()
            assert holder.wait(timeout=30) == 0
            thread.join(timeout=30)
            elapsed = time.monotonic() - started
        finally:
            os.close(old_fd)
    assert elapsed < 10  # it stopped when the writer closed, not at the end of the grace
    [drained] = result
    assert isinstance(drained, Drained)
    assert drained.lines == 2
    assert entry("late0", 5) in live(path)
    assert entry("late1", 6) in live(path)


def test_an_old_inode_still_open_is_kept_aside_until_its_writer_closes(
    tmp_path: Path, detector: str
) -> None:
    """A writer still holding the replaced file when the drain ends: its aside link stays
    (renamed for the offset reached), and a later compaction copies what it wrote since."""
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        assert holder.stdout.readline() == "open\n"
        offset = path.stat().st_size
        os.link(path, tmp_path / f".m.jsonl.old-{os.getpid()}-{offset}")
        os.replace(write(tmp_path / "new.jsonl", *SAMPLE), path)

        def say(line: bytes) -> None:
            assert holder.stdin is not None
            assert holder.stdout is not None
            holder.stdin.write(line.decode() + "\n")
            holder.stdin.flush()
            assert holder.stdout.readline() == "ok\n"

        say(entry("first", 7))
        compact(path)
        assert entry("first", 7) in live(path)
        [aside] = [n for n in os.listdir(tmp_path) if ".old-" in n]
        assert aside.endswith(f"-{offset + len(entry('first', 7)) + 1}")
        say(entry("second", 8))
        holder.stdin.write("close\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    append(path, entry("a", 0.5))  # something to drop, so that the file is rewritten
    compact(path)
    assert entry("second", 8) in live(path)
    assert [n for n in os.listdir(tmp_path) if ".old-" in n] == []


def test_a_killed_compaction_is_recovered_by_the_next(tmp_path: Path) -> None:
    """A compaction killed after its rename leaves `.<name>.old-<pid>-<offset>`, a link to
    the old inode; lines that reached it late are copied by the next compaction. Its temp
    file is removed."""
    path = write(tmp_path / "m.jsonl", *SAMPLE)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(dead.stdout)
    offset = path.stat().st_size
    old = tmp_path / "old-inode"
    old.write_bytes(path.read_bytes() + entry("late", 9) + b"\n")
    os.link(old, tmp_path / f".m.jsonl.old-{pid}-{offset}")
    old.unlink()
    (tmp_path / f".m.jsonl.tmp-compact-{pid}").write_bytes(b"half a file")
    (tmp_path / f".m.jsonl.tmp-{pid}").write_bytes(b"atomic_replace's")
    fresh = tmp_path / ".m.jsonl.tmp-1a2b3c4d5e6f"  # a transport's, in use: not ours
    fresh.write_bytes(b"in flight")
    compact(path)
    assert entry("late", 9) in live(path)
    assert sorted(os.listdir(tmp_path)) == sorted(["m.jsonl", "m.jsonl.lock", fresh.name])


# Four writers while compaction runs 50 times


MEMSYNC_WRITER = """
import os, random, sys, time
from memsync import Memory
path, stop = sys.argv[1], sys.argv[2]
mem = Memory(path)
rng = random.Random(os.getpid())
while not os.path.exists(stop):
    print(mem.add("fact", "A fact learned while compaction runs.", source="session:w").id,
          flush=True)
    time.sleep(rng.uniform(0.0, 0.004))
"""

PLAIN_WRITER = """
import json, os, random, sys, time
path, stop, worker = sys.argv[1], sys.argv[2], sys.argv[3]
rng = random.Random(os.getpid())
i = 0
while not os.path.exists(stop):
    rid = f"plain{worker}-{i:06d}"
    line = json.dumps({"id": rid, "kind": "lesson", "text": "Written by a plain agent.",
                       "created_at": "2026-06-01T00:00:00Z"}).encode() + b"\\n"
    with open(path, "ab", buffering=0) as f:  # opened and closed for each line
        f.write(line)
    print(rid, flush=True)
    i += 1
    time.sleep(rng.uniform(0.0, 0.004))
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_four_writers_lose_nothing_while_compaction_runs_50_times(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE, *(entry(f"base{i}", i) for i in range(300)))
    # Dead lines for every compaction to drop, so that each one really rewrites the file.
    stop = tmp_path / "stop"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(stop), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, script in enumerate([MEMSYNC_WRITER, MEMSYNC_WRITER, PLAIN_WRITER, PLAIN_WRITER])
    ]
    runs = refused = drained = 0
    try:
        deadline = time.monotonic() + 180
        while runs < 50 and time.monotonic() < deadline:
            append(path, entry("churn", runs + 1), entry("churn", runs + 0.5))
            try:
                result = compact_file(path, now=NOW, quiet_seconds=0, grace_seconds=2)
            except NotQuiet:
                refused += 1
                continue
            assert result.rewritten
            runs += 1
            drained += result.drained
    finally:
        stop.touch()
        outputs = [w.communicate(timeout=60) for w in writers]
    assert runs == 50, f"only {runs} compactions ran ({refused} refused)"
    for w, (_out, err) in zip(writers, outputs, strict=True):
        assert w.returncode == 0, err
    appended = [line for out, _err in outputs for line in out.split()]
    assert len(appended) > 200
    assert len(set(appended)) == len(appended)
    ids = Counter(r.id for r in records_of(path))
    assert [rid for rid in appended if ids[rid] != 1] == []  # each line exactly once
    compact(path)
    view = view_of([path], NOW)
    assert view.bad == []
    live_ids = {r.id for r in view.records}
    expected = set(appended) | {f"base{i}" for i in range(300)} | {"a", "churn"}
    assert live_ids == expected
    assert len(view.records) == len(expected)


# Stale replicas cannot bring anything back (rule 15), through merge_files


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stale", "original", "horizon_days"),
    [
        pytest.param([entry("x", 1)], [entry("x", 1), tomb("x", 2)], 90.0, id="deleted"),
        pytest.param(
            [entry("x", 1)],
            [entry("y", 2, supersedes="x"), tomb("y", 3)],
            0.0,
            id="superseder-deleted",
        ),
        pytest.param([entry("x", 1)], [entry("x", 1), entry("x", 2)], 90.0, id="later-version"),
        pytest.param(
            [entry("x", 1)], [entry("x", 1), entry("x", 2, expires=3)], 90.0, id="expired"
        ),
        pytest.param(
            [entry("x", 1, user=True)],
            [entry("x", 1, user=True), tomb("x", 2), entry("x", 3)],
            90.0,
            id="user-tombstone-inferred",
        ),
    ],
)
def test_a_stale_replica_brings_nothing_back(
    tmp_path: Path, stale: list[bytes], original: list[bytes], horizon_days: float
) -> None:
    replica = write(tmp_path / "replica.jsonl", *stale)
    path = write(tmp_path / "m.jsonl", *original)
    union = write(tmp_path / "union.jsonl", *original, *stale)
    compact_file(path, now=NOW, horizon_days=horizon_days, quiet_seconds=0, grace_seconds=0)
    merge_files(path, [replica], now=NOW)
    assert live(path) == live(union)
    for now in (T0, T0 + 2_500_000, NOW):
        assert live(path, now) == live(union, now)


# The command line


def test_cli_compact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "m.jsonl", *SAMPLE, b"bad line")
    data = path.read_bytes()
    now = format_ts(NOW)
    assert main(["compact", str(path), "--now", now, "--quiet-seconds", "0", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would drop: 1 older version, 1 deleted version, 1 header" in out
    assert "would move 1" in out
    assert path.read_bytes() == data

    assert main(["compact", str(path), "--now", now]) == 3  # written a moment ago
    err = capsys.readouterr().err
    assert err.startswith("memsync: ")
    assert "quiet period is 60 s" in err

    argv = ["compact", str(path), "--now", now, "--quiet-seconds", "0", "--grace-seconds", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{path}: {len(data):,} -> {path.stat().st_size:,} bytes" in out
    assert "dropped: 1 older version, 1 deleted version, 1 header" in out
    assert f"moved 1 to {rejected_path(path)}" in out

    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rewritten"] is False
    assert doc["size_before"] == doc["size_after"] == path.stat().st_size

    append(path, entry("a", 0.5))
    assert main([*argv, "--json", "--horizon-days", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dropped"] == {"older version": 1, "old tombstone": 1, "header": 1}
    assert doc["pinned"] == 1

    assert main(["compact", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such memory file" in capsys.readouterr().err
    assert main(["compact", str(path), "--quiet-seconds", "-1"]) == 2


# --- links and permissions (issue 13, item 13) ------------------------------------------


def _with_garbage(path: Path) -> tuple[Memory, str]:
    mem = Memory.open(path)
    kept = mem.add("fact", "Kept.").id
    for i in range(3):
        old = mem.add("fact", f"Old {i}.")
        mem.forget(old.id)
    return mem, kept


def test_compacting_through_a_symlink_compacts_the_target_and_keeps_the_link(
    tmp_path: Path,
) -> None:
    """Renaming over the link turned it into a regular file: agents writing to the target
    silently stopped syncing. Now the target is compacted and the link stays a link."""
    target = tmp_path / "real" / "me.jsonl"
    target.parent.mkdir()
    _, kept = _with_garbage(target)
    link = tmp_path / "me.jsonl"
    link.symlink_to(target)
    before = target.stat().st_size
    compact_file(link, quiet_seconds=0, horizon_days=0)
    assert link.is_symlink()
    assert link.resolve() == target.resolve()
    assert target.stat().st_size < before
    Memory.open(link).add("fact", "Through the link.")
    texts = {r.fields()["text"] for r in view_of([target]).records}
    assert texts == {"Kept.", "Through the link."}
    assert kept in {r.id for r in view_of([link]).records}


def test_a_read_only_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    _with_garbage(path)
    path.chmod(0o444)
    before = path.read_bytes()
    with pytest.raises(PermissionError, match="read-only"):
        compact_file(path, quiet_seconds=0, horizon_days=0)
    assert path.read_bytes() == before
    assert (path.stat().st_mode & 0o777) == 0o444


def test_lines_left_aside_by_a_killed_compaction_come_back_at_the_next_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13, item 8: a compaction killed right after its rename leaves the lines a
    lock-free agent appended meanwhile in an aside link to the old inode. They were
    invisible (and never synced) until the next compaction, a day later; now the next
    command that touches the file copies them in, and the link goes."""
    path = tmp_path / "me.jsonl"
    _, kept = _with_garbage(path)
    old = path.read_bytes()
    offset = len(old)
    late = b'{"id": "late00000001", "kind": "fact", "text": "Appended during compaction.", "created_at": "2026-11-30T00:00:00Z"}\n'
    aside = tmp_path / f".me.jsonl.old-999999-{offset}"  # its compaction's process is dead
    os.link(path, aside)
    with open(path, "ab") as f:  # the agent's append reaches the old inode
        f.write(late)
    compacted = tmp_path / "compacted.jsonl"
    compacted.write_bytes(old)  # what the killed compaction renamed in (same records)
    os.replace(compacted, path)  # ... and then it was killed: no drain
    assert b"Appended during compaction." not in path.read_bytes()

    assert main(["show", str(path)]) == 0
    assert "Appended during compaction." in capsys.readouterr().out
    assert not aside.exists()
    assert path.read_bytes().count(late) == 1
    assert kept in {r.id for r in view_of([path]).records}
