"""Where a fold found a record's line, packed in one integer (`Located.at`), and the
lines read again from there: the second pass of a view (`memsync.local.located`) and the
quick part of a persistent view (`memsync.local.viewranks`) read the lines they show
this way, adjacent ones with one `pread`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from memsync.local.storage import errors_named

__all__ = ["LENGTH_BITS", "LENGTH_MASK", "OFFSET_BITS", "OFFSET_MASK", "RUN_BYTES", "lines_at"]

RUN_BYTES = 1024 * 1024
"""The second pass reads at most this much with one `pread` (a run of adjacent lines)."""

# `Located.at` packs (file number, offset, length): a record line is at most 64 KiB and
# its "\r" (rule 4), so 17 bits hold its length; 40 bits hold offsets up to 1 TiB.
LENGTH_BITS = 17
OFFSET_BITS = 40
LENGTH_MASK = (1 << LENGTH_BITS) - 1
OFFSET_MASK = (1 << OFFSET_BITS) - 1


def lines_at(ats: Iterable[int], paths: Sequence[Path], fds: Sequence[int]) -> Iterator[bytes]:
    """The line at each packed place of `ats` (`Located.at`: file number in `paths` and
    `fds`, offset, length), in order, as written (without its "\\n"): adjacent lines are
    read with one `pread`. Raises OSError naming the file when a line is no longer where
    it was read: a file rewritten in place, which memsync never does (rule 13)."""
    # `at >> LENGTH_BITS` is (file number, offset) as one integer: the next line of the
    # same file is at this line's plus its length and "\n".
    start = expect = -1
    count = 0
    for at in ats:
        where = at >> LENGTH_BITS
        if where == expect and where - start < RUN_BYTES:
            expect = where + (at & LENGTH_MASK) + 1
            count += 1
            continue
        if count:
            yield from _run(paths, fds, start, expect, count)
        start, expect, count = where, where + (at & LENGTH_MASK) + 1, 1
    if count:
        yield from _run(paths, fds, start, expect, count)


def _run(
    paths: Sequence[Path], fds: Sequence[int], start: int, end: int, count: int
) -> list[bytes]:
    """The `count` adjacent lines of one file from `start` to `end`, both given as
    `(file number << OFFSET_BITS) | offset`."""
    file_no, offset = start >> OFFSET_BITS, start & OFFSET_MASK
    path = paths[file_no]
    with errors_named(path):
        data = os.pread(fds[file_no], end - start, offset)
    lines = data[:-1].split(b"\n")
    if len(data) != end - start or data[-1:] != b"\n" or len(lines) != count:
        raise OSError(f"{path}: changed while it was read (a file rewritten in place)")
    return lines
