"""Issue 13, item 4: a line over rule 4's limit (64 KiB) is a bad line, skipped by
streaming, in time and memory that follow the limit and the read size, not the line.

Each run is a real `memsync` process, so that its peak resident memory (VmHWM) is its
own: with a 160 MB line, holding the line whole even once would
exceed the bound these tests pin (this is a bound, not a timing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.core.lines import LONG_LINE_KEPT, MAX_LINE_BYTES, LineSplitter
from memsync.local.fresh import header_line
from memsync.local.merge import merge_indexed
from memsync.local.statedir import StateDir
from memsync.local.storage import CHUNK_BYTES
from tests.helpers.sync import entry_line, make_replica

LONG = 160 * 1024 * 1024
PEAK_MB = 120  # a Python process with memsync's imports is 30 to 60 MB; the line is 160


def _write_with_long_line(path: Path, ids: tuple[str, str]) -> None:
    """A memory file: a record, a `LONG`-byte line (a record's shape, one huge string),
    a record; written in pieces so that the test itself stays small."""
    with open(path, "wb") as f:
        f.write(header_line(1))
        f.write(entry_line(ids[0], 1_000_000, "Before the long line.") + b"\n")
        f.write(b'{"id":"huge","kind":"fact","created_at":"2026-01-01T00:00:01Z","text":"')
        piece = b"x" * (1 << 20)
        f.writelines(piece for _ in range(LONG // len(piece)))
        f.write(b'"}\n')
        f.write(entry_line(ids[1], 2_000_000, "After the long line.") + b"\n")


_MEASURED = """
import sys
from memsync.cli import main
try:
    rc = main(sys.argv[2:])
finally:
    # VmHWM: this process's peak resident memory since its exec. (wait4's ru_maxrss would
    # start from the parent's size at the fork: the whole pytest process.) Without /proc
    # (macOS), this process's own ru_maxrss, in bytes there: a fresh process image's.
    try:
        with open("/proc/self/status") as status:
            peak = next(line for line in status if line.startswith("VmHWM:")).split()[1]
    except FileNotFoundError:
        import resource
        peak = str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    with open(sys.argv[1], "w") as out:
        out.write(peak)
sys.exit(rc)
"""


def _peak(tmp: Path, *args: str) -> tuple[int, str, str, float]:
    """`memsync <args>` in a child: its exit code, output, error output and peak resident
    memory in MB (its own)."""
    peak = tmp / "run.peak"
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(peak), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr, int(peak.read_text()) / 1024


def test_the_splitter_keeps_a_long_line_cut_and_counts_it_once() -> None:
    """Pure: fed in small blocks, a line far over the limit comes out once, cut to
    LONG_LINE_KEPT bytes (still over the limit), between its neighbours, and the
    pending count gives the exact stream offsets."""
    stream = b"a\n" + b"x" * (5 * MAX_LINE_BYTES) + b"\nb\ntorn"
    splitter = LineSplitter()
    lines: list[bytes] = []
    for i in range(0, len(stream), 1000):
        got, _ = splitter.feed(stream[i : i + 1000])
        lines += got
    assert [len(x) for x in lines] == [1, LONG_LINE_KEPT, 1]
    assert lines[0] == b"a"
    assert lines[2] == b"b"
    assert splitter.pending == len(b"torn")

    whole = LineSplitter(keep_long=True)
    kept: list[bytes] = []
    for i in range(0, len(stream), 1000):
        kept += whole.feed(stream[i : i + 1000])[0]
    assert kept == stream.split(b"\n")[:-1]  # compaction's reads: every byte, as it is


@pytest.mark.slow
def test_check_and_show_stream_past_a_long_local_line(tmp_path: Path) -> None:
    path = tmp_path / "me.jsonl"
    _write_with_long_line(path, ("before", "after"))
    rc, out, _, peak = _peak(tmp_path, "check", str(path))
    assert rc == 1
    assert f"{path}:3: line longer than {MAX_LINE_BYTES} bytes" in out, out
    assert peak < PEAK_MB, f"check held {peak:.0f} MB for a {LONG >> 20} MB line"

    rc, out, _, peak = _peak(tmp_path, "show", "--json", str(path))
    assert rc == 0
    assert [r["id"] for r in json.loads(out)] == ["before", "after"]
    assert peak < PEAK_MB, f"show held {peak:.0f} MB for a {LONG >> 20} MB line"


@pytest.mark.slow
def test_sync_streams_past_a_long_line_in_a_peer_file(tmp_path: Path) -> None:
    """A peer's hub file with a 160 MB line: sync reports it as one bad line with its line
    number, merges the records around it, and stays small; the next pass reads nothing
    again."""
    hub = tmp_path / "hub"
    (hub / "notes").mkdir(parents=True)
    _write_with_long_line(hub / "notes" / "peer.jsonl", ("p1", "p2"))
    me = make_replica(tmp_path, "me", str(hub))
    rc, out, err, peak = _peak(tmp_path, "sync", "--json", "--config", str(me.config))
    assert rc == 0, err
    (first,) = json.loads(out)
    assert [(b["line"], b["reason"]) for b in first["bad"]] == [
        (3, f"line longer than {MAX_LINE_BYTES} bytes")
    ]
    assert peak < PEAK_MB, f"sync held {peak:.0f} MB for a {LONG >> 20} MB line"
    assert sorted(r.fields()["id"] for r in me.view().records) == ["p1", "p2"]

    (report,) = me.sync()
    assert report["pulled_records"] == 0
    assert report["bad"] == []
    assert report["pulled_bytes"] < 64 * 1024  # the long line is not read again


def test_the_merge_index_finds_the_records_after_a_long_line(tmp_path: Path) -> None:
    """The persistent index of a destination records where each line starts: a long
    line, cut when read, must not shift the offsets of the lines after it (they would be
    read as garbage, and a merge would not see them: here, it would append a version
    that the destination's newer one beats, rule 14)."""
    dest = tmp_path / "dest.jsonl"
    with open(dest, "wb") as f:
        f.write(header_line(1))
        f.write(b'{"id":"long","kind":"fact","created_at":"2026-01-01T00:00:01Z","text":"')
        f.write(b"x" * CHUNK_BYTES + b'"}\n')  # across a read: cut (`LineSplitter`)
        f.write(entry_line("kept", 5_000_000, "The newer version.") + b"\n")
    src = tmp_path / "src.jsonl"
    src.write_bytes(header_line(1) + entry_line("kept", 3_000_000, "An older one.") + b"\n")
    size = dest.stat().st_size
    state, empty = tmp_path / "state", tmp_path / "empty.jsonl"
    empty.write_bytes(header_line(1))
    merge_indexed(dest, [empty], StateDir(state), now=10_000_000)  # builds the index
    result = merge_indexed(dest, [src], StateDir(state), now=10_000_000)
    assert (result.appended, result.beaten) == (0, 1)
    assert dest.stat().st_size == size
