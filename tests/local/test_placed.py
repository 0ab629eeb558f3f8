"""Lines read again from where a fold found them (`memsync.local.placed`): `runs_at` gives
the lines of `lines_at` as the bytes of runs of adjacent ones, reading runs a few dead
lines apart with one `pread` (issue 20), and still sees a file rewritten in place."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from memsync.local.located import pack_at
from memsync.local.placed import GAP_BYTES, RUN_BYTES, lines_at, runs_at


def _file(path: Path, rng: random.Random, count: int) -> list[tuple[int, bytes]]:
    """`count` lines of random lengths (some over `GAP_BYTES`, some CRLF) written to
    `path`; each line's offset and bytes (without its "\\n")."""
    lines, at = [], 0
    for n in range(count):
        size = rng.choice((10, 200, 3000, GAP_BYTES + 100))
        line = (b"%d:" % n) + b"x" * size + (b"\r" if rng.random() < 0.1 else b"")
        lines.append((at, line))
        at += len(line) + 1
    path.write_bytes(b"".join(line + b"\n" for _, line in lines))
    return lines


@pytest.mark.parametrize("seed", range(6))
def test_runs_hold_the_lines_in_the_order_given(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    files = [_file(tmp_path / f"{n}.jsonl", rng, 400) for n in range(2)]
    chosen = [(n, at, line) for n, lines in enumerate(files) for at, line in lines]
    chosen = [c for c in chosen if rng.random() < 0.8]  # dead lines: gaps
    if seed % 2:
        rng.shuffle(chosen)  # out of the files' order: runs are not read together
    ats = [pack_at(n, at, len(line)) for n, at, line in chosen]
    paths = [tmp_path / f"{n}.jsonl" for n in range(2)]
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        runs = list(runs_at(ats, paths, fds))
        lines = list(lines_at(ats, paths, fds))
    finally:
        for fd in fds:
            os.close(fd)
    assert lines == [line for _, _, line in chosen]
    assert b"".join(runs) == b"".join(line + b"\n" for line in lines)
    assert all(run.endswith(b"\n") and len(run) <= RUN_BYTES for run in runs)
    if not seed % 2:
        assert len(runs) < len(lines)  # adjacent lines come as one run


def test_a_line_moved_by_a_rewrite_in_place_is_an_error_naming_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.jsonl"
    lines = _file(path, random.Random(1), 50)
    ats = [pack_at(0, at, len(line)) for at, line in lines[::2]]  # runs a line apart
    data = path.read_bytes()
    path.write_bytes(data[:100] + data[101:] + b"\n")  # one byte less early: lines move
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError, match=r"m\.jsonl: changed while it was read"):
            list(runs_at(ats, [path], [fd]))
    finally:
        os.close(fd)
