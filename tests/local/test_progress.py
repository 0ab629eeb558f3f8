"""Issue 14: the progress line of long operations.

Shown on stderr only when it is a terminal (tested through a pseudo-terminal), after
`MEMSYNC_PROGRESS_AFTER` seconds (0 here), never on a pipe nor with `--quiet`, and erased
before a `memsync: ...` error line, which stays one line.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.local.fresh import header_line
from memsync.local.progress import ProgressLine, format_line

T0 = 1_767_225_600_000_000


def test_the_line_says_records_bytes_rate_and_time_left() -> None:
    line = format_line("merge", 312_000, 98_100_000, 315_000_000, 2.0)
    assert line == "merge: 312,000 records, 98.1 of 315.0 MB (31%), 49.0 MB/s, 4 s left"
    assert format_line("merge", 0, 0, 0, 0.0) == "merge: 0 records, 0.0 MB"


def test_nothing_is_drawn_before_the_threshold_and_clear_erases_the_line() -> None:
    now = [0.0]
    out = io.StringIO()
    line = ProgressLine(out, after=2.0, clock=lambda: now[0])
    line("merge", 10, 1_000_000, 4_000_000)
    now[0] = 1.0
    line("merge", 20, 2_000_000, 4_000_000)
    assert out.getvalue() == ""
    now[0] = 3.0
    line("merge", 30, 3_000_000, 4_000_000)
    drawn = out.getvalue()
    assert drawn.startswith("\rmerge: 30 records, 3.0 of 4.0 MB (75%), 1.0 MB/s, 1 s left")
    line.clear()
    assert out.getvalue() == drawn + "\r" + " " * (len(drawn) - 1) + "\r"
    line.clear()  # nothing shown: nothing written
    assert out.getvalue() == drawn + "\r" + " " * (len(drawn) - 1) + "\r"


def _source(path: Path, count: int, tail: bytes = b"") -> Path:
    """`count` entries (about 160 bytes each; 60,000 make two read chunks)."""
    lines = [
        json.dumps(
            {
                "id": f"e{n:011d}",
                "kind": "fact",
                "text": f"fact number {n} about the harbor site and its rate limits",
                "created_at": "2026-01-01T00:00:00Z",
            }
        ).encode()
        for n in range(count)
    ]
    path.write_bytes(header_line(T0) + b"\n".join(lines) + b"\n" + tail)
    return path


def _on_pty(args: list[str], env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """Run memsync with stderr on a pseudo-terminal: (exit status, stdout, the terminal)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsync", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        seen += data
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.stdout.close()
    return proc.wait(timeout=60), out, seen


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MEMSYNC_PROGRESS_AFTER": "0",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("index", [["--no-index"], []], ids=["no-index", "indexed"])
def test_a_merge_shows_its_progress_on_a_terminal_then_erases_it(
    tmp_path: Path, env: dict[str, str], index: list[str]
) -> None:
    src = _source(tmp_path / "src.jsonl", 60_000)
    status, out, seen = _on_pty(
        ["merge", str(src), "--into", str(tmp_path / "d.jsonl"), *index], env
    )
    assert status == 0
    assert b"appended 60000 record(s)" in out
    assert seen.startswith(b"\rmerge: ")
    assert b" records, " in seen
    assert b" MB" in seen
    # The last thing on the terminal erases the line: nothing of it is left.
    last = seen.rindex(b"\r", 0, len(seen) - 1)
    assert seen[last:].strip(b"\r ") == b""


@pytest.mark.slow
def test_no_progress_on_a_pipe_nor_with_quiet(tmp_path: Path, env: dict[str, str]) -> None:
    src = _source(tmp_path / "src.jsonl", 60_000)
    piped = subprocess.run(
        [sys.executable, "-m", "memsync", "merge", str(src), "--into", str(tmp_path / "a.jsonl")],
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert piped.stderr == b""
    for quiet in (["--quiet", "merge"], ["merge", "-q"]):
        status, _, seen = _on_pty(
            [*quiet, str(src), "--into", str(tmp_path / f"q{len(quiet[0])}.jsonl")], env
        )
        assert status == 0
        assert seen == b""


@pytest.mark.slow
def test_compaction_shows_its_progress_too(tmp_path: Path, env: dict[str, str]) -> None:
    path = _source(tmp_path / "m.jsonl", 60_000)
    os.utime(path, (0, 0))
    status, out, seen = _on_pty(["compact", str(path), "--quiet-seconds", "0"], env)
    assert status == 0, out
    assert b"\rcompact: reading: " in seen
    assert seen[seen.rindex(b"\r", 0, len(seen) - 1) :].strip(b"\r ") == b""


@pytest.mark.slow
def test_an_error_line_is_alone_on_its_line_after_the_progress(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # A header of a format memsync does not read, in the second chunk: the merge fails
    # after its progress line was drawn (rule 2).
    tail = b'{"format": "agent-memory/9.0", "created_at": "2026-01-01T00:00:00Z"}\n'
    src = _source(tmp_path / "src.jsonl", 60_000, tail)
    status, _, seen = _on_pty(
        ["merge", str(src), "--into", str(tmp_path / "d.jsonl"), "--no-index"], env
    )
    assert status == 2
    assert b"\rmerge: " in seen
    # (The terminal writes "\n" as "\r\n".)
    erased, error = seen.replace(b"\r\n", b"\n").rsplit(b"\r", 1)
    assert erased.endswith(b" ")  # the line was blanked out first
    assert error.startswith(b"memsync: ")
    assert error.endswith(
        b"unsupported format 'agent-memory/9.0'; memsync reads agent-memory/0.x only\n"
    )
    assert error.count(b"\n") == 1
