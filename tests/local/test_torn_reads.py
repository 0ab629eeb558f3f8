"""Rule 1 by example: one read that finds complete lines and, after them, a torn tail (a
write in progress) returns the complete lines and stops just past the last "\\n"; the
tail is read, whole, once it is complete."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from memsync.local.storage import read_chunks, read_from

LINES = [b'{"n": %d, "text": "a complete line"}' % i for i in range(5)]
WHOLE = b'{"n": 5, "text": "arrives in two writes"}'


def test_read_from_returns_the_complete_lines_before_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    complete = b"".join(raw + b"\n" for raw in LINES)
    path.write_bytes(complete + WHOLE[:17])
    lines, end = read_from(path)
    assert lines == LINES
    assert end == len(complete)  # not the file's size: the torn tail is read again
    with open(path, "ab") as f:
        f.write(WHOLE[17:] + b"\n")
    assert read_from(path, end) == ([WHOLE], path.stat().st_size)


@pytest.mark.parametrize("chunk_bytes", [16, 50, 64, 1 << 16])
def test_each_chunk_ends_at_its_last_complete_line(tmp_path: Path, chunk_bytes: int) -> None:
    """Whatever the chunk size, the chunks tile the complete lines exactly, and the last
    one ends before the torn tail."""
    path = tmp_path / "m.jsonl"
    complete = b"".join(raw + b"\n" for raw in LINES)
    path.write_bytes(complete + WHOLE[:17])
    chunks = list(read_chunks(path, chunk_bytes=chunk_bytes))
    assert [raw for c in chunks for raw in c.lines] == LINES
    assert [c.first_line for c in chunks] == [
        1 + sum(len(c.lines) for c in chunks[:i]) for i in range(len(chunks))
    ]
    assert chunks[0].start == 0
    assert all(a.end == b.start for a, b in pairwise(chunks))
    assert chunks[-1].end == len(complete)
